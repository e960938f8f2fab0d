// Model FLOPs utilization (Options::flops_per_step / flops_per_sample,
// Summary::efficiency, docs/mfu.md): checked against a hand computation for
// GPT-2 small on an H100 SXM, per rank, with gradient accumulation and data
// parallelism; the peak table's name matching; unknown GPUs; bad options;
// the report line and the JSON round trip.

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/efficiency.h"
#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::ClockedSession;
using ::testing::HasSubstr;
using testing::kMs;

// GPT-2 small: N = 124e6 parameters, sequences of 1024 tokens. The usual
// estimate of training FLOPs (forward + backward) is 6 N per token:
// 6 * 124e6 * 1024 = 7.61856e11 FLOPs per sample (sequence).
constexpr double kParams = 124e6;
constexpr double kSeqLen = 1024;
constexpr double kFlopsPerSample = 6 * kParams * kSeqLen;
// Per rank: micro-batches of 8 sequences, 4 accumulated per optimizer step:
// 32 samples per optimizer step (= one gpuscope step), 100 ms each.
constexpr int kMicroBatch = 8;
constexpr int kAccum = 4;
constexpr int kSamplesPerStep = kMicroBatch * kAccum;
constexpr int64_t kStepNs = 100 * kMs;
constexpr double kH100SxmBf16 = 989.5e12;  // dense, H100 datasheet (1979 with sparsity)

// The report with its hanging lines (indented 12) joined.
std::string Unwrap(const std::string& report) {
  return absl::StrReplaceAll(report, {{"\n            ", " "}});
}

void Train(ClockedSession& s, int steps) {
  for (int i = 0; i < steps; ++i) {
    StepScope step(*s, {.samples = kSamplesPerStep,
                        .tokens = kSamplesPerStep * static_cast<int64_t>(kSeqLen)});
    for (int m = 0; m < kAccum; ++m) s.Phase(Phase::kForward, kStepNs / kAccum);
  }
}

TEST(MfuTest, PerSampleByHand) {
  ClockedSession s(
      Options{.flops_per_sample = kFlopsPerSample, .device_name = "NVIDIA H100 80GB HBM3"});
  Train(s, 10);
  const Summary sm = s->Summarize();
  ASSERT_TRUE(sm.efficiency.has_value());
  const EfficiencyStats& e = *sm.efficiency;
  // By hand: 7.61856e11 * 32 / 0.1 s = 2.4379392e14 FLOP/s;
  // / 989.5e12 = 0.246381...
  ASSERT_TRUE(e.flops_per_second.has_value());
  EXPECT_NEAR(*e.flops_per_second, 2.4379392e14, 1e3);
  ASSERT_TRUE(e.peak_flops.has_value());
  EXPECT_EQ(*e.peak_flops, kH100SxmBf16);
  EXPECT_EQ(e.peak_source, "table: H100 SXM, bf16 dense");
  EXPECT_EQ(e.precision, "bf16");
  ASSERT_TRUE(e.mfu.has_value());
  EXPECT_NEAR(*e.mfu, 2.4379392e14 / 989.5e12, 1e-12);
  EXPECT_NEAR(*e.mfu, 0.24638, 1e-5);
  EXPECT_EQ(e.reason, "");
  // Throughput, live (this is a mid-run summary): 320 samples/s, 327,680 tokens/s.
  EXPECT_NEAR(*sm.samples_per_second, 320, 1e-9);
  EXPECT_NEAR(*sm.tokens_per_second, 327680, 1e-6);
}

TEST(MfuTest, PerStepEqualsPerSample) {
  // flops_per_step is per optimizer step: all 4 micro-batches.
  ClockedSession s(
      Options{.flops_per_step = kFlopsPerSample * kSamplesPerStep, .peak_flops = kH100SxmBf16});
  Train(s, 10);
  const EfficiencyStats e = *s->Summarize().efficiency;
  EXPECT_EQ(e.peak_source, "options");
  EXPECT_NEAR(*e.mfu, 2.4379392e14 / 989.5e12, 1e-12);
}

TEST(MfuTest, GradientAccumulationAndWorldSize) {
  // The per-rank definition: this rank's FLOPs per optimizer step over its
  // step time and one GPU's peak. With 8 data-parallel ranks, the global
  // computation: global batch 8 * 32 = 256 samples per optimizer step.
  constexpr int kWorld = 8;
  const double global_flops_per_step = kFlopsPerSample * kSamplesPerStep * kWorld;
  const double global_mfu = global_flops_per_step / 0.1 / (kWorld * kH100SxmBf16);
  for (int rank = 0; rank < kWorld; ++rank) {
    ClockedSession s(Options{.flops_per_sample = kFlopsPerSample, .peak_flops = kH100SxmBf16});
    ASSERT_TRUE(
        s->SetRank({.rank = rank, .local_rank = rank, .world_size = kWorld, .host = "h"}).ok());
    Train(s, 5);
    const EfficiencyStats e = *s->Summarize().efficiency;
    EXPECT_NEAR(*e.mfu, global_mfu, 1e-12) << "rank " << rank;
    // The two classic mistakes would be off by these factors.
    EXPECT_NEAR(*e.mfu * kWorld, global_flops_per_step / 0.1 / kH100SxmBf16, 1e-9);
    const double micro_batch_only = kFlopsPerSample * kMicroBatch / 0.1 / kH100SxmBf16;
    EXPECT_NEAR(*e.mfu, micro_batch_only * kAccum, 1e-12);
  }
}

TEST(MfuTest, PeakTableMatchesDeviceNames) {
  struct Case {
    const char* name;
    Precision precision;
    double peak;  // 0: none
    const char* model;
  } cases[] = {
      {"NVIDIA H100 80GB HBM3", Precision::kBf16, 989.5e12, "H100 SXM"},
      {"NVIDIA H100 PCIe", Precision::kBf16, 756.5e12, "H100 PCIe"},
      {"NVIDIA H100 NVL", Precision::kFp8, 1670.5e12, "H100 NVL"},
      {"NVIDIA H200", Precision::kBf16, 989.5e12, "H200"},
      {"NVIDIA A100-SXM4-40GB", Precision::kTf32, 156e12, "A100 SXM"},
      {"NVIDIA A100 80GB PCIe", Precision::kFp16, 312e12, "A100 PCIe"},
      {"NVIDIA L4", Precision::kBf16, 121e12, "L4"},
      {"NVIDIA L40S", Precision::kBf16, 366.5e12, "L40S"},
      {"NVIDIA A10", Precision::kBf16, 125e12, "A10"},
      {"Tesla V100-SXM2-16GB", Precision::kFp16, 125e12, "V100 SXM2"},
      {"Tesla V100-PCIE-32GB", Precision::kFp32, 14e12, "V100 PCIe"},
      {"NVIDIA GeForce RTX 4090", Precision::kBf16, 165.2e12, "RTX 4090"},
      {"Tesla V100-SXM2-16GB", Precision::kBf16, 0, "V100 SXM2"},  // no bf16
      {"NVIDIA A10G", Precision::kBf16, 0, nullptr},               // not the A10
      {"NVIDIA L40", Precision::kBf16, 0, nullptr},                // not the L40S or L4
  };
  for (const Case& c : cases) {
    ClockedSession s(
        Options{.flops_per_step = 1e12, .peak_precision = c.precision, .device_name = c.name});
    Train(s, 1);
    const EfficiencyStats e = *s->Summarize().efficiency;
    if (c.peak > 0) {
      ASSERT_TRUE(e.peak_flops.has_value()) << c.name << ": " << e.reason;
      EXPECT_EQ(*e.peak_flops, c.peak) << c.name;
      EXPECT_THAT(e.peak_source, HasSubstr(c.model)) << c.name;
      EXPECT_TRUE(e.mfu.has_value()) << c.name;
    } else {
      EXPECT_FALSE(e.peak_flops.has_value()) << c.name;
      EXPECT_FALSE(e.mfu.has_value()) << c.name;
      EXPECT_THAT(e.reason, HasSubstr("peak_flops")) << c.name;
      if (c.model != nullptr) {
        EXPECT_THAT(e.reason, HasSubstr(c.model)) << c.name;
      }
    }
  }
}

TEST(MfuTest, UnknownGpuGivesFlopsButNoMfuAndSaysWhy) {
  ClockedSession s(Options{.flops_per_sample = kFlopsPerSample});  // no device name: no GPU
  Train(s, 3);
  const EfficiencyStats e = *s->Summarize().efficiency;
  EXPECT_NEAR(*e.flops_per_second, 2.4379392e14, 1e3);
  EXPECT_FALSE(e.mfu.has_value());
  EXPECT_THAT(e.reason, HasSubstr("GPU model is unknown"));
  const std::string report = Unwrap(FormatReport(s->Summarize()));
  EXPECT_THAT(report, HasSubstr("MFU unknown: the GPU model is unknown"));
}

TEST(MfuTest, NoSampleCountsOrNoFlops) {
  ClockedSession s(Options{.flops_per_sample = 1e9, .peak_flops = 1e12});
  {
    StepScope step(*s);  // no sample count
    s.clock->Advance(kStepNs);
  }
  const EfficiencyStats e = *s->Summarize().efficiency;
  EXPECT_FALSE(e.flops_per_second.has_value());
  EXPECT_FALSE(e.mfu.has_value());
  EXPECT_THAT(e.reason, HasSubstr("samples"));

  ClockedSession none;
  Train(none, 2);
  EXPECT_FALSE(none->Summarize().efficiency.has_value());
}

TEST(MfuTest, BadOptionsRejected) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THAT(Options{.flops_per_step = -1}.Validate().message(), HasSubstr("flops_per_step"));
  EXPECT_THAT(Options{.flops_per_sample = nan}.Validate().message(), HasSubstr("flops_per_sample"));
  EXPECT_THAT(Options{.peak_flops = inf}.Validate().message(), HasSubstr("peak_flops"));
  const Options both{.flops_per_step = 1, .flops_per_sample = 1};
  EXPECT_THAT(both.Validate().message(), HasSubstr("give one"));
  EXPECT_THAT(Options{.peak_precision = static_cast<Precision>(9)}.Validate().message(),
              HasSubstr("peak_precision"));
  const Options good{.flops_per_sample = 1, .peak_flops = 1};
  EXPECT_TRUE(good.Validate().ok());
}

TEST(MfuTest, ReportLineAndJsonRoundTrip) {
  ClockedSession s(
      Options{.flops_per_sample = kFlopsPerSample, .device_name = "NVIDIA H100 80GB HBM3"});
  Train(s, 10);
  const Summary sm = s->Summarize();
  const std::string report = FormatReport(sm);
  std::printf("%s", report.c_str());  // docs/mfu.md quotes these lines
  const std::string unwrapped = Unwrap(report);
  EXPECT_THAT(report, HasSubstr("throughput  320.0 samples/s, 327.68 k tokens/s\n"));
  EXPECT_THAT(unwrapped,
              HasSubstr("efficiency  model FLOPs 243.8 TFLOP/s = 24.6% MFU of 989.5 TFLOP/s "
                        "(table: H100 SXM, bf16 dense, per GPU)"));
  EXPECT_THAT(ToPrometheus(sm), HasSubstr("gpuscope_mfu_ratio 0.2463"));

  const absl::StatusOr<Summary> back = SummaryFromJson(ToJson(sm));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->efficiency, sm.efficiency);
  // A file written before efficiency existed still reads, without it.
  Summary old = sm;
  old.efficiency.reset();
  std::string json = ToJson(old);
  const size_t key = json.find("\"efficiency\"");
  ASSERT_NE(key, std::string::npos);
  const size_t comma = json.rfind(',', key);
  json.erase(comma, json.find("null", key) + 4 - comma);  // the key as an older writer left it out
  ASSERT_THAT(json, ::testing::Not(HasSubstr("efficiency")));
  const absl::StatusOr<Summary> old_back = SummaryFromJson(json);
  ASSERT_TRUE(old_back.ok()) << old_back.status();
  EXPECT_FALSE(old_back->efficiency.has_value());
}

TEST(MfuTest, DocsListTheTableTheLibraryUses) {
  std::ifstream in(std::string(DOCS_DIR) + "/mfu.md");
  ASSERT_TRUE(in) << DOCS_DIR << "/mfu.md";
  std::stringstream text;
  text << in.rdbuf();
  std::set<std::string> documented;
  for (absl::string_view line : absl::StrSplit(text.str(), '\n')) {
    if (!absl::ConsumePrefix(&line, "| ")) continue;
    const std::vector<std::string> cells = absl::StrSplit(line, " | ");
    if (cells.size() != 7) continue;
    std::vector<double> tflops;  // bf16, fp16, tf32, fp32, fp8; "–": none
    for (size_t i = 1; i <= 5; ++i) {
      double v = 0;
      if (cells[i] != "–" && !absl::SimpleAtod(cells[i], &v)) v = -1;
      tflops.push_back(v);
    }
    if (tflops[0] < 0) continue;  // the header or the rule
    for (absl::string_view model : absl::StrSplit(cells[0], ", ")) {
      const std::string name(model);
      const internal::PeakEntry* row = nullptr;
      for (const internal::PeakEntry& e : internal::PeakTable()) {
        if (name == e.model) row = &e;
      }
      ASSERT_NE(row, nullptr) << "docs/mfu.md lists " << name << ", the library does not";
      documented.insert(name);
      const double lib[] = {row->bf16, row->fp16, row->tf32, row->fp32, row->fp8};
      for (size_t i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(tflops[i] * 1e12, lib[i]) << name << " " << i;
    }
  }
  for (const internal::PeakEntry& e : internal::PeakTable()) {
    EXPECT_TRUE(documented.count(e.model)) << e.model << " is not in docs/mfu.md";
  }
}

}  // namespace
}  // namespace gpuscope
