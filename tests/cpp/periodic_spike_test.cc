// Work every N steps inside the step (evaluation, a checkpoint): sessions on
// a ManualClock run loops of 50 ms steps with it, and the summary's periodic
// spikes (core/spikes.h) and the periodic-spike finding must name its phase,
// period and cost, computed by hand here; loops without a recurring spike
// (uniform, one spike, spikes at irregular intervals, a cheap one, one
// within the loop's own spread) must get none. Then the spikes round-trip
// through JSON and show in the text report.

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::ClockedSession;
using testing::Find;
using ::testing::HasSubstr;
using testing::Ids;
using testing::kMs;

// `steps` steps of 50 ms (data 20 ms, forward 30 ms) on a session with a
// window of `window` steps; extra(i, session) adds to step i.
template <typename Extra>
Summary Loop(int steps, Extra extra, int window = 64) {
  ClockedSession s(Options{.window = window});
  for (int i = 0; i < steps; ++i) {
    StepScope step(*s);
    s.Phase(Phase::kData, 20 * kMs);
    s.Phase(Phase::kForward, 30 * kMs);
    extra(i, s);
  }
  return s->Summarize();
}

// Evaluation of 1 s every 10 steps (steps 9, 19, ..., 49) among 50 ms steps.
Summary EvalEveryTenSteps() {
  return Loop(50, [](int i, ClockedSession& session) {
    if (i % 10 == 9) session.Phase(Phase::kEval, 1000 * kMs);
  });
}

TEST(PeriodicSpikeTest, EvaluationEveryTenStepsIsNamedWithItsPeriodAndCost) {
  const Summary s = EvalEveryTenSteps();
  ASSERT_EQ(s.periodic_spikes.size(), 1u);
  const PeriodicSpike& p = s.periodic_spikes[0];
  EXPECT_EQ(p.phase, "eval");
  EXPECT_EQ(p.period_steps, 10);
  EXPECT_EQ(p.occurrences, 5);
  EXPECT_EQ(p.last_step, 49);
  // Each eval step is 1.05 s against a median step of 50 ms; the window is
  // 45 x 50 ms + 5 x 1.05 s = 7.5 s, of which the spikes add 5 s.
  EXPECT_DOUBLE_EQ(p.excess, 1.0);
  EXPECT_DOUBLE_EQ(p.share, 5.0 / 7.5);

  const std::vector<Finding> fs = Diagnose(s);
  const Finding* f = Find(fs, "periodic-spike");
  ASSERT_NE(f, nullptr) << Ids(fs);
  EXPECT_EQ(f->severity, Severity::kHigh);
  EXPECT_DOUBLE_EQ(f->share, 5.0 / 7.5);
  EXPECT_EQ(f->title, "Every 10 steps, phase \"eval\" adds 1.00 s: 67% of step time");
  EXPECT_THAT(f->recommendation, HasSubstr("Evaluate less often"));
  EXPECT_THAT(f->recommendation, HasSubstr("fewer batches"));
  EXPECT_THAT(f->recommendation, HasSubstr("off the training step"));
  EXPECT_THAT(f->evidence, ::testing::Contains(std::pair<std::string, double>("period_steps", 10)));
  EXPECT_THAT(f->confidence, HasSubstr("high"));
  EXPECT_EQ(fs[0].id, "periodic-spike") << "it explains the most step time: " << Ids(fs);
}

TEST(PeriodicSpikeTest, WorkOutsideEveryPhaseIsChargedToUntimedTime) {
  const Summary s = Loop(50, [](int i, ClockedSession& session) {
    if (i % 10 == 9) session.clock->Advance(1000 * kMs);  // in the step, in no phase
  });
  ASSERT_EQ(s.periodic_spikes.size(), 1u);
  EXPECT_EQ(s.periodic_spikes[0].phase, "other");
  EXPECT_EQ(s.periodic_spikes[0].period_steps, 10);
  EXPECT_DOUBLE_EQ(s.periodic_spikes[0].share, 5.0 / 7.5);

  const std::vector<Finding> fs = Diagnose(s);
  const Finding* f = Find(fs, "periodic-spike");
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->title,
              HasSubstr("Every 10 steps, untimed work (outside every phase) adds 1.00 s"));
  EXPECT_THAT(f->recommendation, HasSubstr(".item()"));
  EXPECT_THAT(f->recommendation, HasSubstr("wrap it in a phase"));
  EXPECT_THAT(f->confidence, HasSubstr("medium"));
}

TEST(PeriodicSpikeTest, ACheckpointNestedInTheOptimizerIsNamedRatherThanTheOptimizer) {
  // Both phases grow by the save; the one that occurs only then is named.
  const Summary s = Loop(40, [](int i, ClockedSession& session) {
    PhaseScope opt(*session, Phase::kOptimizer);
    session.clock->Advance(5 * kMs);
    if (i % 5 == 4) session.Phase(Phase::kCheckpoint, 500 * kMs);
  });
  ASSERT_EQ(s.periodic_spikes.size(), 1u);
  EXPECT_EQ(s.periodic_spikes[0].phase, "checkpoint");
  EXPECT_EQ(s.periodic_spikes[0].period_steps, 5);
  EXPECT_EQ(s.periodic_spikes[0].occurrences, 8);
  const std::vector<Finding> fs = Diagnose(s);
  const Finding* f = Find(fs, "periodic-spike");
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->title, HasSubstr("Every 5 steps, phase \"checkpoint\" adds 500 ms"));
  EXPECT_THAT(f->recommendation, HasSubstr("torch.distributed.checkpoint.async_save"));
  EXPECT_THAT(f->recommendation, HasSubstr("save less often"));
}

TEST(PeriodicSpikeTest, AStepOffThePeriodAndASpikeOverTwoStepsStillRecur) {
  // Evaluation at steps 9, 19, 30 (half of it spilling into 31), 39 and 49:
  // gaps 10, 11, 9, 10; the two slow steps in a row are one spike.
  const Summary s = Loop(50, [](int i, ClockedSession& session) {
    if (i == 9 || i == 19 || i == 39 || i == 49) session.Phase(Phase::kEval, 1000 * kMs);
    if (i == 30 || i == 31) session.Phase(Phase::kEval, 500 * kMs);
  });
  ASSERT_EQ(s.periodic_spikes.size(), 1u);
  EXPECT_EQ(s.periodic_spikes[0].phase, "eval");
  EXPECT_EQ(s.periodic_spikes[0].period_steps, 10);
  EXPECT_EQ(s.periodic_spikes[0].occurrences, 5);
  EXPECT_DOUBLE_EQ(s.periodic_spikes[0].excess, 1.0);
}

TEST(PeriodicSpikeTest, AnEvaluationInTheSameStepAsACheckpointDoesNotHideEither) {
  // Evaluation (250 ms) every 50 steps, a checkpoint (2 s) every 200, right
  // after an evaluation; 600 steps through a window of 512 (steps 88-599).
  // The three steps with both go to the checkpoint, which grew most: the
  // evaluations left are 50 or 100 steps apart, still every 50 steps.
  const Summary s = Loop(
      600,
      [](int i, ClockedSession& session) {
        if (i % 50 == 49) session.Phase(Phase::kEval, 250 * kMs);
        if (i % 200 == 199) session.Phase(Phase::kCheckpoint, 2000 * kMs);
      },
      512);
  ASSERT_EQ(s.periodic_spikes.size(), 2u);
  // 512 x 50 ms + 11 evaluations x 250 ms + 3 checkpoints x 2 s = 34.35 s.
  const PeriodicSpike& save = s.periodic_spikes[0];
  EXPECT_EQ(save.phase, "checkpoint");
  EXPECT_EQ(save.period_steps, 200);
  EXPECT_EQ(save.occurrences, 3);
  EXPECT_DOUBLE_EQ(save.excess, 2.25);
  EXPECT_DOUBLE_EQ(save.share, 6.75 / 34.35);
  const PeriodicSpike& eval = s.periodic_spikes[1];
  EXPECT_EQ(eval.phase, "eval");
  EXPECT_EQ(eval.period_steps, 50);
  EXPECT_EQ(eval.occurrences, 8);
  EXPECT_DOUBLE_EQ(eval.share, 2.0 / 34.35);

  // One finding, for the larger; the other's fix comes with it (5.8 %).
  const std::vector<Finding> fs = Diagnose(s);
  const Finding* f = Find(fs, "periodic-spike");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kModerate);
  EXPECT_THAT(f->title, HasSubstr("Every 200 steps, phase \"checkpoint\" adds 2.25 s: 20%"));
  EXPECT_THAT(f->recommendation,
              HasSubstr("Also every 50 steps, phase \"eval\" adds 250 ms (6% of step time)"));
  EXPECT_THAT(f->recommendation, HasSubstr("Evaluate less often"));
}

TEST(PeriodicSpikeTest, AWindowThatHasMovedOnCountsTheSpikesStillInIt) {
  // 90 steps through a window of 64 (chunks of 16, the oldest partly gone):
  // of the evaluations at steps 9, 19, ..., 89, those at 29 to 89 remain.
  const Summary s = Loop(90, [](int i, ClockedSession& session) {
    if (i % 10 == 9) session.Phase(Phase::kEval, 1000 * kMs);
  });
  ASSERT_EQ(s.steps, 64);
  ASSERT_EQ(s.periodic_spikes.size(), 1u);
  EXPECT_EQ(s.periodic_spikes[0].phase, "eval");
  EXPECT_EQ(s.periodic_spikes[0].occurrences, 7);
  EXPECT_EQ(s.periodic_spikes[0].last_step, 89);
  // 57 x 50 ms + 7 x 1.05 s = 10.2 s, of which the spikes add 7 s.
  EXPECT_DOUBLE_EQ(s.periodic_spikes[0].share, 7.0 / 10.2);
}

TEST(PeriodicSpikeTest, UniformStepsHaveNoSpike) {
  const Summary s = Loop(50, [](int, ClockedSession&) {});
  EXPECT_TRUE(s.periodic_spikes.empty());
  EXPECT_EQ(Find(Diagnose(s), "periodic-spike"), nullptr);
}

TEST(PeriodicSpikeTest, ASingleSlowStepDoesNotRecur) {
  const Summary s = Loop(50, [](int i, ClockedSession& session) {
    if (i == 17) session.Phase(Phase::kEval, 1000 * kMs);
  });
  EXPECT_TRUE(s.periodic_spikes.empty());
  EXPECT_EQ(Find(Diagnose(s), "periodic-spike"), nullptr);
}

TEST(PeriodicSpikeTest, SpikesAtIrregularIntervalsHaveNoPeriod) {
  // Gaps 8, 15, 4, 14: no period fits three of them.
  const Summary s = Loop(50, [](int i, ClockedSession& session) {
    if (i == 3 || i == 11 || i == 26 || i == 30 || i == 44) session.Phase(Phase::kEval, 1000 * kMs);
  });
  EXPECT_TRUE(s.periodic_spikes.empty());
  EXPECT_EQ(Find(Diagnose(s), "periodic-spike"), nullptr);
}

TEST(PeriodicSpikeTest, ACheapPeriodicSpikeIsInTheSummaryButNotAFinding) {
  // 20 ms every 10 steps: 5 x 20 ms of a 2.6 s window, 3.8 %, under the
  // rule's 5 % line.
  const Summary s = Loop(50, [](int i, ClockedSession& session) {
    if (i % 10 == 9) session.Phase(Phase::kEval, 20 * kMs);
  });
  ASSERT_EQ(s.periodic_spikes.size(), 1u);
  EXPECT_EQ(s.periodic_spikes[0].period_steps, 10);
  EXPECT_DOUBLE_EQ(s.periodic_spikes[0].share, 0.1 / 2.6);
  EXPECT_EQ(Find(Diagnose(s), "periodic-spike"), nullptr);
}

TEST(PeriodicSpikeTest, AStepWithinTheLoopsOwnSpreadIsNotASpike) {
  // Steps of 50 and 70 ms in turn (median 60 ms, median deviation 10 ms):
  // 35 ms more every 10 steps (105 ms steps) is within 3.5 robust deviations
  // (52 ms) of the median, though over a quarter of it.
  const Summary s = Loop(50, [](int i, ClockedSession& session) {
    session.clock->Advance(i % 2 == 0 ? 0 : 20 * kMs);
    if (i % 10 == 9) session.Phase(Phase::kEval, 35 * kMs);
  });
  EXPECT_TRUE(s.periodic_spikes.empty());
}

TEST(PeriodicSpikeTest, SpikesRoundTripThroughJsonAndOlderFilesStillRead) {
  const Summary s = EvalEveryTenSteps();
  const std::string json = ToJson(s);
  EXPECT_THAT(json, HasSubstr("\"periodic_spikes\""));
  const absl::StatusOr<Summary> back = SummaryFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->periodic_spikes, s.periodic_spikes);
  EXPECT_EQ(*back, s);

  // Saved before the field existed: read, with no spikes.
  const size_t at = json.find("  \"periodic_spikes\"");
  const size_t end = json.find("\n  \"", at + 1);
  ASSERT_NE(at, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string older = json.substr(0, at) + json.substr(end + 1);
  ASSERT_EQ(older.find("periodic_spikes"), std::string::npos) << older;
  const absl::StatusOr<Summary> old = SummaryFromJson(older);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_TRUE(old->periodic_spikes.empty());

  // A spike no session writes (more occurrences than steps) is refused.
  Summary bad = s;
  bad.periodic_spikes[0].occurrences = 51;
  EXPECT_EQ(SummaryFromJson(ToJson(bad)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PeriodicSpikeTest, TheReportSaysWhatRunsEveryNStepsIn80Columns) {
  const std::string report = FormatReport(EvalEveryTenSteps());
  EXPECT_THAT(report, HasSubstr("spikes      every 10 steps, phase eval adds 1.00 s: 66.7% of "
                                "step time"));
  EXPECT_THAT(report, HasSubstr("periodic-spike"));
  std::string line;
  for (std::istringstream in(report); std::getline(in, line);) {
    EXPECT_LE(line.size(), 80u) << line;
  }
}

}  // namespace
}  // namespace gpuscope
