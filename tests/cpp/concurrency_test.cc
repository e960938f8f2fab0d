// Summarize() from other threads while the recording thread records and the
// background worker drains. ThreadSanitizer runs this binary.

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"

namespace gpuscope {
namespace {

double BreakdownSum(const Summary& s) {
  double sum = 0;
  for (const PhaseStats& p : s.phases) sum += p.share;
  return sum;
}

TEST(ConcurrencyTest, SummarizeWhileRecordingSeesConsistentSnapshots) {
  // The queue holds every record of the run, so that nothing is dropped even
  // if the worker and readers are starved on a loaded machine.
  Session session(Options{.window = 64, .queue_capacity = 1 << 18, .flush_interval_ms = 1});
  const PhaseId custom = session.RegisterPhase("custom").value();
  std::atomic<bool> done{false};
  constexpr int kSteps = 20000;

  std::thread recorder([&] {
    for (int i = 0; i < kSteps; ++i) {
      StepScope step(session, {.samples = 8});
      {
        PhaseScope p(session, Phase::kData);
      }
      {
        PhaseScope p(session, Phase::kForward);
        PhaseScope q(session, custom);
      }
      {
        PhaseScope p(session, "named");
      }
    }
    done = true;
  });

  std::vector<std::thread> readers;
  std::atomic<int> bad{0};
  std::atomic<int64_t> summaries{0};
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      int64_t last_total = 0;
      while (!done) {
        const Summary s = session.Summarize();
        ++summaries;
        if (s.total_steps < last_total) ++bad;  // never goes backwards
        if (s.steps > 64 || s.steps > s.total_steps) ++bad;
        if (s.window_time > 0 && std::abs(BreakdownSum(s) - 1.0) > 1e-9) ++bad;
        last_total = s.total_steps;
      }
    });
  }
  recorder.join();
  for (std::thread& t : readers) t.join();

  const Summary final_summary = session.Summarize();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(summaries.load(), 0);
  EXPECT_EQ(final_summary.total_steps, kSteps);
  EXPECT_EQ(final_summary.misuse.total(), 0) << FormatReport(final_summary);
  EXPECT_EQ(final_summary.FindPhase("custom")->steps, 64);
}

// Several sessions, each recorded by its own thread, share the worker.
TEST(ConcurrencyTest, OneSessionPerThreadShareTheWorker) {
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int t = 0; t < kThreads; ++t) {
    sessions.push_back(std::make_unique<Session>(Options{.window = 32, .flush_interval_ms = 2}));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3000 + t; ++i) {  // 6000 records: fits the default queue
        StepScope step(*sessions[static_cast<size_t>(t)]);
        PhaseScope p(*sessions[static_cast<size_t>(t)], Phase::kForward);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    const Summary s = sessions[static_cast<size_t>(t)]->Summarize();
    EXPECT_EQ(s.total_steps, 3000 + t);
    EXPECT_EQ(s.misuse.total(), 0);
  }
}

// Sessions come and go while the worker runs; closing one from another
// thread while it records is safe.
TEST(ConcurrencyTest, CloseFromAnotherThreadWhileRecording) {
  for (int round = 0; round < 20; ++round) {
    Session session(Options{.flush_interval_ms = 1});
    std::atomic<bool> stop{false};
    std::thread recorder([&] {
      while (!stop) {
        StepScope step(session);
        PhaseScope p(session, Phase::kData);
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    session.Close();
    stop = true;
    recorder.join();
    EXPECT_FALSE(session.recording());
    (void)session.Summarize();
  }
}

}  // namespace
}  // namespace gpuscope
