// ToPrometheus()'s fleet options: the job's labels on every sample, and the
// bound on the phases a scrape names (docs/prometheus.md#labels-and-cardinality).

#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gpuscope/testing.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using ::testing::HasSubstr;
using testing::kMs;
using ::testing::Not;

// A loop on the simulated device whose every step runs `phases` phases of
// its own name, the i-th taking i+1 ms with the GPU idle.
Summary LoopWithPhases(int phases) {
  auto clock = std::make_shared<ManualClock>();
  auto gpu = std::make_shared<SimulatedDevice>();
  Session s(Options{.window = 16, .clock = clock, .stream = 0, .simulated_device = gpu});
  for (int step = 0; step < 12; ++step) {
    StepScope st(s);
    for (int i = 0; i < phases; ++i) {
      PhaseScope p(s, absl::StrCat("phase_", i));
      clock->Advance((i + 1) * kMs);
    }
    PhaseScope f(s, Phase::kForward);
    gpu->Launch(5 * kMs);
    clock->Advance(gpu->Synchronize());
  }
  clock->Advance(1000 * kMs);
  return s.Summarize();
}

// The sample lines (not comments) of an exposition.
std::vector<std::string> Samples(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

// name -> value of family `family`'s samples, keyed by label `key`'s value.
std::map<std::string, double> ByLabel(const std::string& text, const std::string& family,
                                      const std::string& key) {
  std::map<std::string, double> out;
  for (const std::string& line : Samples(text)) {
    if (line.rfind("gpuscope_" + family + "{", 0) != 0) continue;
    const size_t at = line.find(key + "=\"");
    if (at == std::string::npos) continue;
    const size_t begin = at + key.size() + 2;
    const std::string value = line.substr(begin, line.find('"', begin) - begin);
    out[value] = std::stod(line.substr(line.rfind(' ') + 1));
  }
  return out;
}

TEST(PrometheusTest, EverySampleCarriesTheJobsLabelsAfterTheRank) {
  Summary s = LoopWithPhases(2);
  s.rank = RankIdentity{.rank = 3, .local_rank = 1, .world_size = 4, .host = "node7"};
  const std::string text =
      *ToPrometheus(s, {.labels = {{"run_id", "job-42"}, {"host", "node7"}, {"gpu", "1"}}});
  const std::vector<std::string> samples = Samples(text);
  ASSERT_GT(samples.size(), 20u);
  for (const std::string& line : samples) {
    if (line.rfind("gpuscope_info{", 0) == 0) {
      // gpuscope_info names the host among the rank's place: once.
      EXPECT_THAT(line, HasSubstr("{rank=\"3\",run_id=\"job-42\",gpu=\"1\",version="));
      EXPECT_THAT(line, HasSubstr(",host=\"node7\"}"));
      EXPECT_EQ(line.find("host="), line.rfind("host="));
      continue;
    }
    EXPECT_THAT(line, HasSubstr("{rank=\"3\",run_id=\"job-42\",host=\"node7\",gpu=\"1\""));
  }
}

TEST(PrometheusTest, ASamplesOwnLabelWinsOverTheJobsOfTheSameName) {
  Summary s = LoopWithPhases(1);
  s.memory = MemoryStats{};
  s.memory->gpus.push_back(GpuMemory{.device = 0, .allocated_bytes = 10, .total_bytes = 100});
  s.memory->gpus.push_back(GpuMemory{.device = 2, .allocated_bytes = 20, .total_bytes = 100});
  const std::string text = *ToPrometheus(s, {.labels = {{"gpu", "0"}}});
  EXPECT_THAT(text, HasSubstr("gpuscope_memory_allocated_bytes{gpu=\"0\"} 10\n"));
  EXPECT_THAT(text, HasSubstr("gpuscope_memory_allocated_bytes{gpu=\"2\"} 20\n"));
  EXPECT_THAT(text, Not(HasSubstr("gpu=\"0\",gpu=")));
}

TEST(PrometheusTest, WithoutOptionsTheExpositionIsTheDefaultOnes) {
  const Summary s = LoopWithPhases(3);
  EXPECT_EQ(ToPrometheus(s), *ToPrometheus(s, PrometheusOptions{}));
}

TEST(PrometheusTest, LabelsPrometheusWouldRefuseAreRefusedSayingWhich) {
  const Summary s = LoopWithPhases(1);
  const auto error = [&](PrometheusOptions o) {
    absl::StatusOr<std::string> text = ToPrometheus(s, o);
    return text.ok() ? std::string("ok") : std::string(text.status().message());
  };
  EXPECT_THAT(error({.labels = {{"1abc", "x"}}}), HasSubstr("label name \"1abc\""));
  EXPECT_THAT(error({.labels = {{"__name__", "x"}}}), HasSubstr("__name__"));
  EXPECT_THAT(error({.labels = {{"run-id", "x"}}}), HasSubstr("run-id"));
  EXPECT_THAT(error({.labels = {{"rank", "0"}}}), HasSubstr("\"rank\" is the summary's own"));
  EXPECT_THAT(error({.labels = {{"a", "1"}, {"a", "2"}}}), HasSubstr("given twice"));
  EXPECT_THAT(error({.labels = {{"a", std::string(257, 'x')}}}), HasSubstr("at most 256 bytes"));
  EXPECT_THAT(error({.labels = {{"a", "\xff"}}}), HasSubstr("valid UTF-8"));
  EXPECT_THAT(error({.max_phases = 0}), HasSubstr("max_phases must be 1 to 1024"));
  EXPECT_EQ(error({.labels = {{"a", std::string(256, 'x')}, {"_b9", "q\"\n"}}}), "ok");
}

TEST(PrometheusTest, APhaseNameAUserVariesNamesAtMostMaxPhasesAndTheRestSumsUp) {
  const Summary s = LoopWithPhases(40);
  const std::string text = *ToPrometheus(s, {.max_phases = 8});
  const std::map<std::string, double> shares = ByLabel(text, "phase_share_ratio", "phase");
  // "other" and the 7 with the most time (phase_39 .. phase_33), then the rest.
  std::set<std::string> names;
  for (const auto& [name, share] : shares) names.insert(name);
  const std::set<std::string> expected = {"other",    "phase_39", "phase_38",
                                          "phase_37", "phase_36", "phase_35",
                                          "phase_34", "phase_33", "_rest"};
  EXPECT_EQ(names, expected);
  double sum = 0;
  for (const auto& [name, share] : shares) sum += share;
  EXPECT_NEAR(sum, 1.0, 1e-9);
  // forward (5 ms of 825 ms a step) is folded too: its share is in _rest.
  EXPECT_GT(shares.at("_rest"), 0.5);

  const std::map<std::string, double> idle = ByLabel(text, "gpu_idle_by_cause_ratio", "cause");
  ASSERT_TRUE(s.gpu_idle_pct.has_value());
  double idle_sum = 0;
  for (const auto& [cause, ratio] : idle) {
    EXPECT_TRUE(cause == "_rest" || cause == "launch" || expected.count(cause)) << cause;
    idle_sum += ratio;
  }
  EXPECT_NEAR(idle_sum, *s.gpu_idle_pct / 100, 1e-9);
  EXPECT_EQ(ByLabel(text, "phase_time_seconds", "phase").count("phase_0"), 0u);

  // The default bound names all 41 phases and "other", and no _rest.
  const std::string all = ToPrometheus(s);
  EXPECT_EQ(ByLabel(all, "phase_share_ratio", "phase").size(), 32u + 1u);
  const std::string wide = *ToPrometheus(s, {.max_phases = 64});
  EXPECT_EQ(ByLabel(wide, "phase_share_ratio", "phase").size(), 42u);
  EXPECT_EQ(ByLabel(wide, "phase_share_ratio", "phase").count("_rest"), 0u);
}

}  // namespace
}  // namespace gpuscope
