// fork(): the child records nothing with the parent's sessions and never
// touches the parent's worker; new sessions in the child work. Real forks.

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"
#include "session/session_impl.h"

namespace gpuscope {
namespace {

// Runs `child` in a forked process and returns its exit status (0 = passed).
template <typename Fn>
int InChild(Fn child) {
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

void RecordSteps(Session& session, int n) {
  for (int i = 0; i < n; ++i) {
    StepScope step(session);
    PhaseScope p(session, Phase::kForward);
  }
}

TEST(ForkTest, ChildRecordsNothingWithTheParentsSession) {
  Session parent(Options{.flush_interval_ms = 1});  // the worker is running
  RecordSteps(parent, 100);
  EXPECT_EQ(parent.Summarize().total_steps, 100);

  const int rc = InChild([&] {
    if (!parent.recording()) return 1;  // flips lazily, on first use in the child
    {
      StepScope step(parent);
      if (step.status() != ScopeStatus::kDisabled) return 2;
    }
    if (parent.recording()) return 3;  // now one branch per scope
    RecordSteps(parent, 50);
    const Summary s = parent.Summarize();  // takes no lock the parent's worker may hold
    if (s.total_steps != 0) return 4;
    if (s.source_reason.find("forked child") == std::string::npos) return 5;
    if (parent.RegisterPhase("x").ok()) return 6;
    parent.Flush();
    parent.Close();  // must not join or signal the parent's worker
    return 0;
  });
  EXPECT_EQ(rc, 0);

  // The parent is unaffected.
  RecordSteps(parent, 10);
  const Summary s = parent.Summarize();
  EXPECT_EQ(s.total_steps, 110);
  EXPECT_EQ(s.misuse.total(), 0);
}

TEST(ForkTest, NewSessionInTheChildWorksWithItsOwnWorker) {
  Session parent(Options{.flush_interval_ms = 1});
  RecordSteps(parent, 10);
  const int rc = InChild([] {
    Session child(Options{.queue_capacity = 64, .flush_interval_ms = 1});
    if (!child.recording()) return 1;
    // More records than the queue holds, over time: only a live worker in
    // the child can drain them without drops.
    for (int batch = 0; batch < 10; ++batch) {
      RecordSteps(child, 10);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (internal::SessionTestPeer::QueuedRecords(child) > 0) {
        if (std::chrono::steady_clock::now() > deadline) return 4;  // no worker in the child
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    const Summary s = child.Summarize();
    if (s.total_steps != 100) return 2;
    if (s.misuse.dropped_records != 0) return 3;
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(parent.Summarize().total_steps, 10);
}

TEST(ForkTest, ChildOfAChildAlsoStaysQuiet) {
  Session parent;
  RecordSteps(parent, 5);
  const int rc = InChild([&] {
    Session child;
    RecordSteps(child, 5);
    const int grandchild = InChild([&] {
      RecordSteps(parent, 5);
      RecordSteps(child, 5);
      return parent.Summarize().total_steps == 0 && child.Summarize().total_steps == 0 ? 0 : 1;
    });
    if (grandchild != 0) return 10 + grandchild;
    return child.Summarize().total_steps == 5 ? 0 : 2;
  });
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace gpuscope
