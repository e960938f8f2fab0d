// Session behaviour on a ManualClock: the phase breakdown, nesting, phases
// outside steps, throughput, disabling, closing, and the background worker.

#include "gpuscope/session.h"

#include <stdlib.h>

#include <chrono>
#include <limits>
#include <numeric>
#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "session/session_impl.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::ClockedSession;
using testing::kMs;
using testing::kUs;

double BreakdownSum(const Summary& s) {
  double sum = 0;
  for (const PhaseStats& p : s.phases) sum += p.share;
  return sum;
}

TEST(SessionTest, BreakdownIsExactWithAManualClock) {
  ClockedSession s;
  for (int i = 0; i < 10; ++i) {
    StepScope step(*s, {.samples = 64});
    s.Phase(Phase::kData, 30 * kMs);
    s.Phase(Phase::kH2D, 2 * kMs);
    s.Phase(Phase::kForward, 10 * kMs);
    s.clock->Advance(3 * kMs);  // outside any phase: "other"
  }
  const Summary sum = s->Summarize();
  ASSERT_EQ(sum.steps, 10);
  EXPECT_DOUBLE_EQ(sum.step_time.p50, 0.045);
  EXPECT_DOUBLE_EQ(sum.window_time, 0.45);
  EXPECT_EQ(sum.source, Source::kHost);
  EXPECT_FALSE(sum.gpu_idle_pct.has_value());
  EXPECT_TRUE(sum.idle_by_cause.empty());
  const PhaseStats* data = sum.FindPhase("data");
  const PhaseStats* other = sum.FindPhase("other");
  ASSERT_NE(data, nullptr);
  ASSERT_NE(other, nullptr);
  EXPECT_NEAR(data->inclusive_share, 30.0 / 45, 1e-12);
  EXPECT_NEAR(data->share, 30.0 / 45, 1e-12);
  EXPECT_DOUBLE_EQ(data->time.p95, 0.030);
  EXPECT_EQ(data->steps, 10);
  EXPECT_EQ(data->count, 10);
  EXPECT_TRUE(data->builtin);
  EXPECT_TRUE(data->top_level);
  EXPECT_NEAR(other->share, 3.0 / 45, 1e-12);
  EXPECT_DOUBLE_EQ(other->time.p50, 0.003);
  EXPECT_NEAR(BreakdownSum(sum), 1.0, 1e-12);
  // Ordered by share: data, forward, other, h2d.
  ASSERT_EQ(sum.phases.size(), 4u);
  EXPECT_EQ(sum.phases[0].name, "data");
  EXPECT_EQ(sum.phases[1].name, "forward");
  EXPECT_EQ(sum.phases[2].name, "other");
  EXPECT_EQ(sum.phases[3].name, "h2d");
  ASSERT_TRUE(sum.samples_per_second.has_value());
  EXPECT_NEAR(*sum.samples_per_second, 64 / 0.045, 1e-6);
  EXPECT_FALSE(sum.tokens_per_second.has_value());
  EXPECT_EQ(sum.misuse, MisuseCounts{});
}

// Shares of top-level phases plus "other" sum to 1 for random loops with
// nested, repeated and missing phases.
TEST(SessionTest, BreakdownSharesSumToOneOnRandomLoops) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    ClockedSession s(Options{.window = 1 + static_cast<int>(rng() % 50)});
    const int steps = 1 + static_cast<int>(rng() % 120);
    for (int i = 0; i < steps; ++i) {
      StepScope step(*s);
      const int phases = static_cast<int>(rng() % 5);
      for (int p = 0; p < phases; ++p) {
        PhaseScope outer(*s, static_cast<Phase>(rng() % kNumBuiltinPhases));
        s.clock->Advance(static_cast<int64_t>(rng() % (5 * kMs)));
        if (rng() % 3 == 0) s.Phase("inner", static_cast<int64_t>(rng() % kMs));
      }
      s.clock->Advance(static_cast<int64_t>(rng() % kMs));
    }
    const Summary sum = s->Summarize();
    if (sum.window_time > 0) {
      EXPECT_NEAR(BreakdownSum(sum), 1.0, 1e-9) << "trial " << trial;
    }
    for (const PhaseStats& p : sum.phases) {
      EXPECT_LE(p.share, p.inclusive_share + 1e-12) << p.name;
      EXPECT_LE(p.inclusive_share, 1.0 + 1e-12) << p.name;
    }
  }
}

TEST(SessionTest, NestedPhasesKeepTheirOwnStatsOutsideTheBreakdown) {
  ClockedSession s;
  const PhaseId attention = s->RegisterPhase("attention").value();
  for (int i = 0; i < 4; ++i) {
    StepScope step(*s);
    PhaseScope forward(*s, Phase::kForward);
    s.clock->Advance(6 * kMs);
    s.Phase(attention, 4 * kMs);
  }
  const Summary sum = s->Summarize();
  const PhaseStats* fwd = sum.FindPhase("forward");
  const PhaseStats* att = sum.FindPhase("attention");
  ASSERT_NE(fwd, nullptr);
  ASSERT_NE(att, nullptr);
  EXPECT_DOUBLE_EQ(fwd->share, 1.0);
  EXPECT_FALSE(att->top_level);
  EXPECT_FALSE(att->builtin);
  EXPECT_DOUBLE_EQ(att->share, 0.0);
  EXPECT_DOUBLE_EQ(att->inclusive_share, 0.4);
  EXPECT_DOUBLE_EQ(att->time.p50, 0.004);
  EXPECT_NEAR(BreakdownSum(sum), 1.0, 1e-12);
}

// A phase repeated in a step, or nested in itself, is the union of its
// intervals: never double counted.
TEST(SessionTest, RepeatedAndSelfNestedPhasesCountTheirUnion) {
  ClockedSession s;
  {
    StepScope step(*s);
    s.Phase(Phase::kData, 2 * kMs);
    s.Phase(Phase::kForward, 1 * kMs);
    s.Phase(Phase::kData, 3 * kMs);
    PhaseScope outer(*s, "block");
    s.clock->Advance(1 * kMs);
    s.Phase("block", 2 * kMs);  // recursion: block inside block
  }
  const Summary sum = s->Summarize();
  const PhaseStats* data = sum.FindPhase("data");
  const PhaseStats* block = sum.FindPhase("block");
  EXPECT_EQ(data->count, 2);
  EXPECT_DOUBLE_EQ(data->time.p50, 0.005);
  EXPECT_EQ(block->count, 2);
  EXPECT_DOUBLE_EQ(block->total, 0.003);
  EXPECT_DOUBLE_EQ(block->share, 3.0 / 9);
  EXPECT_NEAR(BreakdownSum(sum), 1.0, 1e-12);
}

TEST(SessionTest, PhasesOutsideStepsAreRecordedOnTheirOwn) {
  ClockedSession s;
  for (int i = 0; i < 3; ++i) {
    {
      StepScope step(*s);
      s.Phase(Phase::kForward, 10 * kMs);
    }
    s.Phase(Phase::kCheckpoint, 500 * kMs);  // between steps
  }
  const Summary sum = s->Summarize();
  EXPECT_DOUBLE_EQ(sum.window_time, 0.030);  // checkpoints are not step time
  const PhaseStats* ckpt = sum.FindPhase("checkpoint");
  ASSERT_NE(ckpt, nullptr);
  EXPECT_EQ(ckpt->steps, 0);
  EXPECT_EQ(ckpt->outside_steps_count, 3);
  EXPECT_DOUBLE_EQ(ckpt->outside_steps_total, 1.5);
  EXPECT_DOUBLE_EQ(ckpt->inclusive_share, 0.0);
  EXPECT_NEAR(BreakdownSum(sum), 1.0, 1e-12);
  EXPECT_EQ(sum.misuse, MisuseCounts{});  // not a misuse
}

TEST(SessionTest, ThroughputUsesOnlyStepsThatGaveCounts) {
  ClockedSession s;
  {
    StepScope step(*s, {.samples = 32, .tokens = 4096});
    s.clock->Advance(100 * kMs);
  }
  {
    StepScope step(*s);  // no counts: not part of throughput
    s.clock->Advance(900 * kMs);
  }
  const Summary sum = s->Summarize();
  EXPECT_DOUBLE_EQ(*sum.samples_per_second, 320.0);
  EXPECT_DOUBLE_EQ(*sum.tokens_per_second, 40960.0);
}

TEST(SessionTest, SummaryIncludesAStepThatJustEnded) {
  ClockedSession s(Options{.flush_interval_ms = 10000});  // the worker will not get there first
  for (int i = 0; i < 3; ++i) {
    {
      StepScope step(*s);
      s.clock->Advance(kMs);
    }
    EXPECT_EQ(s->Summarize().total_steps, i + 1);
  }
}

// Cancel() drops a step and everything recorded inside it, without counting
// it as a misuse or an incomplete step: how steps() discards the probe for
// an item that never came.
TEST(SessionTest, CancelledStepLeavesNoTrace) {
  ClockedSession s;
  {
    StepScope step(*s);
    s.Phase(Phase::kForward, kMs);
  }
  const ScopeToken probe = s->BeginStep();
  s.Phase(Phase::kData, 5 * kMs);
  EXPECT_EQ(s->Cancel(probe), ScopeStatus::kOk);
  EXPECT_EQ(s->End(probe), ScopeStatus::kAlreadyEnded);
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.total_steps, 1);
  EXPECT_EQ(sum.FindPhase("data"), nullptr);
  EXPECT_EQ(sum.misuse.incomplete_steps, 0);
  EXPECT_EQ(sum.misuse.stale_end, 1);  // only the End after the Cancel
}

TEST(SessionTest, StepCountsCanBeSetOnceTheBatchArrives) {
  ClockedSession s;
  const ScopeToken step = s->BeginStep();
  s.Phase(Phase::kData, 10 * kMs);
  s->SetStepCounts(64, 2048);
  s.clock->Advance(90 * kMs);
  s->End(step);
  s->SetStepCounts(1, 1);  // no open step: nothing
  const Summary sum = s->Summarize();
  EXPECT_DOUBLE_EQ(*sum.samples_per_second, 640.0);
  EXPECT_DOUBLE_EQ(*sum.tokens_per_second, 20480.0);
}

TEST(SessionTest, CustomPhaseByNameAndByIdAreTheSamePhase) {
  ClockedSession s;
  const PhaseId id = s->RegisterPhase("attention").value();
  {
    StepScope step(*s);
    s.Phase(id, kMs);
    s.Phase("attention", kMs);
    s.Phase(std::string_view("attention"), kMs);
  }
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.FindPhase("attention")->count, 3);
  EXPECT_EQ(sum.phases.size(), 2u);  // attention and other
}

TEST(SessionTest, DisabledSessionRecordsNothing) {
  ClockedSession s(Options{.enabled = false});
  EXPECT_FALSE(s->recording());
  EXPECT_TRUE(s->status().ok());
  {
    StepScope step(*s);
    EXPECT_EQ(step.status(), ScopeStatus::kDisabled);
    s.Phase(Phase::kData, kMs);
  }
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.total_steps, 0);
  EXPECT_EQ(sum.window, kDefaultWindow);
  EXPECT_NE(sum.source_reason.find("disabled"), std::string::npos);
}

TEST(SessionTest, EnvironmentVariableDisablesEverySession) {
  ASSERT_EQ(setenv("GPUSCOPE_DISABLE", "1", 1), 0);
  ClockedSession s;
  unsetenv("GPUSCOPE_DISABLE");
  EXPECT_FALSE(s->recording());
  {
    StepScope step(*s);
    s.clock->Advance(kMs);
  }
  EXPECT_EQ(s->Summarize().total_steps, 0);
  ASSERT_EQ(setenv("GPUSCOPE_DISABLE", "0", 1), 0);
  ClockedSession on;
  unsetenv("GPUSCOPE_DISABLE");
  EXPECT_TRUE(on->recording());
}

TEST(SessionTest, InvalidOptionsGiveAStatusAndADisabledSession) {
  for (int window : {0, -1, kMaxWindow + 1}) {
    const absl::StatusOr<std::unique_ptr<Session>> created =
        Session::Create(Options{.window = window});
    ASSERT_FALSE(created.ok());
    EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(created.status().message().find("Options::window"), std::string_view::npos);

    Session session(Options{.window = window});
    EXPECT_FALSE(session.recording());
    EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument);
    {
      StepScope step(session);
    }
    const Summary sum = session.Summarize();  // still answers
    EXPECT_EQ(sum.total_steps, 0);
    EXPECT_NE(sum.source_reason.find("Options::window"), std::string::npos);
  }
  EXPECT_EQ(Options{.max_phases = 9}.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Options{.queue_capacity = 10}.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Options{.flush_interval_ms = 0}.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Options{}.Validate().ok());
  // The rank exchange's options: 0 is "not periodic" / "the default timeout".
  EXPECT_TRUE((Options{.rank_interval_s = 0, .rank_timeout_s = 0}.Validate().ok()));
  EXPECT_TRUE(
      (Options{.rank_interval_s = kMinRankIntervalS, .rank_timeout_s = 0.5}.Validate().ok()));
  for (double bad : {0.05, -1.0, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_EQ(Options{.rank_interval_s = bad}.Validate().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  for (double bad :
       {-0.5, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_EQ(Options{.rank_timeout_s = bad}.Validate().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_TRUE(Session::Create().ok());
}

TEST(SessionTest, CloseStopsRecordingAndKeepsTheSummary) {
  ClockedSession s;
  {
    StepScope step(*s);
    s.clock->Advance(kMs);
  }
  s->Close();
  s->Close();  // idempotent
  EXPECT_FALSE(s->recording());
  {
    StepScope step(*s);
    EXPECT_EQ(step.status(), ScopeStatus::kDisabled);
  }
  EXPECT_EQ(s->Summarize().total_steps, 1);
}

// The background worker drains the queue on its own: a queue far smaller
// than what is recorded never overflows as long as the worker keeps up.
TEST(SessionTest, BackgroundWorkerDrainsTheQueue) {
  ClockedSession s(Options{.queue_capacity = 64, .flush_interval_ms = 1});
  for (int batch = 0; batch < 20; ++batch) {
    for (int i = 0; i < 15; ++i) {  // 30 records, under the capacity
      StepScope step(*s);
      s.Phase(Phase::kForward, kMs);
    }
    // Nobody but the worker consumes: wait until it has.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (internal::SessionTestPeer::QueuedRecords(*s.session) > 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(internal::SessionTestPeer::QueuedRecords(*s.session), 0u) << "worker never drained";
  }
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.total_steps, 300);
  EXPECT_EQ(sum.misuse.dropped_records, 0);
}

TEST(SessionTest, FullQueueDropsAndCountsInsteadOfWaiting) {
  ClockedSession s(Options{.queue_capacity = 64, .flush_interval_ms = 10000});
  {
    StepScope step(*s);
    for (int i = 0; i < 1000; ++i) s.Phase(Phase::kForward, kUs);  // far more records than fit
  }
  s->Flush();  // a reader drains; the next step fits
  {
    StepScope step(*s);
    s.Phase(Phase::kForward, kMs);
  }
  const Summary sum = s->Summarize();
  EXPECT_GT(sum.misuse.dropped_records, 0);
  EXPECT_EQ(sum.misuse.incomplete_steps, 1);  // the first step is left out, not misreported
  EXPECT_EQ(sum.total_steps, 1);
  EXPECT_DOUBLE_EQ(sum.step_time.p50, 0.001);
}

}  // namespace
}  // namespace gpuscope
