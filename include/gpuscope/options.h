// File: gpuscope/options.h
// -----------------------------------------------------------------------------
//
// `Options` configures a `Session`; `StepOptions` describes one step. Both are
// aggregates, so designated initializers read well at the call site:
//
//   gpuscope::Session session(gpuscope::Options{.window = 1024});
//   gpuscope::StepScope step(session, {.samples = batch_size, .tokens = batch_tokens});

#ifndef GPUSCOPE_OPTIONS_H_
#define GPUSCOPE_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "gpuscope/clock.h"

namespace gpuscope {

// A simulated GPU for tests and demos (gpuscope/testing.h).
class SimulatedDevice;
// A step or phase open past its limit (gpuscope/summary.h).
struct Stall;

inline constexpr int kDefaultWindow = 512;
inline constexpr int kMaxWindow = 1 << 16;
inline constexpr int kDefaultMaxPhases = 128;
inline constexpr int kMaxPhases = 4096;
inline constexpr int kDefaultQueueCapacity = 1 << 17;
inline constexpr int kMaxQueueCapacity = 1 << 22;
inline constexpr int kDefaultFlushIntervalMs = 10;
inline constexpr int kMaxWarmupSteps = 1 << 20;
inline constexpr double kDefaultRankIntervalS = 30;
inline constexpr double kMinRankIntervalS = 0.1;

// Options::stream when no stream is set: scopes carry no device markers.
inline constexpr uint64_t kNoStream = ~uint64_t{0};

// Cupti
//
// Whether a session may use CUPTI activity records (the exact `cupti`
// source). CUPTI is shared with profilers (torch.profiler, Nsight): before
// CUPTI 13.2 a process has one subscriber, and whoever holds it first keeps
// the others from recording GPU activity.
enum class Cupti : uint8_t {
  kAuto = 0,  // use it when the library can name its subscriber (cuptiSubscribe_v2)
              // and no profiler injected itself; otherwise CUDA events
  kOn = 1,    // also with older CUPTI: torch.profiler then records no GPU
              // events while this session holds it (release with Close())
  kOff = 2,   // never: CUDA events at best
};

// Precision
//
// The arithmetic a model's matrix multiplies run in, for the peak FLOP/s
// that model FLOPs utilization (MFU) is taken against: the GPU's dense
// (not 2:4 sparse) tensor-core peak in that precision (docs/mfu.md has
// the table). kFp32 is plain FP32 on CUDA cores; kTf32 is FP32 matmuls on
// tensor cores (torch.backends.cuda.matmul.allow_tf32).
enum class Precision : uint8_t {
  kBf16 = 0,
  kFp16 = 1,
  kTf32 = 2,
  kFp32 = 3,
  kFp8 = 4,
};

// "bf16", "fp16", "tf32", "fp32" or "fp8".
const char* PrecisionName(Precision precision);

// Stream
//
// A device stream, as scopes name it: a CUstream or cudaStream_t, or its
// value as an integer (0: the legacy default stream). A stream belongs to one
// device; a session may mark streams of several devices and reports each
// device apart (Summary::devices).
//
//   gpuscope::PhaseScope p(session, gpuscope::Phase::kH2D, copy_stream);
class Stream {
 public:
  constexpr Stream(uint64_t handle) noexcept
      : handle_(handle) {}  // NOLINT(google-explicit-constructor)
  template <typename T>
  Stream(T* handle) noexcept  // NOLINT(google-explicit-constructor)
      : handle_(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle))) {}

  constexpr uint64_t handle() const noexcept { return handle_; }

 private:
  uint64_t handle_;
};

// How many scopes (the step included) may be open at once on the recording
// thread. A scope opened deeper than this is not recorded (and counted).
inline constexpr int kMaxOpenScopes = 32;

// Options
//
// Every field has a default that suits a training loop; `Options{}` is valid.
// `Validate()` says what is wrong with an invalid one.
struct Options {
  // Completed steps kept for exact quantiles and the phase breakdown: the
  // last `window` steps. 1 to kMaxWindow (65536). Memory, measured by
  // benchmarks/aggregator_benchmark.cc (BM_Summarize's heap_MB): 128 bytes
  // a step, plus 5 bytes a step for each phase name used in a step (17 once
  // it has GPU timing) and 256 bytes a step with GPU timing, plus 20 KB per
  // phase name (40 with GPU timing), plus up to a byte a step per phase name that summaries
  // keep for the next one; the queue (Options::queue_capacity) adds 64 bytes a record
  // (8.4 MB by default). A session with the default queue and window 65536
  // with 100 phases holds about 57 MB once summarized; window 512 with 5 phases, 8.7 MB.
  int window = kDefaultWindow;

  // false: every scope costs one branch and records nothing, no background
  // thread is started. The environment variable GPUSCOPE_DISABLE=1 (or true,
  // yes, on) has the same effect whatever this says.
  bool enabled = true;

  // The host clock. Null: the calibrated TSC or CLOCK_MONOTONIC, read inline
  // (see gpuscope/clock.h). Tests pass a `ManualClock`.
  std::shared_ptr<Clock> clock = nullptr;

  // Distinct phase names the session can hold, the nine built-in ones
  // included. kNumBuiltinPhases + 1 to kMaxPhases.
  int max_phases = kDefaultMaxPhases;

  // Records (one per ended scope) that may wait between the recording thread
  // and the background worker; rounded up to a power of two. When the queue
  // is full, records are dropped and counted (and the report says so), never
  // waited for. The default (131072 records, 8 MiB once the ring has wrapped)
  // is sized for a Python loop of empty scopes, the fastest a Python thread
  // records (benchmarks/queue_pressure.py; docs/benchmarks.md), with room for
  // the worker, which comes back sooner as the queue fills, to be
  // descheduled for several milliseconds.
  // 64 to kMaxQueueCapacity; 64 bytes each.
  int queue_capacity = kDefaultQueueCapacity;

  // How often the background worker drains the queue. 1 to 10000 ms.
  // `Session::Summarize()` drains too, so a summary is never stale.
  int flush_interval_ms = kDefaultFlushIntervalMs;

  // The device stream steps, and phases that name none, are marked on: a
  // CUstream as an integer (0 is the legacy default stream of the recording
  // thread's current context). kNoStream: none yet, no markers: a step has
  // GPU numbers only when it is marked. `Session::SetStream()` changes it;
  // Python follows torch's current stream; phases may name other streams. Not set by default
  // because a marker on the legacy default stream would serialize a C++ trainer's own blocking
  // streams with it: gpuscope never adds synchronization, so it marks only a stream it was given.
  uint64_t stream = kNoStream;

  // CUPTI use (see Cupti). GPUSCOPE_CUPTI=on|off|auto overrides kAuto.
  Cupti cupti = Cupti::kAuto;

  // How often the background worker samples NVML (every GPU) and /proc for
  // Summary::telemetry; 0: never. 0 to 60000 ms. Sampling never runs on the
  // recording thread; with a custom `clock` there is no system telemetry.
  int telemetry_interval_ms = 100;

  // Steps whose timelines (phases, device activity, idle gaps) are kept for
  // ToChromeTrace(session) (gpuscope/report.h): the last `trace_steps`. 0 to
  // 4096; 0 keeps none.
  // Memory: each kept step's phase records (24 bytes each) and, with CUPTI,
  // its activity records (48 bytes each, at most 65536 a step): 16 steps of
  // 1000 kernels take under 1 MB, 16 of 20000 about 15 MB. The buffers keep
  // their largest size.
  int trace_steps = 16;

  // Testing: time the GPU side on this simulated device instead of a real
  // GPU (gpuscope/testing.h). With GPUSCOPE_SIMULATE=1 in the environment,
  // sessions without one get a fresh simulated device.
  std::shared_ptr<SimulatedDevice> simulated_device = nullptr;

  // Completed steps at the start of the run (and after every
  // Session::Reset()) that are warm-up: left out of the window, the run's
  // histogram and every total, and reported apart (Summary::warmup; the
  // report's header says "N warm-up steps excluded"). 0 to kMaxWarmupSteps.
  //
  // 0 by default, so that every step a loop ran is counted unless asked
  // otherwise: `total_steps` then equals the steps run, a session of one or
  // two steps (a smoke test, a short script under the zero-code runner)
  // still has numbers, and runs saved before this option existed compare
  // like for like. Step 0 does hold one-time costs (DataLoader workers
  // starting, CUDA context and cuDNN autotuning, torch.compile, the
  // allocator growing), which move the mean, the max and, on runs of 20 steps
  // or fewer, p95: set 1 (or the steps your warm-up takes, e.g.
  // 5 with torch.compile or cudnn.benchmark) for short runs and baselines.
  int warmup_steps = 0;

  // ---- Stalls (docs/definitions.md "Stalls"): a step, or a phase outside
  // steps, open past its limit, found by the background worker while it
  // lasts.
  //
  // Seconds a step may stay open before it is a stall; 0 (Python's None):
  // from the job's own step times (10 x the window's p99 step time, twice
  // its longest step, at least 30 s); +inf: never. The first steps (before
  // 10 measured steps, and warm-up) wait at least 300 s, and phases outside
  // steps 10 x this (300 s without it) or 3 x their longest earlier run.
  // 0, a finite number > 0, or +inf.
  double stall_after_s = 0;
  // Whether the background worker logs each stall, at the warning level,
  // once, as it is found. The Python package says it itself instead, with
  // the training thread's Python stack and where the other ranks are.
  bool log_stalls = true;
  // Called once per stall as it is found (the step still open), on
  // gpuscope's background thread, with no lock of the session held: dump
  // the job's own state, or end it. Keep it short (the worker pumps every
  // session meanwhile), and close no session from it. Exceptions are caught
  // and logged.
  std::function<void(const Stall&)> on_stall = nullptr;

  // ---- Model FLOPs utilization (docs/mfu.md).
  //
  // The model FLOPs THIS process executes (this rank: its share of a data-
  // parallel batch), forward and backward, for MFU: per optimizer step
  // (`flops_per_step`, a step being one optimizer step, all its gradient
  // accumulation micro-batches included) or per sample (`flops_per_sample`,
  // times the samples each step gave in StepOptions::samples). At most one;
  // 0: not given (no MFU). Finite and >= 0. Summary::efficiency has the
  // achieved FLOP/s and MFU over the window.
  double flops_per_step = 0;
  double flops_per_sample = 0;

  // One GPU's peak FLOP/s that MFU is taken against; 0: the dense peak of
  // `device_name` in `peak_precision` from the table in docs/mfu.md. Finite
  // and >= 0.
  double peak_flops = 0;
  Precision peak_precision = Precision::kBf16;

  // The GPU's model name as NVML or torch.cuda.get_device_name() spell it
  // ("NVIDIA H100 80GB HBM3"), for the peak table; empty: the CUDA driver's
  // name of the GPU the process uses, once the framework has initialized
  // CUDA (the Python package passes torch's name of the current device).
  std::string device_name = {};

  // The job's id, the `run_id` label of its Prometheus series; empty: the
  // launcher's. The Python package reads it (gpuscope/_fleet.py) and passes
  // it to ToPrometheus() in PrometheusOptions::labels; the C++ library keeps
  // it for it.
  std::string run_id = {};

  // ---- Distributed jobs (docs/distributed.md). The Python package's rank
  // exchange reads these; the C++ library keeps them for it.
  //
  // Seconds between exchanges of rank records over torch.distributed's
  // store. 0 (Python's None): no periodic exchange, only the ones
  // sync_ranks() asks for. Otherwise finite and >= kMinRankIntervalS (0.1).
  double rank_interval_s = kDefaultRankIntervalS;

  // Seconds each exchange waits for the other ranks. 0 (Python's None): a
  // third of rank_interval_s, at most 10 s (10 s when rank_interval_s is 0).
  // Otherwise finite and > 0.
  double rank_timeout_s = 0;

  // Options::Validate()
  //
  // OkStatus(), or an InvalidArgumentError naming the first bad field, its
  // value and the accepted range.
  absl::Status Validate() const;
};

// StepOptions
//
// What a step processed, for throughput. Negative means "not given".
struct StepOptions {
  int64_t samples = -1;
  int64_t tokens = -1;
};

}  // namespace gpuscope

#endif  // GPUSCOPE_OPTIONS_H_
