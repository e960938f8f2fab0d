// Model FLOPs utilization: the dense peak FLOP/s table per GPU model and
// precision, and Summary::efficiency from a summary's throughput and the
// session's options (docs/mfu.md). Pure functions; no state.

#ifndef GPUSCOPE_LIB_CORE_EFFICIENCY_H_
#define GPUSCOPE_LIB_CORE_EFFICIENCY_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>

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

// ComputeEfficiency()
//
// Summary::efficiency for a summary whose throughput fields are filled
// (samples_per_second, steps, window_time), under `options`; nullopt when
// the options give no FLOPs. `device_name`: the GPU's model name for the
// peak table (Options::device_name, or the one the session found); empty:
// unknown.
std::optional<EfficiencyStats> ComputeEfficiency(const Summary& summary, const Options& options,
                                                 std::string_view device_name);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_EFFICIENCY_H_
