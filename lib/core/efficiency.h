// Model FLOPs utilization: the dense peak FLOP/s table per GPU model and
// precision, and Summary::efficiency from a summary's throughput and the
// session's options (docs/mfu.md). Pure functions; no state.

#ifndef GPUSCOPE_LIB_CORE_EFFICIENCY_H_
#define GPUSCOPE_LIB_CORE_EFFICIENCY_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "gpuscope/options.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

// A GPU model of the peak table, as matched from a device name.
struct PeakEntry {
  const char* model;  // "H100 SXM"
  // Dense (not 2:4 sparse) peak FLOP/s per precision; 0: no such tensor-core
  // path on this GPU (or not in its datasheet).
  double bf16, fp16, tf32, fp32, fp8;
};

// Every row of the table (docs/mfu.md lists the same; mfu_test checks it).
std::span<const PeakEntry> PeakTable();

// LookupPeak()
//
// The table's row for a device name as NVML or torch.cuda.get_device_name()
// spell it ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB",
// "Tesla V100-PCIE-32GB"), matched on whole words, case-insensitively;
// nullptr when no row matches.
const PeakEntry* LookupPeak(std::string_view device_name);

// The row's dense peak in `precision`, 0 when it has none.
double PeakFor(const PeakEntry& entry, Precision precision);

// What MFU is computed from: the FLOPs and the peak as Options give them
// (Options::flops_per_step, flops_per_sample, peak_flops, peak_precision),
// and the GPU's model name for the peak table (Options::device_name, or the
// one the session found; empty: unknown).
struct EfficiencyInputs {
  double flops_per_step = 0;
  double flops_per_sample = 0;
  double peak_flops = 0;
  Precision peak_precision = Precision::kBf16;
  std::string device_name;

  static EfficiencyInputs From(const Options& options, std::string device_name) {
    return {options.flops_per_step, options.flops_per_sample, options.peak_flops,
            options.peak_precision, std::move(device_name)};
  }
};

// ComputeEfficiency()
//
// Summary::efficiency for a summary whose throughput fields are filled
// (samples_per_second, steps, window_time), under `in`; nullopt when it
// gives no FLOPs.
std::optional<EfficiencyStats> ComputeEfficiency(const Summary& summary,
                                                 const EfficiencyInputs& in);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_EFFICIENCY_H_
