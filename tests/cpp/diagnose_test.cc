// Each host-side rule fires on a summary built to trigger it and stays silent
// on one built not to; findings are ranked by the step time they explain.

#include "gpuscope/diagnose.h"

#include <string>

#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::ClockedSession;
using ::testing::HasSubstr;
using testing::kMs;

// A loop whose steps spend `data_ms` in data and `compute_ms` in forward.
Summary Loop(int64_t data_ms, int64_t compute_ms, int steps = 20) {
  ClockedSession s;
  for (int i = 0; i < steps; ++i) {
    StepScope step(*s, {.samples = 16});
    s.Phase(Phase::kData, data_ms * kMs);
    s.Phase(Phase::kForward, compute_ms * kMs);
  }
  return s->Summarize();
}

const Finding* Find(const std::vector<Finding>& fs, std::string_view id) {
  for (const Finding& f : fs) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

TEST(DiagnoseTest, InputBoundIsHighAtTwentyPercentOfStepTime) {
  const std::vector<Finding> fs = Diagnose(Loop(30, 70));
  const Finding* f = Find(fs, "input-bound");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kHigh);
  EXPECT_DOUBLE_EQ(f->share, 0.30);
  EXPECT_THAT(f->title, HasSubstr("30%"));
  EXPECT_THAT(f->recommendation, HasSubstr("num_workers"));
  EXPECT_THAT(f->recommendation, HasSubstr("pin_memory"));
  EXPECT_THAT(f->recommendation, HasSubstr("persistent_workers"));
  EXPECT_THAT(f->recommendation, HasSubstr("prefetch_factor"));
  EXPECT_THAT(f->confidence, HasSubstr("medium"));  // host timing
  EXPECT_EQ(f->source, "host");
  EXPECT_EQ(fs.front().id, "input-bound");  // ranked first: it explains the most time
}

TEST(DiagnoseTest, InputBoundWithAGpuSourceCitesTheIdleTimeInData) {
  Summary s = Loop(30, 70);
  s.source = Source::kEvents;
  s.gpu_steps = s.steps;
  s.gpu_idle_pct = 30;
  s.idle_by_cause = {{"data", 30}};
  const std::vector<Finding> fs = Diagnose(s);
  const Finding* f = Find(fs, "input-bound");
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->confidence, HasSubstr("high"));
  EXPECT_EQ(f->source, "events");
  EXPECT_EQ(f->evidence.back(), (std::pair<std::string, double>{"gpu_idle_in_data_pct", 30}));
}

TEST(DiagnoseTest, ALoaderHiddenBehindTheGpusBacklogIsNotInputBound) {
  // 30 % of host time in data, but the GPU worked through its backlog
  // meanwhile: idle 2 % there. The loader costs nothing (yet).
  Summary s = Loop(30, 70);
  s.source = Source::kCupti;
  s.gpu_steps = s.steps;
  s.gpu_idle_pct = 2;
  s.idle_by_cause = {{"data", 2}};
  EXPECT_EQ(Find(Diagnose(s), "input-bound"), nullptr);
  s.idle_by_cause = {{"data", 12}};  // the GPU does wait: 12 %, not the host's 30 %
  s.gpu_idle_pct = 12;
  const std::vector<Finding> fs = Diagnose(s);
  const Finding* f = Find(fs, "input-bound");
  ASSERT_NE(f, nullptr);
  EXPECT_DOUBLE_EQ(f->share, 0.12);
  EXPECT_EQ(f->severity, Severity::kModerate);
}

TEST(DiagnoseTest, InputBoundIsModerateBetweenFiveAndTwentyPercent) {
  const std::vector<Finding> fs = Diagnose(Loop(10, 90));
  const Finding* f = Find(fs, "input-bound");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kModerate);
}

TEST(DiagnoseTest, InputBoundIsSilentUnderFivePercent) {
  EXPECT_EQ(Find(Diagnose(Loop(4, 96)), "input-bound"), nullptr);
  EXPECT_EQ(Find(Diagnose(Loop(0, 50)), "input-bound"), nullptr);
}

TEST(DiagnoseTest, HostOnlyNoticeSaysWhatAGpuSourceWouldAdd) {
  const std::vector<Finding> fs = Diagnose(Loop(4, 96));
  const Finding* f = Find(fs, "host-only");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kInfo);
  EXPECT_THAT(f->recommendation, HasSubstr("CUDA events"));
  EXPECT_THAT(f->recommendation, HasSubstr("CUPTI"));
  Summary with_gpu = Loop(4, 96);
  with_gpu.source = Source::kEvents;
  EXPECT_EQ(Find(Diagnose(with_gpu), "host-only"), nullptr);
}

TEST(DiagnoseTest, InstrumentationProblemsAreAFindingOnlyWhenPresent) {
  EXPECT_EQ(Find(Diagnose(Loop(1, 9)), "instrumentation"), nullptr);
  ClockedSession s;
  {
    StepScope a(*s);
    StepScope b(*s);
  }
  const std::vector<Finding> fs = Diagnose(s->Summarize());
  const Finding* f = Find(fs, "instrumentation");
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->recommendation, HasSubstr("must not nest"));
  ASSERT_EQ(f->evidence.size(), 1u);
  EXPECT_EQ(f->evidence[0].first, "nested_step");
}

TEST(DiagnoseTest, ReportListsFindingsAndJsonCarriesThem) {
  const Summary s = Loop(30, 70);
  const std::string report = FormatReport(s);
  EXPECT_THAT(report,
              HasSubstr("  1. high     input-bound (30% of step time)\n     Input-bound: 30%"));
  const std::string json = ToJson(Diagnose(s));
  EXPECT_THAT(json, HasSubstr("\"id\": \"input-bound\""));
  EXPECT_THAT(json, HasSubstr("\"data_share\": 0.3"));
}

}  // namespace
}  // namespace gpuscope
