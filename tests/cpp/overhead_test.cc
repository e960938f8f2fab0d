// gpuscope's own cost in the summary (Summary::overhead): the scope cost
// measured on this machine, records per step, the worker's CPU, and that
// measuring it leaves the session's state and the training thread alone.

#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "backends/telemetry/process_roles.h"
#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"

namespace gpuscope {
namespace {

using ::testing::HasSubstr;

TEST(OverheadTest, TheSummarySaysWhatRecordingCost) {
  Session s(Options{.window = 32, .telemetry_interval_ms = 0});
  int training_tid = 0;
  // The training loop runs on its own thread: the summary (and the
  // calibration it runs once) on this one.
  std::thread loop([&] {
    training_tid = static_cast<int>(syscall(SYS_gettid));
    for (int i = 0; i < 20; ++i) {
      StepScope step(s);
      {
        PhaseScope data(s, Phase::kData);
      }
      {
        PhaseScope forward(s, Phase::kForward);
      }
      PhaseScope backward(s, Phase::kBackward);
    }
  });
  loop.join();
  const Summary sum = s.Summarize();
  ASSERT_TRUE(sum.overhead.scope_ns.has_value());
  EXPECT_GT(*sum.overhead.scope_ns, 0.0);
  EXPECT_LT(*sum.overhead.scope_ns, 100'000.0);          // a scope is not a tenth of a millisecond
  EXPECT_DOUBLE_EQ(sum.overhead.records_per_step, 4.0);  // the step and its three phases
  EXPECT_GE(sum.overhead.worker_cpu_share, 0.0);
  EXPECT_LE(sum.overhead.worker_cpu_share, 1.0);
  EXPECT_EQ(sum.overhead.activity_buffers, 0);  // host only: no CUPTI
  // The calibration's private session neither took the training thread's
  // place in the telemetry nor added anything to this session.
  EXPECT_EQ(internal::TrainingThread(), training_tid);
  EXPECT_EQ(sum.total_steps, 20);
  EXPECT_EQ(sum.FindPhase("gpuscope calibration"), nullptr);
  EXPECT_EQ(sum.misuse.total(), 0);
  // Measured once per process: the next summary says the same.
  EXPECT_EQ(s.Summarize().overhead.scope_ns, sum.overhead.scope_ns);
  const std::string report = FormatReport(sum);
  EXPECT_THAT(report, HasSubstr("gpuscope's own cost:"));
  EXPECT_THAT(report, HasSubstr("x 4.0 scopes a step"));
}

TEST(OverheadTest, RoundTripsThroughJsonAndOlderFilesReadWithout) {
  Summary s;
  s.version = "test";
  s.overhead.scope_ns = 61.5;
  s.overhead.records_per_step = 6;
  s.overhead.worker_cpu_s = 1.25;
  s.overhead.worker_cpu_share = 0.002;
  s.overhead.activity_buffers = 7;
  const std::string json = ToJson(s);
  absl::StatusOr<Summary> back = SummaryFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->overhead, s.overhead);
  // A file written before the field existed.
  std::string old = json;
  const size_t at = old.find("\"overhead\"");
  ASSERT_NE(at, std::string::npos);
  const size_t end = old.find('}', at);
  old.erase(at, end - at + 2);  // the object and the comma after it
  absl::StatusOr<Summary> older = SummaryFromJson(old);
  ASSERT_TRUE(older.ok()) << older.status() << "\n" << old;
  EXPECT_FALSE(older->overhead.scope_ns.has_value());
}

}  // namespace
}  // namespace gpuscope
