// The pump: a session's aggregation side.
//
// It owns the consumer side of the recorder's queue, a staging buffer, the
// aggregator (core/aggregator.h) and the GPU sources on the ladder
// (session/sources.h). Whoever holds `agg_mu_` drains the queue into the
// aggregator, resolves device data, reports misuse and samples the NVTX
// counters: the background worker (Pass(), every flush interval), and
// readers, which pump before they read (Flush(), Snapshot(), Trace()), so
// that a step that has ended is always in what they return.
//
// Locks, taken in this order: the worker's lock, `pump_mu_` (held for a whole
// Pass(): the telemetry's sampling state and collected samples), `agg_mu_`
// (the aggregator, the sources, what was reported), `drain_mu_` (the queue's
// consumer side and the staging buffer, held only to move records). The
// recording thread takes none of them. A reader may hold `agg_mu_` for a long
// time (a summary of a large window); the worker then only moves records
// from the queue to the staging buffer, so that the recording thread never
// finds the queue full because of a reader.
//
// Methods require a session not forked away (the caller checks).

#ifndef GPUSCOPE_LIB_SESSION_PUMP_H_
#define GPUSCOPE_LIB_SESSION_PUMP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "backends/annotator.h"
#include "backends/host/clock.h"
#include "core/aggregator.h"
#include "core/phase_table.h"
#include "core/record.h"
#include "core/stalls.h"
#include "core/summarize.h"
#include "core/trace_steps.h"
#include "gpuscope/options.h"
#include "gpuscope/summary.h"
#include "session/recorder.h"
#include "session/sources.h"

namespace gpuscope::internal {

class Pump {
 public:
  // All four outlive the pump. A disabled session's pump (`options` not
  // enabled) has a window of one step and never starts a source.
  Pump(const Options& options, Backends& backends, Recorder& recorder, const PhaseTable& phases);
  ~Pump();

  Pump(const Pump&) = delete;
  Pump& operator=(const Pump&) = delete;

  // In the session's constructor, before any other thread sees it: picks
  // the source (SelectSource()), attaches the winner to the aggregator and
  // the recorder, and starts telemetry.
  void Start();
  // A session that records nothing says why.
  void SetDisabledReason(std::string reason) { source_reason_ = std::move(reason); }

  Source source() const { return source_.load(std::memory_order_relaxed); }

  // The worker's pass: samples telemetry, then pumps, or (a reader holds
  // the aggregator) stages the queue. Returns how full the queue was, 0..1.
  double Pass();
  // Pumps now.
  void Flush();
  // Session::RecordMemory(): stamped now, for the next pump. Any thread.
  void RecordMemory(const AllocatorStats& stats, std::string_view source);
  // Session::RecordOom(): kept for every summary from now on. Takes only
  // a leaf lock of its own (the recording thread calls it).
  // `step_seq`: the sequence number of the step it ended (0: none), whose
  // completed-step number becomes OomEvent::step as the step is assembled.
  void RecordOom(const OomEvent& oom, std::string_view source, uint64_t step_seq);
  // Pumped, then a snapshot of the window (agg_mu_ held only for that), and
  // what the session's sources and recorder know (`inputs`, all but the
  // ranks, MFU's inputs and the scope cost).
  WindowSnapshot Snapshot(SummaryInputs* inputs = nullptr);
  // Pumped, then the window dropped: steps from now on are measured after
  // `warmup_steps` of warm-up.
  void Reset(int warmup_steps);
  // Pumped, then the kept steps' timelines and the launch threshold.
  void TraceSteps(std::vector<TraceStep>* steps, int64_t* launch_threshold_ns);

  // Session::ReleaseCupti(): the activity source drained and detached, the
  // events timer started in its place where there is one (`closed`: none).
  void ReleaseCupti(bool closed);
  // At close: what ended is aggregated, CUPTI is released, and the markers of
  // steps still waiting go back to the pool.
  void Close();
  // At destruction (after Close()): the records that came since, and the
  // scopes still open, return their markers, and the timer stops.
  void Destroy();

  int flush_interval_ms() const { return options_.flush_interval_ms; }
  size_t queued_records() const { return recorder_.queue().SizeApprox(); }

  // Stalls (core/stalls.h): the one in progress, as the last look saw it,
  // and every one kept. Any thread (a leaf lock).
  std::optional<Stall> CurrentStall() const;
  std::vector<Stall> Stalls() const;
  // How long the step open now has been open, seconds (0: none). Any thread.
  double StepInProgress() const;

  // Tests: holds the aggregator lock as a slow reader would.
  std::unique_lock<std::mutex> HoldAggregator() { return std::unique_lock<std::mutex>(agg_mu_); }

 private:
  // Requires agg_mu_ (or the constructor).
  void LowerToHost(const absl::Status& why);
  // Final drain of the activity source, then detaches it (CUPTI usable by
  // others). Steps still waiting lose their GPU numbers. Requires agg_mu_.
  void StopActivityLocked();
  void PumpLocked(bool final = false);  // requires agg_mu_
  // Requires agg_mu_: the staged records, then the queue's, into the
  // aggregator, in order. Returns how many came from the queue itself.
  size_t DrainQueueLocked();
  // Requires agg_mu_: the allocator samples that came, into the aggregator.
  void DrainMemoryLocked();
  // Without agg_mu_ (a reader holds it): moves the queue's records to the
  // staging buffer, up to max_staged_records_. Returns how many.
  size_t StageQueue();
  void Consume(const Record& r);  // requires agg_mu_: converts TSC ticks
  // Requires agg_mu_: after `r` was consumed, numbers the kept OOM's step.
  void NumberOomStep(const Record& r, uint64_t completed_before);
  // Requires agg_mu_, before the queue is drained (a marker of a scope
  // still open is not released before this pass drains): one look at the
  // open scopes; a stall that began is returned, to be reported once the
  // locks are let go.
  std::optional<Stall> WatchStallsLocked();
  // The stall limit of what `open` watches, seconds. Requires agg_mu_.
  double StallLimitLocked(const OpenScope& open, int64_t now_ns);
  // The GPU's state for a stall of `open` (recorder frames `frames`).
  // Requires agg_mu_.
  StallGpuState StallGpuStateLocked(const Recorder::OpenScopes& frames, int64_t now_ns);
  void ReportStall(const Stall& stall);  // no lock held but pump_mu_
  void ReportNewMisuse();                // requires agg_mu_
  void SampleCountersLocked();           // requires agg_mu_
  int64_t Now() const;

  const Options& options_;
  Backends& backends_;
  Recorder& recorder_;
  const PhaseTable& phases_;
  const Clock* const clock_;  // Options::clock; null: CLOCK_MONOTONIC
  Annotator* const annotator_;

  // ---- pump_mu_: the telemetry and its samples.
  std::mutex pump_mu_;
  Telemetry* telemetry_ = nullptr;        // backends_.telemetry once started
  std::vector<TelemetrySample> samples_;  // collected, not yet aggregated

  // ---- agg_mu_: the aggregator and the sources.
  mutable std::mutex agg_mu_;
  Aggregator aggregator_;
  std::vector<MemorySample> memory_samples_;   // DrainMemoryLocked()'s, reused
  uint64_t oom_step_seq_ = 0;                  // the step the kept OOM ended, until it is assembled
  DeviceTimer* timer_ = nullptr;               // backends_.device_timer once it started, else null
  ActivitySource* activity_ = nullptr;         // backends_.activity when the cupti source won
  DeviceTimer* fallback_timer_ = nullptr;      // not started: events after ReleaseCupti()
  std::atomic<Source> source_{Source::kHost};  // written under agg_mu_ after construction
  std::string source_reason_;
  MisuseCounts reported_;  // misuse already logged
  // NVTX counter tracks: when they were last sampled.
  int64_t counters_at_ns_ = INT64_MIN / 2;
  uint64_t counters_at_step_ = 0;
  size_t last_drained_ = 0;       // records the last drain took from the queue itself
  int64_t records_consumed_ = 0;  // records taken in since the session started
  int64_t steps_consumed_ = 0;    // ... of them steps (warm-up and reset ones too)
  double worker_cpu_s_ = 0;       // the worker's CPU when records last came in
  double worker_cpu_share_ = 0;   // ... and its share of one core then
  bool closed_ = false;           // Close() ran: activity is flushed as it drains
  // The stall limits' history (core/stalls.h), refreshed at most once a
  // second as steps complete; phases outside steps: each id's longest run.
  StallHistory stall_history_;
  int64_t stall_history_at_ns_ = INT64_MIN / 2;
  uint64_t stall_history_steps_ = ~uint64_t{0};
  std::vector<int64_t> outside_longest_ns_;
  double last_gpu_utilization_ = kNotSampled;  // NVML's mean over GPUs at the last sample
  Recorder::OpenScopes open_scopes_;           // the last look's, reused
  OpenScope watched_;                          // ... and what it watched

  // ---- drain_mu_: staging.
  std::mutex drain_mu_;
  std::vector<Record> staged_;          // drained from the queue, not yet aggregated, oldest first
  std::atomic<size_t> staged_size_{0};  // staged_.size(), for the worker's pacing
  // ---- stall_mu_ (a leaf): the stall watch; written under agg_mu_ too.
  mutable std::mutex stall_mu_;
  StallWatch stalls_;
  // Whether the watch still wants the record of the scope that stalled, and
  // its begin in the recorder's units (Consume() compares; agg_mu_).
  bool stalls_wanted_ = false;
  int64_t stall_begin_raw_ = 0;
  // ---- oom_mu_ (a leaf: nothing is taken under it): RecordOom()'s error,
  // for the next pump.
  std::mutex oom_mu_;
  std::optional<OomEvent> pending_oom_;
  std::string oom_source_;
  uint64_t pending_oom_seq_ = 0;
  const size_t max_staged_records_;  // the staging buffer's bound (64 bytes a record)
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_SESSION_PUMP_H_
