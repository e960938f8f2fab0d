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
// work every N steps (periodic spikes), GPU-bound, and nvidia-smi's
// utilization against true busy time.
//
// Every threshold is a field of `DiagnoseOptions`, whose defaults are listed,
// with their origins, in docs/diagnosis.md.
//
// Example:
//
//   for (const gpuscope::Finding& f : gpuscope::Diagnose(session.Summarize())) {
//     std::cout << gpuscope::SeverityName(f.severity) << ": " << f.title << "\n"
//               << "  " << f.recommendation << "\n";
//   }
//
//   // A team that treats 10 % of step time lost to the loader as high:
//   gpuscope::DiagnoseOptions options;
//   options.input_bound_high = 0.10;
//   if (absl::Status st = options.Validate(); !st.ok()) return st;
//   std::vector<gpuscope::Finding> findings = gpuscope::Diagnose(summary, options);

#ifndef GPUSCOPE_DIAGNOSE_H_
#define GPUSCOPE_DIAGNOSE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
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
  std::string id;     // "input-bound", "host-only", ...
  std::string title;  // one line, for people
  Severity severity = Severity::kInfo;
  double share = 0;                                      // fraction of step time it explains, 0..1
  std::vector<std::pair<std::string, double>> evidence;  // the numbers it rests on
  std::string recommendation;                            // what to do, naming the concrete knobs
  std::string confidence;  // "high", "medium" or "low", and why it is not higher
  std::string source;      // the data source it rests on: "host", "events", "cupti", "nvml",
                           // "proc" (host telemetry)

  bool operator==(const Finding&) const = default;
};

// DiagnoseOptions
//
// Every threshold the rules compare against, with the defaults the rules
// were tuned on: `DiagnoseOptions{}` is what `Diagnose(summary)` uses, and is
// valid. Shares are fractions of step time (0..1) and percentages are
// 0..100 unless a field says otherwise. Where a published tool has a
// threshold it is reused, and the field names it; docs/diagnosis.md tabulates
// them all.
//
// Each rule that grades severity has a `_moderate` and a `_high` threshold: a
// finding below `_moderate` is not reported, one at or above `_high` is
// `Severity::kHigh`.
struct DiagnoseOptions {
  // input-bound: the loader's cost (GPU idle while the host waits for the
  // next batch; host time in phase "data" without a GPU source). 5 % and
  // 20 % are XProf's input-bound classification.
  double input_bound_moderate = 0.05;
  double input_bound_high = 0.20;

  // h2d-bound: the GPU's wait for host-to-device copies. As input-bound,
  // since the copy feeds the step the same way the loader does.
  double h2d_bound_moderate = 0.05;
  double h2d_bound_high = 0.20;

  // copy-exposed: device time in which the GPU only copied memory (CUPTI's
  // device-time split: a copy with no kernel running), a copy the step's
  // compute waits for wherever the host is. Higher lines than h2d-bound's:
  // some copy time is unavoidable (the first batch's, a final .item()).
  double copy_exposed_moderate = 0.10;
  double copy_exposed_high = 0.25;

  // sync-bound: the GPU's idle after the host blocks on it. As input-bound:
  // an idle GPU costs the same whatever the host waits for.
  double sync_bound_moderate = 0.05;
  double sync_bound_high = 0.20;
  // With CUPTI, the GPU's waits for the host count as sync-bound only in a
  // loop that blocks on the device at least this often (syncs per step, a
  // count, >= 0); 1: every step, where a per-step sync drains the queue.
  double sync_min_syncs_per_step = 1.0;

  // launch-bound: idle in the short gaps between kernels. 3 % and 15 % are
  // XProf's kernel-launch classification.
  double launch_bound_moderate = 0.03;
  double launch_bound_high = 0.15;
  // Kernels with a median shorter than this (seconds, >= 0; 0 turns the
  // remark off) are too small to keep a GPU busy: the title says the batch,
  // or the fusion, is too small. 20 us: a launch costs ~5-10 us on the host,
  // so the host can barely launch such kernels as fast as they run.
  double tiny_kernel_seconds = 20e-6;

  // comm-bound: collectives on the critical path. 10 % is the TensorBoard
  // PyTorch plugin's communication line; 15 % is XProf's high collective
  // time.
  double comm_bound_moderate = 0.10;
  double comm_bound_high = 0.15;

  // periodic-spike: the step time that work every N steps inside the step
  // adds (evaluation, a checkpoint: Summary::periodic_spikes). As
  // input-bound (XProf's 5 % and 20 %): a training step stopped for a save
  // costs what one stopped for the loader does.
  double periodic_spike_moderate = 0.05;
  double periodic_spike_high = 0.20;

  // input-bound.cpu: the process and its loader's worker processes use at
  // least this share of the CPUs available to them (0..1: their affinity cut
  // by a container limit). A host kept busy by other jobs says nothing about
  // the loader on its own: that is cpu-contention's to judge. cpu-contention
  // also uses it: the job's own processes using this share of their CPUs
  // contend with themselves; below it, others take the CPUs. 85, not 100:
  // "saturated", since averages sampled over a window fall short of the full
  // count even when the CPUs are the limit.
  double cpu_saturated_share = 0.85;
  // The host's CPUs at least this busy (percent) are named as busy in
  // cpu-contention's title.
  double cpu_saturated_pct = 85.0;
  // cpu-contention: the share of step time lost while the training thread
  // (and, for the data phase, the loader's workers) were ready to run but
  // had no CPU (the kernel's run-queue accounting). As input-bound: a share
  // of step time lost costs the same whatever the host waits for.
  double cpu_contention_moderate = 0.05;
  double cpu_contention_high = 0.20;
  // input-bound.storage: iowait at least this percent while the CPUs are busy
  // under `storage_cpu_pct` percent. 5: iowait is averaged over every CPU, so
  // a few CPUs blocked on reads show as a few percent on a large host.
  double storage_iowait_pct = 5.0;
  double storage_cpu_pct = 50.0;

  // precision: GEMMs are at least this share of kernel time (0..1), and FP32
  // GEMMs on CUDA cores at least `fp32_gemm_share` of GEMM time (0..1): below
  // either, tensor cores would change little. The finding is
  // Severity::kHigh when FP32 GEMMs take at least `precision_high` of step
  // time, the input-bound line for "the first thing to fix".
  double gemm_share_of_kernels = 0.10;
  double fp32_gemm_share = 0.5;
  double precision_high = 0.20;

  // throttling: at least this share of steps (0..1) power- or thermal-capped
  // or slowed down. A power cap alone is a notice unless the SM clock over
  // the throttled steps falls below `power_cap_clock_ratio` of its maximum
  // (0..1): datacenter GPUs run power-capped at full load, at near-full
  // clocks.
  double throttled_steps_share = 0.10;
  double power_cap_clock_ratio = 0.8;

  // pcie-link: a link generation below its maximum counts only on a GPU at
  // least this percent utilized (nvidia-smi), since generations drop at
  // idle; 50: busy most of the time.
  double pcie_busy_utilization_pct = 50.0;

  // utilization-lies: nvidia-smi's utilization at least
  // `high_reported_utilization_pct` while the GPU is busy under
  // `low_busy_pct` of step time (50 %: the TensorBoard PyTorch plugin's
  // low-GPU-utilization line).
  double high_reported_utilization_pct = 80.0;
  double low_busy_pct = 50.0;

  // memory-pressure: the window's peak reservation (the allocator's, or
  // NVML's use of this process where larger) at least this share of the
  // GPU's memory (0..1). 0.95: within 5 %, about what one more layer's
  // activations or a longer sequence takes on a large model, and what the
  // allocator's rounding and the CUDA context (0.3-0.5 GiB) eat into.
  double memory_pressure_share = 0.95;
  // memory-pressure also fires when the allocator's fragmentation (1 - peak
  // allocated / peak reserved, 0..1) is at least this while its reservation
  // is at least `memory_usable_share` of the GPU: memory it holds that
  // tensors cannot use. 0.30 is ours (no published line exists; PyTorch's
  // out-of-memory message only calls "reserved but unallocated" memory
  // "large"): a third of the reservation unusable at the peak is more than
  // the allocator's rounding and block caching explain.
  double memory_fragmentation = 0.30;
  // batch-headroom: the share of the GPU's memory (0..1) the estimate of a
  // larger batch may fill, leaving the rest for the allocator's rounding
  // and cache, fragmentation and a longer batch than usual. 0.9.
  double memory_usable_share = 0.90;
  // batch-headroom: fires when the batch could grow by at least this factor
  // (>= 1) within `memory_usable_share` of the GPU. 2: the smallest step of
  // the usual power-of-two batch sizes.
  double batch_headroom_factor = 2.0;
  // memory-thrash is moderate for any allocation retry, and high when the
  // steps with retries take at least this share of step time (0..1) over
  // the median step; 0.05, the input-bound moderate line (XProf).
  double memory_thrash_high = 0.05;

  // gpu-bound (healthy): idle under this percent of step time (CUPTI only),
  // and no moderate or high finding. 10: under it no cause of idle can
  // explain more than a few percent, so faster GPU work is the lever left.
  double gpu_bound_idle_pct = 10.0;

  // DiagnoseOptions::Validate()
  //
  // OkStatus(), or an InvalidArgumentError naming the first bad field, its
  // value and the accepted range: every field finite and in its range, and
  // each `_moderate` no greater than its `_high`.
  absl::Status Validate() const;
};

// Diagnose()
//
// The findings for `summary`, ranked. Deterministic, and a pure function of
// its arguments (it logs nothing).
//
// Diagnosis runs inside training jobs, so invalid `options` do not fail it:
// each invalid field (a NaN, a value out of range, or a `_moderate`/`_high`
// pair out of order, both of whose fields count as invalid) is replaced by its
// default, and an `info` finding with id "invalid-options" names them. Call
// `options.Validate()` first to reject them instead.
std::vector<Finding> Diagnose(const Summary& summary, const DiagnoseOptions& options = {});

}  // namespace gpuscope

#endif  // GPUSCOPE_DIAGNOSE_H_
