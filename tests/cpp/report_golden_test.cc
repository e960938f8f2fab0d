// Golden files for the text and JSON reports: a fixed loop on the simulated
// device (a slow loader, pageable copies, FP32 GEMMs, an all-reduce, tiny
// kernels) must render exactly as tests/golden/ holds it. A change to the
// output is a change to these files, reviewed as such: regenerate them with
// GPUSCOPE_UPDATE_GOLDEN=1 and read the diff.

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gpuscope/gpuscope.h"
#include "gpuscope/testing.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::kMs;
using testing::kUs;

Summary GoldenLoop() {
  auto clock = std::make_shared<ManualClock>();
  SimulatedDevice::Config c;
  c.activity = true;
  auto gpu = std::make_shared<SimulatedDevice>(c);
  Session s(Options{.window = 64, .clock = clock, .stream = 0, .simulated_device = gpu});
  for (int i = 0; i < 40; ++i) {
    StepScope step(s, {.samples = 64});
    {
      PhaseScope p(s, Phase::kData);
      clock->Advance((12 + i % 5) * kMs);
    }
    {
      PhaseScope p(s, Phase::kH2D);
      gpu->LaunchCopy(SimulatedDevice::Copy::kHostToDevice, 16 << 20, 3 * kMs, /*pageable=*/true);
      clock->Advance(gpu->Synchronize());
    }
    {
      PhaseScope p(s, Phase::kForward);
      gpu->Launch(8 * kMs, 0, "ampere_sgemm_128x64_nn");
      for (int k = 0; k < 50; ++k) {
        gpu->Launch(5 * kUs, 0, "void at::native::vectorized_elementwise_kernel<4>");
        clock->Advance(12 * kUs);
      }
      clock->Advance(gpu->Synchronize());
    }
    {
      PhaseScope p(s, Phase::kComm);
      gpu->Launch(2 * kMs, 0, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
      clock->Advance(gpu->Synchronize());
    }
  }
  clock->Advance(10'000 * kMs);
  Summary sum = s.Summarize();
  sum.version = "golden";  // the output must not change with the version number
  // Nor with this machine's speed: gpuscope's own cost, measured here, is
  // fixed (the records per step, counted, stay as they are).
  sum.overhead.scope_ns = 50;
  sum.overhead.worker_cpu_s = 0.5;
  sum.overhead.worker_cpu_share = 0.0012;
  return sum;
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void ExpectGolden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(GOLDEN_DIR) + "/" + name;
  const char* update = std::getenv("GPUSCOPE_UPDATE_GOLDEN");
  if (update != nullptr && update[0] == '1') {
    std::ofstream(path) << actual;
    GTEST_SKIP() << "rewrote " << path;
  }
  EXPECT_EQ(actual, Read(path)) << "differs from " << path
                                << " (if intended: GPUSCOPE_UPDATE_GOLDEN=1 regenerates it)";
}

TEST(ReportGoldenTest, TextReport) {
  const std::string report = FormatReport(GoldenLoop());
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 80u) << line;
  ExpectGolden("report.txt", report);
}
TEST(ReportGoldenTest, SummaryJson) { ExpectGolden("summary.json", ToJson(GoldenLoop()) + "\n"); }
TEST(ReportGoldenTest, FindingsJson) {
  ExpectGolden("findings.json", ToJson(Diagnose(GoldenLoop())) + "\n");
}
TEST(ReportGoldenTest, Prometheus) { ExpectGolden("metrics.prom", ToPrometheus(GoldenLoop())); }

}  // namespace
}  // namespace gpuscope
