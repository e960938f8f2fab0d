#include "core/efficiency.h"

#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpuscope {

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
    case Precision::kTf32: return "tf32";
    case Precision::kFp32: return "fp32";
    case Precision::kFp8: return "fp8";
  }
  return "unknown";
}

namespace internal {
namespace {

constexpr double kT = 1e12;

// Dense peaks (the datasheets list tensor-core peaks "with sparsity": these
// are half of those). FP32 is the non-tensor FP32 peak. GeForce cards: the
// FP32-accumulate tensor rates (what mixed-precision training uses).
constexpr PeakEntry kPeaks[] = {
    //               bf16        fp16        tf32        fp32       fp8
    // NVIDIA H200 Tensor Core GPU datasheet (H200 NVL column).
    {"H200 NVL", 835.5 * kT, 835.5 * kT, 417.5 * kT, 60 * kT, 1670.5 * kT},
    // NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column).
    {"H200", 989.5 * kT, 989.5 * kT, 494.5 * kT, 67 * kT, 1979 * kT},
    // NVIDIA H100 Tensor Core GPU datasheet (H100 NVL column).
    {"H100 NVL", 835.5 * kT, 835.5 * kT, 417.5 * kT, 60 * kT, 1670.5 * kT},
    // NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe column).
    {"H100 PCIe", 756.5 * kT, 756.5 * kT, 378 * kT, 51 * kT, 1513 * kT},
    // NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column).
    {"H100 SXM", 989.5 * kT, 989.5 * kT, 494.5 * kT, 67 * kT, 1979 * kT},
    // NVIDIA A100 Tensor Core GPU datasheet (PCIe and SXM columns: the same
    // peaks; no FP8).
    {"A100 PCIe", 312 * kT, 312 * kT, 156 * kT, 19.5 * kT, 0},
    {"A100 SXM", 312 * kT, 312 * kT, 156 * kT, 19.5 * kT, 0},
    // NVIDIA L40S datasheet.
    {"L40S", 366.5 * kT, 366.5 * kT, 183 * kT, 91.6 * kT, 733 * kT},
    // NVIDIA L4 Tensor Core GPU datasheet.
    {"L4", 121 * kT, 121 * kT, 60 * kT, 30.3 * kT, 242.5 * kT},
    // NVIDIA A10 Tensor Core GPU datasheet (no FP8).
    {"A10", 125 * kT, 125 * kT, 62.5 * kT, 31.2 * kT, 0},
    // NVIDIA V100 Tensor Core GPU datasheet (V100S PCIe, V100 PCIe, V100 SXM2
    // columns): FP16 tensor cores only, no BF16, TF32 or FP8.
    {"V100S PCIe", 0, 130 * kT, 0, 16.4 * kT, 0},
    {"V100 PCIe", 0, 112 * kT, 0, 14 * kT, 0},
    {"V100 SXM2", 0, 125 * kT, 0, 15.7 * kT, 0},
    // NVIDIA Ada GPU Architecture whitepaper, appendix table (GeForce RTX
    // 4090): FP16/BF16 and FP8 tensor rates with FP32 accumulate.
    {"RTX 4090", 165.2 * kT, 165.2 * kT, 82.6 * kT, 82.6 * kT, 330.3 * kT},
};

// The name's words, upper case: split at spaces, '-' and '_'.
std::vector<std::string> Words(std::string_view name) {
  std::vector<std::string> words(1);
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_') {
      if (!words.back().empty()) words.emplace_back();
    } else {
      words.back() += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

bool Has(const std::vector<std::string>& words, std::string_view word) {
  for (const std::string& w : words) {
    if (w == word) return true;
  }
  return false;
}

const PeakEntry& Row(std::string_view model) {
  for (const PeakEntry& e : kPeaks) {
    if (model == e.model) return e;
  }
  return kPeaks[0];  // not reached: every caller names a row
}

}  // namespace

std::span<const PeakEntry> PeakTable() { return kPeaks; }

const PeakEntry* LookupPeak(std::string_view device_name) {
  const std::vector<std::string> w = Words(device_name);
  const bool nvl = Has(w, "NVL");
  const bool pcie = Has(w, "PCIE");
  // Most specific first: "H100 NVL" before "H100", "A10" never matches
  // "A100" or "A10G" (whole words), "L4" never "L40S".
  if (Has(w, "H200")) return &Row(nvl ? "H200 NVL" : "H200");
  if (Has(w, "H100")) return &Row(nvl ? "H100 NVL" : pcie ? "H100 PCIe" : "H100 SXM");
  if (Has(w, "A100")) return &Row(pcie ? "A100 PCIe" : "A100 SXM");
  if (Has(w, "L40S")) return &Row("L40S");
  if (Has(w, "L4")) return &Row("L4");
  if (Has(w, "A10")) return &Row("A10");
  if (Has(w, "V100S")) return &Row("V100S PCIe");
  if (Has(w, "V100")) return &Row(pcie ? "V100 PCIe" : "V100 SXM2");
  if (Has(w, "RTX") && Has(w, "4090")) return &Row("RTX 4090");
  return nullptr;
}

double PeakFor(const PeakEntry& entry, Precision precision) {
  switch (precision) {
    case Precision::kBf16: return entry.bf16;
    case Precision::kFp16: return entry.fp16;
    case Precision::kTf32: return entry.tf32;
    case Precision::kFp32: return entry.fp32;
    case Precision::kFp8: return entry.fp8;
  }
  return 0;
}

std::optional<EfficiencyStats> ComputeEfficiency(const Summary& summary,
                                                 const EfficiencyInputs& options) {
  const std::string_view device_name = options.device_name;
  if (!(options.flops_per_step > 0) && !(options.flops_per_sample > 0)) return std::nullopt;
  EfficiencyStats e;
  e.precision = PrecisionName(options.peak_precision);
  std::string missing;
  if (options.flops_per_step > 0) {
    if (summary.steps > 0 && summary.window_time > 0) {
      e.flops_per_second =
          options.flops_per_step * static_cast<double>(summary.steps) / summary.window_time;
    } else {
      missing = "no completed steps in the window yet";
    }
  } else if (summary.samples_per_second.has_value()) {
    e.flops_per_second = options.flops_per_sample * *summary.samples_per_second;
  } else {
    missing =
        "flops_per_sample needs the samples each step processed: give the step a sample count "
        "(s.step(samples=N), StepOptions::samples)";
  }
  if (options.peak_flops > 0) {
    e.peak_flops = options.peak_flops;
    e.peak_source = "options";
  } else if (device_name.empty()) {
    absl::StrAppend(&missing, missing.empty() ? "" : "; ",
                    "the GPU model is unknown (no CUDA device, or Options::device_name not set): "
                    "pass peak_flops (one GPU's dense peak FLOP/s)");
  } else if (const PeakEntry* row = LookupPeak(device_name); row == nullptr) {
    absl::StrAppend(&missing, missing.empty() ? "" : "; ", "no peak for GPU '",
                    std::string(device_name),
                    "' in the peak table (docs/mfu.md): pass peak_flops (one GPU's dense peak "
                    "FLOP/s)");
  } else if (const double peak = PeakFor(*row, options.peak_precision); peak <= 0) {
    absl::StrAppend(&missing, missing.empty() ? "" : "; ", "the ", row->model, " has no dense ",
                    e.precision,
                    " tensor peak in the table: choose another peak_precision or "
                    "pass peak_flops");
  } else {
    e.peak_flops = peak;
    e.peak_source = absl::StrCat("table: ", row->model, ", ", e.precision, " dense");
  }
  if (e.flops_per_second.has_value() && e.peak_flops.has_value()) {
    e.mfu = *e.flops_per_second / *e.peak_flops;
  } else {
    e.reason = missing;
  }
  return e;
}

}  // namespace internal
}  // namespace gpuscope
