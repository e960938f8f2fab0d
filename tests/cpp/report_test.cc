#include "gpuscope/report.h"

#include <sstream>
#include <string>

#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::ClockedSession;
using testing::kMs;

size_t WidestLine(const std::string& text) {
  std::istringstream in(text);
  size_t widest = 0;
  for (std::string line; std::getline(in, line);) widest = std::max(widest, line.size());
  return widest;
}

TEST(ReportTest, ShowsQuantilesBreakdownAndThroughputIn80Columns) {
  ClockedSession s;
  const std::string long_name(kMaxPhaseNameLength, 'n');
  for (int i = 0; i < 50; ++i) {
    StepScope step(*s, {.samples = 128});
    s.Phase(Phase::kData, 40 * kMs);
    PhaseScope fwd(*s, Phase::kForward);
    s.clock->Advance(8 * kMs);
    s.Phase(long_name, 2 * kMs);
  }
  s.Phase(Phase::kCheckpoint, 2000 * kMs);
  const std::string report = FormatReport(s->Summarize());
  EXPECT_LE(WidestLine(report), 80u) << report;
  EXPECT_NE(report.find("50 steps in window"), std::string::npos) << report;
  EXPECT_NE(report.find("source: host"), std::string::npos);
  EXPECT_NE(report.find("40.0 ms"), std::string::npos) << report;  // data p50
  EXPECT_NE(report.find("80.0%"), std::string::npos) << report;    // data share
  EXPECT_NE(report.find("samples/s"), std::string::npos);
  EXPECT_NE(report.find("nested"), std::string::npos);
  EXPECT_NE(report.find("checkpoint"), std::string::npos);
  EXPECT_NE(report.find("nnnn~"), std::string::npos) << "long names are shortened";
  EXPECT_EQ(report.find("instrumentation problems"), std::string::npos);
}

TEST(ReportTest, SaysWhenThereAreNoStepsAndWhenScopesWereMisused) {
  ClockedSession s;
  std::string report = FormatReport(s->Summarize());
  EXPECT_NE(report.find("no completed steps"), std::string::npos) << report;
  {
    StepScope a(*s);
    StepScope b(*s);  // nested step
  }
  report = FormatReport(s->Summarize());
  EXPECT_NE(report.find("instrumentation problems"), std::string::npos) << report;
  EXPECT_NE(report.find("steps begun inside a step"), std::string::npos) << report;
  EXPECT_LE(WidestLine(report), 80u) << report;
}

}  // namespace
}  // namespace gpuscope
