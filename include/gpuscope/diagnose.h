// File: gpuscope/diagnose.h
// -----------------------------------------------------------------------------
//
// `Diagnose()` turns a summary into findings: what is slowing the loop, how
// much of the step time it explains, the numbers that show it, and what to do.
// Findings are ranked by the share of step time they explain; notices (which
// explain no time) come last.
//
// A rule fires only on what its data source honestly supports: with
// `Source::kHost`, the host-side breakdown and telemetry; with `kEvents`, GPU
// idle time by phase (a lower bound); with `kCupti`, exact idle time, launch
// gaps, copies, syncs and kernel names. Rules cover the troubleshooting
// playbook: input-bound (told apart as storage- or CPU-bound), H2D-bound,
// sync-bound, launch-bound, precision, throttling, PCIe link, communication,
// GPU-bound, and nvidia-smi's utilization against true busy time.
// Thresholds and their origins are listed in docs/diagnosis.md.
//
// Example:
//
//   for (const gpuscope::Finding& f : gpuscope::Diagnose(session.Summarize())) {
//     std::cout << gpuscope::SeverityName(f.severity) << ": " << f.title << "\n"
//               << "  " << f.recommendation << "\n";
//   }

#ifndef GPUSCOPE_DIAGNOSE_H_
#define GPUSCOPE_DIAGNOSE_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuscope/summary.h"

namespace gpuscope {

enum class Severity : uint8_t {
  kInfo = 0,      // a notice: nothing is wrong, but something is worth knowing
  kModerate = 1,  // worth fixing
  kHigh = 2,      // the first thing to fix
};

// "info", "moderate", "high".
std::string_view SeverityName(Severity severity);

// Finding
//
// One diagnosis. `id` is stable across releases (scripts may match on it).
struct Finding {
  std::string id;              // "input-bound", "host-only", ...
  std::string title;           // one line, for people
  Severity severity = Severity::kInfo;
  double share = 0;            // fraction of step time it explains, 0..1
  std::vector<std::pair<std::string, double>> evidence;  // the numbers it rests on
  std::string recommendation;  // what to do, naming the concrete knobs
  std::string confidence;      // "high", "medium" or "low", and why it is not higher
  std::string source;          // the data source it rests on: "host", "events", "cupti", "nvml"

  bool operator==(const Finding&) const = default;
};

// Thresholds, as fractions of step time unless named otherwise. Where a
// published tool has one it is reused (docs/diagnosis.md names the origin).
inline constexpr double kInputBoundModerate = 0.05;  // XProf: input-bound
inline constexpr double kInputBoundHigh = 0.20;
inline constexpr double kCopyBoundModerate = 0.05;   // as input: H2D feeds the step
inline constexpr double kCopyBoundHigh = 0.20;
inline constexpr double kSyncBoundModerate = 0.05;   // as input: the GPU waits for the host
inline constexpr double kSyncBoundHigh = 0.20;
inline constexpr double kLaunchBoundModerate = 0.03;  // XProf: kernel launch time
inline constexpr double kLaunchBoundHigh = 0.15;
inline constexpr double kCommBoundModerate = 0.10;   // TensorBoard PyTorch plugin: communication
inline constexpr double kCommBoundHigh = 0.15;       // XProf: collective time, high
// Kernels shorter than this are too small to keep a GPU busy (a launch
// costs ~5-10 us on the host): the batch, or the fusion, is too small.
inline constexpr double kTinyKernelSeconds = 20e-6;
// Input: CPU-bound when the process and its workers use this share of the
// CPUs available to them, or the host's CPUs are this busy (percent);
// storage-bound when iowait is at least kStorageIowaitPct while the CPUs
// are mostly idle (busy under kStorageCpuPct).
inline constexpr double kCpuSaturatedShare = 0.85;
inline constexpr double kCpuSaturatedPct = 85.0;
inline constexpr double kStorageIowaitPct = 5.0;
inline constexpr double kStorageCpuPct = 50.0;
// Precision: FP32 GEMMs (on CUDA cores) are at least this share of GEMM
// time, and GEMMs at least kGemmShareOfKernels of kernel time.
inline constexpr double kFp32GemmShare = 0.5;
inline constexpr double kGemmShareOfKernels = 0.10;
// Throttling: at least this share of steps power- or thermal-capped. A power
// cap alone is a notice unless the SM clock falls below this ratio of its
// maximum.
inline constexpr double kThrottledStepsShare = 0.10;
inline constexpr double kPowerCapClockRatio = 0.8;
// "Utilization lies": nvidia-smi's utilization at least this high while the
// GPU is busy less than kLowBusyPct of step time (TensorBoard's plugin: GPU
// utilization < 50 %).
inline constexpr double kHighReportedUtilizationPct = 80.0;
inline constexpr double kLowBusyPct = 50.0;
// GPU-bound (healthy): idle under this percent of step time.
inline constexpr double kGpuBoundIdlePct = 10.0;

// Diagnose()
//
// The findings for `summary`, ranked. Deterministic; cheap (no allocation
// beyond the result).
std::vector<Finding> Diagnose(const Summary& summary);

// FindingsToJson()
//
// The findings as a JSON array of objects with the fields above (schema:
// docs/json-schema.md); evidence is an object of name -> number.
std::string FindingsToJson(const std::vector<Finding>& findings);

}  // namespace gpuscope

#endif  // GPUSCOPE_DIAGNOSE_H_
