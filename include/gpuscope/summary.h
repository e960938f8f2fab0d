// File: gpuscope/summary.h
// -----------------------------------------------------------------------------
//
// A `Summary` is what a session knows about the training loop at one moment:
// step-time quantiles over the window (exact) and the whole run (within 1 %),
// where the step time went (the phase breakdown), throughput, and where every
// number came from (`source`). All times are in seconds.
//
// Definitions (docs/definitions.md):
//   * The window is the last `window` completed steps.
//   * Quantiles use linear interpolation between order statistics (NumPy's
//     default), so `step_time.p50` of {1, 2, 3, 4} is 2.5.
//   * A phase's per-step time is the length of the union of its intervals in
//     that step (nested or repeated occurrences are not double counted).
//   * The breakdown uses top-level phases (opened directly inside the step);
//     `other` is step time outside every top-level phase. The
//     `share`s of the top-level phases and `other` sum to 1.
//
// `ToJson()` and `SummaryFromJson()` give a versioned JSON encoding that round
// trips exactly.
//
// Example:
//
//   gpuscope::Summary s = session.Summarize();
//   std::printf("p95 step %.1f ms, data %.0f%%\n", s.step_time.p95 * 1e3,
//               100 * s.FindPhase("data")->share);

#ifndef GPUSCOPE_SUMMARY_H_
#define GPUSCOPE_SUMMARY_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuscope {

// Version of the JSON encoding. Bumped when a field changes meaning or is
// removed; adding a field does not bump it.
inline constexpr int kJsonSchemaVersion = 2;  // 2: telemetry; version 1 files still read

// Where the GPU side of a summary comes from, best first (docs/definitions.md).
enum class Source : uint8_t {
  kHost = 0,    // no GPU timeline: host breakdown only, gpu_idle_pct is empty
  kEvents = 1,  // CUDA events at scope boundaries: idle % is a lower bound
  kCupti = 2,   // CUPTI activity records: exact busy and idle
};

// "host", "events" or "cupti".
std::string_view SourceName(Source source);

// Quantiles
//
// Distribution of a duration, in seconds. With `count == 0` every field is 0.
// `stddev` is the population standard deviation (NumPy's default, ddof=0).
struct Quantiles {
  int64_t count = 0;
  double mean = 0;
  double stddev = 0;
  double min = 0;
  double max = 0;
  double p50 = 0;
  double p90 = 0;
  double p95 = 0;
  double p99 = 0;

  bool operator==(const Quantiles&) const = default;
};

// KernelStats
//
// One kernel by name over the window, with Source::kCupti: what the
// activity records say it cost (docs/definitions.md "Top kernels"). Counted
// from each step's largest kernels by device time (kKernelsPerStep), so a
// kernel that is never among a step's largest is not listed.
struct KernelStats {
  std::string name;          // as the profiler recorded it (demangled where it was)
  std::string kernel_class;  // "gemm_fp32", "gemm_reduced", "gemm", "collective", "other"
  // Summary::top_kernels: the phase that launched most of its time ("" when
  // none was open or the launch is unknown); PhaseStats::top_kernels: that
  // phase.
  std::string phase;
  double count_per_step = 0;  // launches per step
  double time_per_step = 0;   // seconds of device time per step and GPU (summed durations)
  double share = 0;           // of the window's kernel time (0..1)

  bool operator==(const KernelStats&) const = default;
};

// Kernels a summary keeps: overall, and per phase.
inline constexpr int kMaxTopKernels = 10;
inline constexpr int kMaxPhaseTopKernels = 5;

// PhaseStats
//
// One phase name over the window. The synthetic phase "other" (step time
// outside every top-level phase) is listed too, with one sample per step.
struct PhaseStats {
  std::string name;
  bool builtin = false;    // a built-in kind, or "other"
  bool top_level = false;  // opened directly inside a step at least once in the window

  int64_t steps = 0;           // window steps in which the phase occurred
  int64_t count = 0;           // occurrences in the window
  double total = 0;            // seconds inside the phase over the window (any depth)
  double share = 0;            // top-level time / window step time; all shares sum to 1
  double inclusive_share = 0;  // total / window step time: time inside it at any depth
  Quantiles time;              // per-step time, over the `steps` steps that have it

  // With a GPU source, over the window steps whose device data is in: the
  // per-step device time (events: span between its markers' completions)
  // and the median device backlog when the phase began (events: how far the
  // GPU lagged the host; near 0 at the start of `data` means it drained).
  Quantiles device;
  double backlog_p50 = 0;

  // Occurrences outside any step (evaluation or checkpointing between steps,
  // say), since the session started. Not part of any step's time.
  int64_t outside_steps_count = 0;
  double outside_steps_total = 0;

  // With Source::kCupti: the kernels this phase launched, by device time
  // (at most kMaxPhaseTopKernels).
  std::vector<KernelStats> top_kernels = {};

  bool operator==(const PhaseStats&) const = default;
};

// MisuseCounts
//
// Scope calls that could not be recorded as written, since the session
// started. Each has a defined outcome (documented on `Session`) and none ever
// stops the training loop; a non-zero count means the numbers above may not
// mean what the instrumentation's author intended.
struct MisuseCounts {
  int64_t out_of_order_end = 0;  // a scope ended while scopes opened after it were open
  int64_t stale_end = 0;         // a scope ended twice, or after it was closed for it
  int64_t nested_step = 0;       // a step begun while a step was open: ignored
  int64_t wrong_thread = 0;      // a scope used from a second thread: ignored
  int64_t too_deep = 0;          // more than kMaxOpenScopes open: ignored
  int64_t invalid_phase = 0;     // bad name, full table or foreign id: ignored
  int64_t dropped_records = 0;   // queue full: records dropped
  int64_t incomplete_steps = 0;  // steps left out because their records were dropped

  int64_t total() const {
    return out_of_order_end + stale_end + nested_step + wrong_thread + too_deep + invalid_phase +
           dropped_records + incomplete_steps;
  }
  bool operator==(const MisuseCounts&) const = default;
};

// OverheadStats
//
// What gpuscope itself cost, so that users see the distortion it adds.
struct OverheadStats {
  // Host nanoseconds one scope (its begin and end) costs on this machine,
  // measured once per process on a private host-only session (CUDA events,
  // when they are the source, add their record calls to it); nullopt before
  // it was measured (a summary measures it, taking about a millisecond once).
  std::optional<double> scope_ns;
  // Records (a step, each phase) per completed step, since the session
  // started: scope_ns times this is the host time a step spends recording.
  double records_per_step = 0;
  // The background worker's CPU time, in seconds, and its share of one core
  // since it started (process-wide: one worker serves every session), as of
  // the last time this session's records came in (so that summaries change
  // only when something was recorded).
  double worker_cpu_s = 0;
  double worker_cpu_share = 0;
  // CUPTI activity buffers read since the session started (0 without CUPTI).
  int64_t activity_buffers = 0;

  bool operator==(const OverheadStats&) const = default;
};

// WarmupStats
//
// The warm-up steps (Options::warmup_steps, or the count given to
// Session::Reset()) completed since the session started or was last reset:
// left out of the window, the run's histogram and every total, and
// reported here apart. All zero when there were none.
struct WarmupStats {
  int64_t steps = 0;  // warm-up steps completed so far (at most the count asked for)
  double total = 0;   // seconds: their summed step time
  double max = 0;     // seconds: the longest of them

  bool operator==(const WarmupStats&) const = default;
};

// DeviceStats
//
// One GPU's share of a session that marks streams of several devices (or of
// one: then it repeats the summary's own numbers).
struct DeviceStats {
  int device = 0;         // CUDA device ordinal
  int64_t gpu_steps = 0;  // window steps in which the device was timed
  // Idle percentage of those steps' time on this device, 0..100 (with
  // Source::kEvents a lower bound).
  std::optional<double> gpu_idle_pct;

  bool operator==(const DeviceStats&) const = default;
};

// ActivityStats
//
// Per-step averages from activity records (source "cupti"), over the
// `gpu_steps` window steps: what the playbook's rules look at.
struct ActivityStats {
  double kernels_per_step = 0;
  double kernel_time_p50 = 0;  // seconds: the median of the steps' median kernel time
  double h2d_bytes_per_step = 0;
  double d2h_bytes_per_step = 0;
  double copies_per_step = 0;
  double pageable_copies_per_step = 0;      // copies from or to pageable host memory
  double pageable_h2d_copies_per_step = 0;  // of which host to device (they block the host)
  double syncs_per_step = 0;                // host calls that blocked on the device
  double sync_time_per_step = 0;            // seconds blocked in them
  // Kernels whose launch began after the previous kernel on their stream
  // ended (HTA's test: the GPU waited on the host), and the time it waited.
  double host_wait_gaps_per_step = 0;
  double host_wait_time_per_step = 0;  // seconds
  // Kernel time per step and device (summed kernel durations, seconds), and
  // the parts of it kernel names attribute to GEMMs (any precision), to FP32
  // GEMMs on CUDA cores (no tensor cores: the precision rule), and to
  // collectives (NCCL), of which the part no other work on the device
  // overlapped (exposed). Names are matched by pattern (docs/diagnosis.md).
  double kernel_time_per_step = 0;
  double gemm_time_per_step = 0;
  double fp32_gemm_time_per_step = 0;
  double collective_time_per_step = 0;
  double exposed_collective_time_per_step = 0;
  // Device time by category (docs/definitions.md "Device time by
  // category"): every instant of a step on a GPU goes to one of compute
  // kernels > memcpy > memset > communication (collective kernels) > idle, by
  // priority over the work running then (comm: collectives not hidden under
  // compute, copies or memsets). Seconds per step and GPU (the window's sum
  // over steps and their GPUs, divided by the step-GPU pairs), and shares of
  // the GPUs' step time: the five sum to 1, and idle is gpu_idle_pct / 100.
  // nullopt in summaries saved before they existed.
  std::optional<double> device_time_kernel;
  std::optional<double> device_time_memcpy;
  std::optional<double> device_time_memset;
  std::optional<double> device_time_comm;
  std::optional<double> device_time_idle;
  std::optional<double> device_share_kernel;
  std::optional<double> device_share_memcpy;
  std::optional<double> device_share_memset;
  std::optional<double> device_share_comm;
  std::optional<double> device_share_idle;
  // The share of the GPUs' step time idle after a synchronization returned
  // (docs/definitions.md "Idle after a sync"): the sync drained the queue and
  // the GPU waited for the host to launch again. Part of device_share_idle.
  // nullopt in summaries saved before it existed.
  std::optional<double> sync_idle_share;
  int64_t dropped_records = 0;  // activity records lost to full buffers

  bool operator==(const ActivityStats&) const = default;
};

// GpuTelemetry
//
// One GPU as NVML saw it over the window (means of the worker's samples).
// NaN: not available on this GPU.
struct GpuTelemetry {
  int index = 0;               // NVML index
  double utilization_pct = 0;  // as nvidia-smi reports it: a kernel ran during the sample
  double sm_clock_mhz = 0;
  double sm_clock_max_mhz = 0;
  double mem_clock_mhz = 0;
  double mem_clock_max_mhz = 0;
  double power_w = 0;
  double power_limit_w = 0;
  double temperature_c = 0;
  double memory_used_bytes = 0;
  double memory_total_bytes = 0;
  // This process's own use: its entry in the GPU's running-processes list
  // (its allocator's reservation plus the CUDA context), at the window's
  // last sample; NaN: it has none there, or NVML cannot say.
  double process_memory_bytes = std::numeric_limits<double>::quiet_NaN();
  double pcie_rx_bytes_per_s = 0;
  double pcie_tx_bytes_per_s = 0;
  std::vector<std::string> clocks_event_reasons;  // seen in the window, by name
  // At the window's last sample (-1: not available).
  int pcie_gen = -1, pcie_gen_max = -1, pcie_width = -1, pcie_width_max = -1;
  int64_t ecc_corrected = -1, ecc_uncorrected = -1;  // since the driver loaded
  int persistence_mode = -1, compute_mode = -1, mig_mode = -1;

  bool operator==(const GpuTelemetry&) const = default;
};

// TelemetryStats
//
// Device and host state sampled by the worker (NVML, /proc), over the
// window's steps, each step time-weighted. nullopt fields: not sampled.
struct TelemetryStats {
  std::string source;  // "NVML, /proc", "/proc (no GPU telemetry: ...)"
  int64_t steps = 0;   // window steps a sample covered
  // As nvidia-smi reports it (mean over GPUs): NOT GPU busy; see gpu_idle_pct.
  std::optional<double> gpu_utilization_pct;
  // Mean of the lowest GPU's SM clock over its maximum (1: full speed).
  std::optional<double> sm_clock_ratio;
  // Share of those steps during which a GPU was power- or thermal-capped or
  // slowed down, and the reasons seen, by name.
  double throttled_steps = 0;
  std::vector<std::string> clocks_event_reasons;
  // The slowest GPU's SM clock over its maximum, over the throttled steps
  // only (how far the caps took the clocks down).
  std::optional<double> throttled_sm_clock_ratio;
  std::optional<double> host_cpu_pct;  // all CPUs busy
  std::optional<double> host_iowait_pct;
  std::optional<double> process_cores;  // this process's CPU use, in cores
  // Its data loader's worker processes (and their own children), wherever
  // they sit in the process tree; nullopt until a loader named its workers
  // (Session.steps() and `gpuscope run` do for a torch DataLoader; C++:
  // AddLoaderWorkers()), 0 for a loader without worker processes.
  std::optional<double> worker_cores;
  // Its other descendant processes (every descendant while no loader named
  // its workers).
  std::optional<double> child_cores;
  // Share of time (0..1) the training thread (a session's recording thread)
  // was runnable but waited for a CPU (the kernel's run-queue accounting).
  std::optional<double> cpu_wait_share;
  // Means of the samples taken during the window.
  std::optional<double> memory_available_bytes;
  std::optional<double> memory_pressure_pct;  // PSI "some avg10": % of time tasks stalled on memory
  std::optional<double> swap_pages_per_s;     // swapped in + out
  std::optional<double> load1;
  // CPUs this process may use: its affinity, cut by a container CPU limit.
  std::optional<double> cpus_available;
  // The loader's workers' run-queue wait, summed (how many of them waited
  // for a CPU at a time, on average).
  std::optional<double> worker_cpu_wait_cores;
  std::optional<double> cpu_pressure_pct;  // PSI "some avg10": % of time a task waited for a CPU
  std::optional<double> steal_pct;         // of all CPUs, taken by the hypervisor
  // The share (%) of a container CPU limit's enforcement periods (cgroup
  // cpu.stat; typically 100 ms each) in which the process's cgroup used up
  // its quota and was throttled: its threads then wait until the next period.
  // Absent without a limit.
  std::optional<double> cpu_throttled_pct;
  std::vector<GpuTelemetry> gpus;

  bool operator==(const TelemetryStats&) const = default;
};

// GpuMemory
//
// One GPU's memory as this process's allocator reported it over the window
// (docs/definitions.md "Memory"): what this process holds, not the device
// (NVML's device-wide use counts other processes). Bytes; NaN where the
// source does not report a number.
struct GpuMemory {
  int device = 0;  // CUDA device ordinal
  // At the last sample: held by live tensors, and held by the allocator from
  // the GPU (what is allocated plus its cache).
  double allocated_bytes = std::numeric_limits<double>::quiet_NaN();
  double reserved_bytes = std::numeric_limits<double>::quiet_NaN();
  // The window's highest allocation and reservation. `peak_exact`: the
  // value is the allocator's own high-water mark, read where it rose during
  // the window; false: the highest sample (a lower bound, for a sampler
  // that may miss the instant). The allocator's statistics are never reset.
  double peak_allocated_bytes = std::numeric_limits<double>::quiet_NaN();
  double peak_reserved_bytes = std::numeric_limits<double>::quiet_NaN();
  bool peak_exact = false;
  // Where the peak allocation was reached (of equal peaks, the latest): the completed-step number
  // (-1: not in a step) and the innermost phase open then ("" when none was).
  int64_t peak_step = -1;
  std::string peak_phase = {};
  // The lowest allocation sampled in the window: what stays allocated from
  // one step to the next (weights, optimizer state, kept gradients).
  double min_allocated_bytes = std::numeric_limits<double>::quiet_NaN();
  // 1 - peak_allocated / peak_reserved: the share of the allocator's
  // reservation that live tensors did not use even at the peak (its cache,
  // split blocks).
  double fragmentation = std::numeric_limits<double>::quiet_NaN();
  // Allocation retries in the window (the allocator freed its cache and
  // retried cudaMalloc after a failure: PyTorch's num_alloc_retries), the
  // window steps they fell in, and those steps' time above the window's
  // median step (seconds, summed): what the retries cost.
  int64_t alloc_retries = 0;
  int64_t retry_steps = 0;
  double retry_time = 0;
  int64_t ooms = 0;  // out-of-memory errors the allocator raised in the window
  double total_bytes = std::numeric_limits<double>::quiet_NaN();  // the GPU's memory
  // NVML: this process's entry in the GPU's running-processes list (its
  // reservation plus the CUDA context), at the last telemetry sample.
  double process_used_bytes = std::numeric_limits<double>::quiet_NaN();

  // Field by field; NaN equals NaN here.
  bool operator==(const GpuMemory& other) const;
};

// OomEvent
//
// The CUDA out-of-memory error that ended a step (Session::RecordOom(); the
// Python package records it when one propagates out of a step or phase).
struct OomEvent {
  // The completed-step number of the step it ended (StepPoint::index,
  // GpuMemory::peak_step), once that step was assembled: the one it would
  // have had if it was not kept (cancelled, as gpuscope run's step is, or
  // records dropped); -1: no step was open.
  int64_t step = -1;
  std::string phase = {};       // the innermost phase open ("" when none was)
  std::string phase_path = {};  // its enclosing phases too: "forward/attention"
  int device = -1;              // -1: unknown
  // What was asked for, and the allocator's state then (NaN: unknown).
  double requested_bytes = std::numeric_limits<double>::quiet_NaN();
  double allocated_bytes = std::numeric_limits<double>::quiet_NaN();
  double reserved_bytes = std::numeric_limits<double>::quiet_NaN();
  double total_bytes = std::numeric_limits<double>::quiet_NaN();
  std::string message = {};   // the error's first line
  std::string snapshot = {};  // the allocator snapshot saved for it ("" when none was)

  // Field by field; NaN equals NaN here.
  bool operator==(const OomEvent& other) const;
};

// MemoryStats
//
// What this process's GPU memory did over the window (summary.memory),
// from the allocator's numbers (PyTorch's caching allocator, a C++
// trainer's through Session::RecordMemory(), the simulated device's).
struct MemoryStats {
  std::string source = {};           // "torch.cuda", "application", "simulated"
  int64_t samples = 0;               // allocator samples that fell in the window's steps
  int64_t steps = 0;                 // window steps with a sample
  std::vector<GpuMemory> gpus = {};  // by device
  // The fullest GPU's peak allocation reached in each phase (its innermost
  // phase at the instant), over the window: which phase holds the most.
  std::map<std::string, double> peak_by_phase = {};
  // The last out-of-memory error that ended a step, since the session
  // started (Reset() does not forget it).
  std::optional<OomEvent> oom;

  bool operator==(const MemoryStats&) const = default;
};

// PeriodicSpike
//
// Steps far slower than the window's median step that recur every
// `period_steps` steps: evaluation, a checkpoint, logging every N steps.
// Each is charged to the phase whose time grew most in those steps
// (docs/definitions.md says how spikes, their phase and their period are
// found).
struct PeriodicSpike {
  // The phase that grew most in the slow steps; "other": step time outside
  // every top-level phase (work no phase names).
  std::string phase;
  int64_t period_steps = 0;  // steps from one spike to the next
  int64_t occurrences = 0;   // spikes in the window (consecutive slow steps count once)
  int64_t last_step = 0;     // completed-step number (0-based) where the last one began
  double excess = 0;         // seconds: step time each adds over the median step (mean)
  double share = 0;          // that time over the window's step time, 0..1

  bool operator==(const PeriodicSpike&) const = default;
};

// EfficiencyStats
//
// Model FLOPs utilization over the window, for this process (one rank, one
// GPU): present when Options::flops_per_step or flops_per_sample is given.
// docs/mfu.md defines it.
struct EfficiencyStats {
  // Model FLOPs this process executed per second of step time over the
  // window (flops_per_step: steps x flops / window time; flops_per_sample:
  // samples x flops over the time of the steps that gave a count). nullopt:
  // no step gave a sample count.
  std::optional<double> flops_per_second;
  // One GPU's peak FLOP/s MFU is taken against; nullopt: unknown.
  std::optional<double> peak_flops;
  // "options" (Options::peak_flops), or "table: H100 SXM, bf16 dense".
  std::string peak_source;
  std::string precision;  // "bf16", ... (Options::peak_precision)
  // flops_per_second / peak_flops; nullopt when either is unknown. Above 1
  // means the FLOPs given are more than the GPU can execute.
  std::optional<double> mfu;
  std::string reason;  // why mfu is nullopt; empty when it is known

  bool operator==(const EfficiencyStats&) const = default;
};

// Periodic spikes a summary keeps.
inline constexpr int kMaxPeriodicSpikes = 8;

// ---- Ranks of a distributed job (gpuscope/ranks.h compares them).

// Phases a rank record keeps: the largest by share of step time ("other" is
// never one).
inline constexpr int kMaxRankPhases = 16;

// One phase of one rank's window. Times are seconds per step (the median
// over the window steps the phase occurred in).
struct RankPhase {
  std::string name;
  double host_p50 = 0;
  double device_p50 = std::numeric_limits<double>::quiet_NaN();  // NaN: no GPU source
  double share = 0;                                              // of step time, 0..1

  // Field by field; NaN equals NaN here.
  bool operator==(const RankPhase& other) const;
};

// RankIdentity
//
// A process's place in a distributed job (summary.rank).
struct RankIdentity {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::string host;  // empty: this machine's host name (at most 63 bytes kept)

  bool operator==(const RankIdentity&) const = default;
};

// RankRecord
//
// One rank's window, as the other ranks see it. Unknown numbers are NaN.
struct RankRecord {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::string host;     // at most 63 bytes kept
  int64_t steps = 0;    // completed steps in the window
  double step_p50 = 0;  // seconds
  double step_p95 = 0;
  double gpu_idle_pct = std::numeric_limits<double>::quiet_NaN();
  double samples_per_second = std::numeric_limits<double>::quiet_NaN();
  double tokens_per_second = std::numeric_limits<double>::quiet_NaN();
  double sm_clock_ratio = std::numeric_limits<double>::quiet_NaN();   // slowest GPU, 0..1
  double throttled_steps = std::numeric_limits<double>::quiet_NaN();  // share, 0..1
  double host_cpu_pct = std::numeric_limits<double>::quiet_NaN();
  // With CUPTI: kernel time per step less the collectives' (NCCL), seconds:
  // the GPU's own work, which a wait in an all-reduce does not lengthen.
  double compute_time = std::numeric_limits<double>::quiet_NaN();
  // With an allocator's numbers (Summary::memory), its fullest GPU: the
  // window's peak use over the GPU's memory (0..1), and the allocation
  // retries in the window.
  double memory_peak_share = std::numeric_limits<double>::quiet_NaN();
  double memory_alloc_retries = std::numeric_limits<double>::quiet_NaN();
  std::vector<RankPhase> phases;  // at most kMaxRankPhases, largest share first

  // Field by field; NaN equals NaN here (a record equals its decoded copy).
  bool operator==(const RankRecord& other) const;
};

// A rank that is slow in one phase.
struct Straggler {
  int rank = 0;
  std::string host;
  std::string phase;
  bool device = false;           // scored on device time (else host time)
  double score = 1;              // the others' median over its time, [0, straggler_score)
  double slowdown = 1;           // its time over the others' median, > 1
  double excess = 0;             // seconds per step it adds
  double others_wait_share = 0;  // excess over the others' median step p50

  bool operator==(const Straggler&) const = default;
};

// RanksStats
//
// What the last exchange of rank records said (summary.ranks): every rank's
// record, the same on every rank that heard from the same ranks, the ranks
// it did not hear from, and the stragglers CompareRanks() found, with how
// often the straggler's rank was slow in the exchanges before.
struct RanksStats {
  std::vector<RankRecord> ranks;      // by rank
  std::vector<int> missing;           // ranks below the world size it had no record of (first 4096)
  std::vector<Straggler> stragglers;  // most time added first
  int64_t exchanges = 0;              // exchanges completed since the session started
  double age = 0;                     // seconds from the last exchange to this summary
  // Of the last `recent_exchanges` exchanges that could judge the first
  // straggler's rank (3 ranks or more compared, its own among them; this
  // one included; at most kRankHistory), how many found it slow: most of
  // them is a chronic straggler, fewer a transient one.
  int64_t recent_exchanges = 0;
  int64_t straggler_exchanges = 0;

  bool operator==(const RanksStats&) const = default;
};

// Stall
//
// A step, or a phase outside steps, that stayed open past its stall limit
// (Options::stall_after_s; docs/definitions.md "Stalls"): where a job hung.
// The background worker finds it while the scope is still open (and says so
// once, Options::log_stalls); once the scope ends, `seconds` is its whole
// duration. Session::CurrentStall() returns the one in progress.
struct Stall {
  // The step's number, 0-based, counting every step the session began
  // (StepPoint::index while no step was cancelled or dropped); -1: a phase
  // outside steps stalled.
  int64_t step = -1;
  std::string phase = {};       // the innermost phase open ("" when none was)
  std::string phase_path = {};  // with the phases around it: "forward/attention"
  double began = 0;             // when the step (or phase) began: seconds since the Unix epoch
  // How long it was open: its duration once it ended; while it lasts, until
  // the last look (every flush interval).
  double seconds = 0;
  double phase_seconds = 0;  // how long the innermost phase had been open (as `seconds`)
  double limit = 0;          // the stall limit it passed, seconds
  bool ongoing = false;      // still open at the last look
  // The GPU when the stall was found, as far as the source can tell:
  // seconds since the last GPU work gpuscope saw finish (cupti: the latest
  // activity record's end; events: the begin marker of the innermost open
  // scope, if the GPU has reached it), NaN where it cannot say (host;
  // nothing finished yet); and NVML's utilization at the last sample, which
  // counts a kernel spinning in a collective as busy (NaN: not sampled).
  double last_gpu_work_seconds = std::numeric_limits<double>::quiet_NaN();
  double gpu_utilization_pct = std::numeric_limits<double>::quiet_NaN();
  std::string gpu = {};  // that state in words, one line

  // Field by field; NaN equals NaN here.
  bool operator==(const Stall& other) const;
};

// Stalls a summary keeps: the last kMaxStalls since the session started.
inline constexpr int kMaxStalls = 64;

// Exchanges a session looks back on to tell a chronic straggler from a
// transient one.
inline constexpr int kRankHistory = 8;

// Summary
//
// A snapshot; copying it is safe and it refers to nothing in the session.
struct Summary {
  std::string version;  // gpuscope version that produced it
  Source source = Source::kHost;
  std::string source_reason;  // why this source and not a better one
  // The GPU numbers come from gpuscope's simulated device (tests, demos,
  // GPUSCOPE_SIMULATE=1), not from a GPU. False with Source::kHost.
  bool simulated = false;

  int64_t window = 0;         // the window's capacity (Options::window)
  int64_t steps = 0;          // completed steps in the window, <= window
  int64_t total_steps = 0;    // steps measured since the session started or was last reset
                              // (Session::Reset()), warm-up steps not included
  int64_t pending_steps = 0;  // ended steps whose GPU data is not final yet
  double window_time = 0;     // seconds: sum of the window's step times

  Quantiles step_time;           // exact over the window
  Quantiles lifetime_step_time;  // the whole run: p50..p99 within 1 %, the rest exact
  // The warm-up steps, left out of everything above and below.
  WarmupStats warmup;

  // With a GPU source: window steps whose device data is in (the rest are
  // pending or had a marker missing), and their per-step device span.
  int64_t gpu_steps = 0;
  Quantiles device_step_time;
  // How far device times may be off after mapping the device clock onto the
  // host clock (events: half the calibration bracket), seconds.
  double gpu_clock_error = 0;

  // Every phase seen in the window or outside steps, then "other" unless the
  // window is empty; ordered by share, then inclusive share, then name.
  std::vector<PhaseStats> phases;

  // Over the window's steps that carried a count (nullopt when none did).
  std::optional<double> samples_per_second;
  std::optional<double> tokens_per_second;
  // Model FLOP/s and MFU (with Options::flops_per_step or flops_per_sample).
  std::optional<EfficiencyStats> efficiency;

  // GPU idle percentage of step time over the `gpu_steps` steps, 0..100;
  // nullopt with Source::kHost. With Source::kEvents it is a lower bound.
  // With several devices, of their combined time (each step counted once
  // per device timed in it): the mean of the devices' idle.
  std::optional<double> gpu_idle_pct;
  // Idle percentage of step time by cause (a phase name, "other" or
  // "launch"); sums to gpu_idle_pct. Empty with Source::kHost.
  std::map<std::string, double> idle_by_cause;
  // Per device timed in the window, by ordinal. Empty with Source::kHost.
  std::vector<DeviceStats> devices;
  // With Source::kCupti: per-step counts from the activity records.
  std::optional<ActivityStats> activity;
  // With Source::kCupti: the kernels with the most device time (at most
  // kMaxTopKernels), largest first.
  std::vector<KernelStats> top_kernels = {};
  // With telemetry (Options::telemetry_interval_ms > 0 and NVML or /proc).
  std::optional<TelemetryStats> telemetry;
  // With an allocator's numbers (docs/definitions.md "Memory"); nullopt
  // without a memory source.
  std::optional<MemoryStats> memory;

  // Slow steps that recur with a period, largest share first (at most
  // kMaxPeriodicSpikes).
  std::vector<PeriodicSpike> periodic_spikes;

  MisuseCounts misuse;
  OverheadStats overhead;

  // In a distributed job: this process's place in it (set by the Python
  // package from torch.distributed or the launcher, or Session::SetRank()),
  // and what the last exchange of rank records said (Session::SetRankRecords()).
  std::optional<RankIdentity> rank;
  std::optional<RanksStats> ranks;

  // Stalls since the session started (Reset() does not forget them), oldest
  // first, the one in progress last (at most kMaxStalls), and how long the
  // step open at this summary had been open, seconds (0: none was): what a
  // "no step for N minutes" alert reads.
  std::vector<Stall> stalls = {};
  double step_in_progress = 0;

  // Summary::FindPhase()
  //
  // The stats of phase `name` ("other" included), or nullptr.
  const PhaseStats* FindPhase(std::string_view name) const;

  bool operator==(const Summary&) const = default;
};

}  // namespace gpuscope

#endif  // GPUSCOPE_SUMMARY_H_
