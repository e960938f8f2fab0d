#include "gpuscope/report.h"

#include <sstream>
#include <string>
#include <vector>

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

// Columns a UTF-8 line takes (one per code point).
size_t Columns(const std::string& line) {
  size_t n = 0;
  for (char c : line) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// Without a GPU the report says why once, in its header; the host-only
// finding refers to it there (its own text keeps the reason, for JSON and
// Python readers).
TEST(ReportTest, SaysWhyThereIsNoGpuSourceOnce) {
  ClockedSession s;
  {
    StepScope step(*s);
    s.clock->Advance(kMs);
  }
  Summary sum = s->Summarize();
  sum.source = Source::kHost;
  sum.source_reason =
      "CUPTI and CUDA events unavailable: libnone.so: cannot open shared object file; host "
      "timing only: no GPU idle %";
  const std::string report = FormatReport(sum);
  size_t times = 0;
  for (size_t at = report.find("libnone.so"); at != std::string::npos;
       at = report.find("libnone.so", at + 1)) {
    ++times;
  }
  EXPECT_EQ(times, 1u) << report;
  EXPECT_NE(report.find("Why not here: see the reason"), std::string::npos) << report;
  const std::vector<Finding> findings = Diagnose(sum);
  const Finding* host_only = testing::Find(findings, "host-only");
  ASSERT_NE(host_only, nullptr);
  EXPECT_NE(host_only->recommendation.find("libnone.so"), std::string::npos);
}

TEST(ReportTest, LongNonAsciiNamesAreShortenedAtCharacterBoundaries) {
  ClockedSession s;
  const std::string name =
      "\u6ce8\u610f\u529b\u5c42\u524d\u5411\u4f20\u64ad\u8ba1\u7b97-attention-forward-pass";
  for (int i = 0; i < 3; ++i) {
    StepScope step(*s);
    s.Phase(name, kMs);
    s.Phase("short", kMs);
  }
  const std::string report = FormatReport(s->Summarize());
  // Valid UTF-8 throughout: every lead byte is followed by its continuation bytes.
  for (size_t i = 0; i < report.size();) {
    const auto c = static_cast<unsigned char>(report[i]);
    const size_t len = c < 0x80           ? 1
                       : (c >> 5) == 0x6  ? 2
                       : (c >> 4) == 0xE  ? 3
                       : (c >> 3) == 0x1E ? 4
                                          : 0;
    ASSERT_NE(len, 0u) << "stray byte at " << i;
    for (size_t k = 1; k < len; ++k) {
      ASSERT_LT(i + k, report.size());
      ASSERT_EQ(static_cast<unsigned char>(report[i + k]) & 0xC0, 0x80) << "cut character at " << i;
    }
    i += len;
  }
  // Rows stay aligned: the share column starts at the same column in each row.
  std::istringstream in(report);
  std::vector<size_t> share_columns;
  for (std::string line; std::getline(in, line);) {
    const size_t pct = line.find("50.0%");
    if (pct != std::string::npos) share_columns.push_back(Columns(line.substr(0, pct)));
  }
  ASSERT_EQ(share_columns.size(), 2u) << report;
  EXPECT_EQ(share_columns[0], share_columns[1]) << report;
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
