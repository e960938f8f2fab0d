// Warm-up steps (Options::warmup_steps) and Session::Reset(): the steps a
// user excludes stay out of the window, the run's histogram and every
// total, and are reported apart; a reset restarts measurement at the call,
// also while another thread records.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gpuscope/testing.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::ClockedSession;
using ::testing::HasSubstr;
using testing::kMs;
using testing::kUs;
using ::testing::Not;

// Step 0 holds the DataLoader workers' start-up (1.47 s), the rest 0.23 ms:
// the loop of the issue.
void StartupLoop(ClockedSession& s, int steps) {
  for (int i = 0; i < steps; ++i) {
    StepScope step(*s, {.samples = 32});
    s.Phase(Phase::kData, i == 0 ? 1470 * kMs : 30 * kUs);
    s.Phase(Phase::kForward, 200 * kUs);
  }
}

TEST(WarmupTest, SlowFirstStepMovesP95OnlyWithoutWarmup) {
  ClockedSession counted(Options{.warmup_steps = 0});
  StartupLoop(counted, 10);
  const Summary all = counted->Summarize();
  EXPECT_EQ(all.steps, 10);
  EXPECT_EQ(all.total_steps, 10);
  EXPECT_GT(all.step_time.p95, 0.5);  // the start-up step drags p95 up
  EXPECT_DOUBLE_EQ(all.step_time.max, 1.4702);
  EXPECT_EQ(all.warmup, WarmupStats{});

  ClockedSession warm(Options{.warmup_steps = 1});
  StartupLoop(warm, 10);
  const Summary s = warm->Summarize();
  EXPECT_EQ(s.steps, 9);
  EXPECT_EQ(s.total_steps, 9);
  EXPECT_DOUBLE_EQ(s.step_time.p95, 230e-6);
  EXPECT_DOUBLE_EQ(s.step_time.max, 230e-6);
  EXPECT_EQ(s.lifetime_step_time.count, 9);
  EXPECT_NEAR(s.lifetime_step_time.max, 230e-6, 230e-6 * 0.01);
  EXPECT_NEAR(s.window_time, 9 * 230e-6, 1e-12);
  EXPECT_EQ(s.warmup.steps, 1);
  EXPECT_DOUBLE_EQ(s.warmup.total, 1.4702);
  EXPECT_DOUBLE_EQ(s.warmup.max, 1.4702);
  // The breakdown is the measured steps' only: data is 30 us of each.
  const PhaseStats* data = s.FindPhase("data");
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->steps, 9);
  EXPECT_DOUBLE_EQ(data->time.max, 30e-6);
  EXPECT_NEAR(data->share, 30.0 / 230, 1e-12);
  ASSERT_TRUE(s.samples_per_second.has_value());
  EXPECT_NEAR(*s.samples_per_second, 32 / 230e-6, 1e-6);
}

TEST(WarmupTest, FewerStepsThanTheWarmupLeaveNothingMeasured) {
  ClockedSession s(Options{.warmup_steps = 5});
  StartupLoop(s, 3);
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.steps, 0);
  EXPECT_EQ(sum.total_steps, 0);
  EXPECT_EQ(sum.lifetime_step_time.count, 0);
  EXPECT_EQ(sum.warmup.steps, 3);
  EXPECT_DOUBLE_EQ(sum.warmup.total, 1.4702 + 2 * 230e-6);
  EXPECT_THAT(FormatReport(sum), HasSubstr("3 warm-up steps excluded (1.47 s, longest 1.47 s)"));
  EXPECT_THAT(FormatReport(sum),
              HasSubstr("no measured steps yet: every step so far was a warm-up"));
  // Two more end the warm-up: only the sixth step on is measured.
  StartupLoop(s, 3);
  const Summary after = s->Summarize();
  EXPECT_EQ(after.warmup.steps, 5);
  EXPECT_EQ(after.steps, 1);
  EXPECT_EQ(after.total_steps, 1);
}

TEST(WarmupTest, ReportHeaderSaysHowManyStepsWereWarmup) {
  ClockedSession s(Options{.warmup_steps = 1});
  StartupLoop(s, 4);
  const std::string report = FormatReport(s->Summarize());
  EXPECT_THAT(report, HasSubstr("3 steps in window (3 total)"));
  EXPECT_THAT(report, HasSubstr("1 warm-up step excluded (1.47 s)"));

  ClockedSession none;
  StartupLoop(none, 4);
  EXPECT_THAT(FormatReport(none->Summarize()), Not(HasSubstr("warm-up")));
}

TEST(WarmupTest, InvalidWarmupIsRefusedSayingTheRange) {
  const absl::Status bad = Options{.warmup_steps = -1}.Validate();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("Options::warmup_steps = -1"));
  EXPECT_THAT(std::string(bad.message()), HasSubstr("from 0 to 1048576"));
  EXPECT_FALSE(Session::Create(Options{.warmup_steps = kMaxWarmupSteps + 1}).ok());
  EXPECT_TRUE(Options{.warmup_steps = kMaxWarmupSteps}.Validate().ok());

  ClockedSession s;
  StartupLoop(s, 2);
  const absl::Status reset = s->Reset(-3);
  EXPECT_EQ(reset.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(reset.message()), HasSubstr("nothing was reset"));
  EXPECT_EQ(s->Summarize().steps, 2);  // untouched
}

TEST(WarmupTest, ResetDropsEarlierStepsAndTotals) {
  ClockedSession s;
  for (int i = 0; i < 5; ++i) {
    StepScope step(*s);
    s.Phase("slow", 50 * kMs);
  }
  s.Phase(Phase::kCheckpoint, 7 * kMs);  // outside steps
  {
    StepScope a(*s);
    StepScope nested(*s);  // misuse: counted, and kept across the reset
  }
  ASSERT_TRUE(s->Reset().ok());
  const Summary empty = s->Summarize();
  EXPECT_EQ(empty.steps, 0);
  EXPECT_EQ(empty.total_steps, 0);
  EXPECT_EQ(empty.lifetime_step_time.count, 0);
  EXPECT_EQ(empty.FindPhase("slow"), nullptr);
  EXPECT_EQ(empty.FindPhase("checkpoint"), nullptr);
  EXPECT_EQ(empty.misuse.nested_step, 1);

  for (int i = 0; i < 3; ++i) {
    StepScope step(*s);
    s.Phase(Phase::kForward, 2 * kMs);
  }
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.steps, 3);
  EXPECT_EQ(sum.total_steps, 3);
  EXPECT_DOUBLE_EQ(sum.step_time.max, 0.002);
  EXPECT_NEAR(sum.lifetime_step_time.max, 0.002, 0.002 * 0.01);
  EXPECT_EQ(sum.FindPhase("slow"), nullptr);
  ASSERT_NE(sum.FindPhase("forward"), nullptr);
  EXPECT_EQ(sum.FindPhase("forward")->steps, 3);
  EXPECT_EQ(sum.misuse.nested_step, 1);
  // Step numbers go on: the series says which steps these were.
  const std::vector<StepPoint> series = s->StepSeries();
  ASSERT_EQ(series.size(), 3u);
  EXPECT_EQ(series.front().index, 6u);
}

TEST(WarmupTest, ResetStartsTheWarmupAgainUnlessToldOtherwise) {
  ClockedSession s(Options{.warmup_steps = 1});
  StartupLoop(s, 3);
  ASSERT_TRUE(s->Reset().ok());  // the session's warm-up: 1 step again
  StartupLoop(s, 3);
  Summary sum = s->Summarize();
  EXPECT_EQ(sum.warmup.steps, 1);
  EXPECT_DOUBLE_EQ(sum.warmup.max, 1.4702);
  EXPECT_EQ(sum.steps, 2);

  ASSERT_TRUE(s->Reset(0).ok());  // "my own warm-up is over": no more
  StartupLoop(s, 3);
  sum = s->Summarize();
  EXPECT_EQ(sum.warmup, WarmupStats{});
  EXPECT_EQ(sum.steps, 3);
  EXPECT_DOUBLE_EQ(sum.step_time.max, 1.4702);
}

// Reset() inside the first step to measure (a loop body that resets at step
// k) keeps that step whole: phases it ended before the call included.
TEST(WarmupTest, StepOpenAtResetIsCountedWhole) {
  ClockedSession s;
  StartupLoop(s, 4);
  {
    StepScope step(*s);
    s.Phase(Phase::kData, 3 * kMs);
    ASSERT_TRUE(s->Reset().ok());
    s.Phase(Phase::kForward, 5 * kMs);
  }
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.steps, 1);
  EXPECT_DOUBLE_EQ(sum.step_time.max, 0.008);
  ASSERT_NE(sum.FindPhase("data"), nullptr);
  EXPECT_DOUBLE_EQ(sum.FindPhase("data")->time.max, 0.003);
  EXPECT_DOUBLE_EQ(sum.FindPhase("forward")->time.max, 0.005);
}

TEST(WarmupTest, ResetOnASessionThatDoesNotRecordIsANoOp) {
  Session off(Options{.enabled = false});
  EXPECT_TRUE(off.Reset().ok());
  Session invalid(Options{.window = 0});
  EXPECT_TRUE(invalid.Reset().ok());
  EXPECT_EQ(invalid.Summarize().steps, 0);
}

// With a GPU source, warm-up steps and steps dropped by a reset still
// advance the device's history, give no numbers, and give back their
// markers.
TEST(WarmupTest, DeviceStepsAfterWarmupAndResetResolve) {
  auto clock = std::make_shared<ManualClock>();
  auto gpu = std::make_shared<SimulatedDevice>();
  Session s(Options{.clock = clock, .stream = 0, .simulated_device = gpu, .warmup_steps = 2});
  const auto step = [&] {
    StepScope st(s);
    {
      PhaseScope p(s, Phase::kData);
      clock->Advance(2 * kMs);
    }
    PhaseScope p(s, Phase::kForward);
    gpu->Launch(4 * kMs);
    clock->Advance(kMs);
  };
  for (int i = 0; i < 6; ++i) step();
  clock->Advance(1000 * kMs);
  Summary sum = s.Summarize();
  EXPECT_EQ(sum.source, Source::kEvents);
  EXPECT_EQ(sum.warmup.steps, 2);
  EXPECT_EQ(sum.steps, 4);
  EXPECT_EQ(sum.gpu_steps, 4);
  EXPECT_EQ(sum.pending_steps, 0);
  EXPECT_TRUE(sum.gpu_idle_pct.has_value());

  for (int i = 0; i < 3; ++i) step();  // still running on the GPU at the reset
  ASSERT_TRUE(s.Reset(0).ok());
  sum = s.Summarize();
  EXPECT_EQ(sum.steps, 0);
  EXPECT_EQ(sum.pending_steps, 0);  // waiting steps of before the reset are not the window's
  for (int i = 0; i < 2; ++i) step();
  clock->Advance(1000 * kMs);
  sum = s.Summarize();
  EXPECT_EQ(sum.steps, 2);
  EXPECT_EQ(sum.gpu_steps, 2);
  EXPECT_EQ(sum.pending_steps, 0);
  s.Close();
  EXPECT_EQ(gpu->live_markers(), 0);
}

TEST(WarmupTest, WarmupRoundTripsThroughJsonAndOlderFilesRead) {
  ClockedSession s(Options{.warmup_steps = 2});
  StartupLoop(s, 5);
  const Summary sum = s->Summarize();
  const std::string json = ToJson(sum);
  EXPECT_THAT(json, HasSubstr("\"warmup\""));
  const absl::StatusOr<Summary> back = SummaryFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->warmup, sum.warmup);
  EXPECT_EQ(back->warmup.steps, 2);
  EXPECT_EQ(*back, sum);

  // A file written before the field existed: no warm-up.
  std::string old = json;
  const size_t at = old.find("\"warmup\"");
  const size_t end = old.find('}', at);
  ASSERT_NE(end, std::string::npos);
  old.erase(at, old.find('"', end) - at);
  const absl::StatusOr<Summary> older = SummaryFromJson(old);
  ASSERT_TRUE(older.ok()) << older.status() << "\n" << old;
  EXPECT_EQ(older->warmup, WarmupStats{});
  EXPECT_EQ(older->steps, sum.steps);

  // Numbers no session writes are refused, naming the field.
  Summary odd = sum;
  odd.warmup.max = odd.warmup.total * 2;
  const absl::Status refused = SummaryFromJson(ToJson(odd)).status();
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.message()), HasSubstr("warmup"));
}

// Resets from another thread while the loop records: every summary stays
// consistent, nothing is counted as misuse, and measurement after the last
// reset is exact. The recorder waits for a reset every 500 steps, so that
// resets interleave with recording however the threads are scheduled.
TEST(WarmupTest, ResetWhileRecordingFromAnotherThread) {
  constexpr int kSteps = 20000;  // 60,000 records: the queue holds them all
  Session session(
      Options{.window = 64, .queue_capacity = 1 << 17, .flush_interval_ms = 1, .warmup_steps = 1});
  std::atomic<bool> recorded{false};
  std::atomic<bool> last_reset_done{false};
  std::atomic<int> resets{0};
  std::thread recorder([&] {  // one recording thread throughout
    for (int i = 0; i < kSteps; ++i) {
      if (i % 500 == 0) {
        while (resets < i / 500) std::this_thread::yield();
      }
      StepScope step(session, {.samples = 8});
      {
        PhaseScope p(session, Phase::kData);
      }
      {
        PhaseScope p(session, Phase::kForward);
      }
    }
    recorded = true;
    while (!last_reset_done) std::this_thread::yield();
    for (int i = 0; i < 6; ++i) StepScope step(session);
  });
  std::atomic<int> bad{0};
  std::thread resetter([&] {
    while (!recorded) {
      if (!session.Reset().ok()) ++bad;
      ++resets;
      std::this_thread::yield();
    }
  });
  std::thread reader([&] {
    while (!recorded) {
      const Summary s = session.Summarize();
      if (s.steps > s.total_steps || s.steps > 64) ++bad;
      if (s.lifetime_step_time.count != s.total_steps) ++bad;
      if (s.warmup.steps > 1) ++bad;
      if (!SummaryFromJson(ToJson(s)).ok()) ++bad;
    }
  });
  resetter.join();
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GE(resets.load(), kSteps / 500 - 1);

  ASSERT_TRUE(session.Reset().ok());
  last_reset_done = true;
  recorder.join();
  const Summary s = session.Summarize();
  EXPECT_EQ(s.warmup.steps, 1);
  EXPECT_EQ(s.total_steps, 5);
  EXPECT_EQ(s.misuse.total(), 0) << FormatReport(s);
}

}  // namespace
}  // namespace gpuscope
