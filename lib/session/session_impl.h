// SessionImpl: everything behind gpuscope::Session.
//
// Four kinds of state, each with one owner:
//   * the recorder (stack of open scopes, the current step, the queue's
//     producer side): the recording thread only, no locks;
//   * the queue's consumer side and the records staged from it: whoever
//     holds `drain_mu_`, briefly;
//   * the aggregator (rings, histogram): whoever holds `agg_mu_` (the
//     background worker, or a reader in Summarize());
//   * configuration and backends: immutable after construction.
// A reader may hold `agg_mu_` for a long time (a summary of a large window);
// the worker then only moves records from the queue to the staging buffer,
// so that the recording thread never finds the queue full because of a
// reader.
// Counters that readers look at are relaxed atomics.
//
// The implementation is split by role:
//   * session/recorder.cc: the hot path (recording thread; the checks it
//     makes first are inline below);
//   * session/pump.cc: draining the queue into the aggregator, by the
//     worker (Pump()) and by readers (Flush(), Summarize(), StepSeries(),
//     TraceSnapshot());
//   * session/sources.cc: the source ladder (starting the sources, lowering
//     to host, releasing CUPTI);
//   * session/session.cc: construction, Close(), destruction, and the
//     public Session facade.

#ifndef GPUSCOPE_LIB_SESSION_SESSION_IMPL_H_
#define GPUSCOPE_LIB_SESSION_SESSION_IMPL_H_

#include <pthread.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "backends/host/clock.h"
#include "backends/host/tsc.h"
#include "backends/nvtx/nvtx_annotator.h"
#include "base/spsc_queue.h"
#include "core/aggregator.h"
#include "core/phase_table.h"
#include "core/record.h"
#include "core/summarize.h"
#include "gpuscope/session.h"
#include "session/sources.h"
#include "session/worker.h"

namespace gpuscope::internal {

// An id of the calling thread, unique among live threads (what
// pthread_self() returns, without its call): on x86-64 the thread pointer,
// whose word 0 the ABI makes a pointer to itself; on AArch64 the thread
// pointer register.
inline uint64_t CurrentThreadId() noexcept {
#if defined(__x86_64__) && defined(__linux__)
  uint64_t self;
  asm("mov %%fs:0, %0" : "=r"(self));  // not volatile: constant within a thread
  return self;
#elif defined(__aarch64__)
  return reinterpret_cast<uint64_t>(__builtin_thread_pointer());
#else
  return static_cast<uint64_t>(pthread_self());
#endif
}

// A counter written by one thread and read by others.
class SingleWriterCounter {
 public:
  void Increment() noexcept {
    v_.store(v_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  int64_t Get() const noexcept { return static_cast<int64_t>(v_.load(std::memory_order_relaxed)); }

 private:
  std::atomic<uint64_t> v_{0};
};

class SessionImpl final : public Pumpable {
  friend class SessionTestPeer;

 public:
  // `status` not ok: a disabled session that explains itself.
  SessionImpl(const Options& options, absl::Status status, Backends backends,
              std::atomic<bool>* recording_flag);
  ~SessionImpl() override;

  const Options& options() const { return options_; }
  const absl::Status& status() const { return status_; }
  Source source() const { return source_.load(std::memory_order_relaxed); }

  absl::StatusOr<PhaseId> RegisterPhase(std::string_view name);

  // Hot path (recording thread).
  ScopeToken BeginStep(const StepOptions& step) noexcept;
  ScopeToken BeginPhase(PhaseId phase) noexcept;
  ScopeToken BeginPhase(std::string_view name) noexcept;
  ScopeToken BeginPhase(PhaseId phase, uint64_t stream) noexcept;
  ScopeToken BeginPhase(std::string_view name, uint64_t stream) noexcept;
  ScopeStatus End(ScopeToken token) noexcept;
  ScopeStatus Cancel(ScopeToken token) noexcept { return Close(token, /*record=*/false, false); }
  ScopeStatus EndAtLastActivity(ScopeToken token) noexcept {
    return Close(token, /*record=*/true, /*at_last_activity=*/true);
  }
  void SetStepCounts(int64_t samples, int64_t tokens) noexcept;
  void SetStream(uint64_t stream) noexcept;

  Summary Summarize();
  // Options::device_name, or the CUDA driver's name of the GPU in use when
  // MFU needs the peak table and the options give neither name nor peak.
  std::string DeviceNameForPeak();
  absl::Status Reset(std::optional<int> warmup_steps);
  absl::Status SetRank(const RankIdentity& identity);
  absl::Status SetRankRecords(std::vector<RankRecord> records, const RankOptions& options);
  std::optional<RankIdentity> rank() const;
  std::vector<StepPoint> StepSeries();
  SeriesColumns StepColumns();
  // Pumps, then snapshots the window (agg_mu_ held only for that).
  WindowSnapshot PumpedSnapshot();
  // The kept steps' timelines as a value (session/trace_capture.h).
  TraceCapture Trace();
  // A phase id's name ("?" for an id it never gave out).
  std::string_view PhaseName(uint16_t id) const;
  void Flush();
  size_t queued_records() const { return queue_.SizeApprox(); }
  // Before any scope: the thread that claims this session is not the
  // training thread (gpuscope's own calibration session).
  void DontNameTrainingThread() { names_training_thread_ = false; }
  int open_scopes() const noexcept { return depth_; }  // recording thread
  void Close();
  void ReleaseCupti();

  // Pumpable (worker, with the worker's lock held).
  double Pump() override;
  int flush_interval_ms() const override { return options_.flush_interval_ms; }

 private:
  struct Frame {
    int64_t begin_ns;
    uint64_t stream;  // where its markers go
    uint32_t serial;
    uint32_t begin_event;
    uint16_t name_id;
    bool is_step;
    bool named_stream;  // a phase that named its own stream
  };

  // kOk when this session may record here and now: not forked away, and
  // called on the recording thread (which the first caller becomes).
  ScopeStatus CheckCaller() noexcept {
    if (InForkedChild()) [[unlikely]]
      return ForkedAway();
    const uint64_t self = CurrentThreadId();
    if (owner_thread_.load(std::memory_order_relaxed) == self) [[likely]]
      return ScopeStatus::kOk;
    return ClaimOrReject(self);
  }
  ScopeStatus ForkedAway() noexcept;
  ScopeStatus ClaimOrReject(uint64_t self) noexcept;
  bool InForkedChild() const noexcept {
    return fork_generation_ != g_fork_generation.load(std::memory_order_relaxed);
  }
  // Host time in the session's units: TSC ticks when tsc_ is set (converted
  // to nanoseconds as records are drained), else nanoseconds.
  int64_t Now() const noexcept {
    if (tsc_ != nullptr) return ReadTsc();  // then clock_ is null
    return clock_ != nullptr ? clock_->NowNs() : ReadMonotonicNs();
  }
  uint32_t NextSerial() noexcept {
    const uint32_t s = next_serial_++;
    return s != 0 ? s : next_serial_++;  // 0 marks "no scope"
  }
  ScopeToken OpenPhase(uint16_t id, uint64_t stream, bool named_stream) noexcept;
  // The phase id of `name`, registering it on first use; -1 if invalid.
  int LookUp(std::string_view name) noexcept;
  // `phase`'s id, or -1 if it is not this session's (counted).
  int Validate(PhaseId phase) noexcept;
  ScopeStatus Close(ScopeToken token, bool record, bool at_last_activity) noexcept;
  // Close() once the caller is checked.
  ScopeStatus CloseChecked(ScopeToken token, bool record, bool at_last_activity) noexcept;
  void Emit(const Frame& frame, int index, int64_t end_ns, uint16_t flags,
            uint32_t end_marker) noexcept;
  void Dropped(uint32_t begin_event, uint32_t end_event) noexcept;  // the queue was full
  // A device marker on `stream`, or kNoEvent (no device timer, no stream,
  // source lowered, pool empty).
  uint32_t RecordMarker(uint64_t stream) noexcept {
    // events_on_ is set (release) after hot_timer_, and cleared first.
    if (stream == kNoStream || !events_on_.load(std::memory_order_acquire)) return kNoEvent;
    DeviceTimer* timer = hot_timer_.load(std::memory_order_relaxed);
    return timer != nullptr ? timer->Record(stream) : kNoEvent;
  }
  // In the constructor: picks the source (SelectSource()), attaches the
  // winner to the aggregator and the hot path, and starts telemetry.
  void StartSources();
  void LowerToHost(const absl::Status& why);  // requires agg_mu_
  // Final drain of the activity source, then detaches it (CUPTI usable by
  // others). Steps still waiting lose their GPU numbers. Requires agg_mu_.
  void StopActivityLocked();
  void PumpLocked();  // requires agg_mu_
  // Requires agg_mu_: the staged records, then the queue's, into the
  // aggregator, in order. Returns how many came from the queue itself.
  size_t DrainQueueLocked();
  // Without agg_mu_ (a reader holds it): moves the queue's records to the
  // staging buffer, up to kMaxStagedRecords. Returns how many.
  size_t StageQueue();
  void Consume(const Record& r);  // requires agg_mu_: converts TSC ticks
  // What the session knows that the window does not, for Summarize() (all
  // but the ranks, MFU's inputs and the scope cost). Requires agg_mu_.
  SummaryInputs InputsLocked() const;
  void ReportNewMisuse();

  // ---- Immutable after construction.
  const Options options_;
  const absl::Status status_;
  const uint32_t fork_generation_;
  const uint16_t session_tag_;  // tells this session's PhaseIds and tokens from others'
  const Clock* const clock_;    // Options::clock; null: TSC or CLOCK_MONOTONIC
  const TscClock* const tsc_;   // non-null: scopes are stamped in TSC ticks
  Backends backends_;
  Annotator* const annotator_;  // backends_.annotator, never null
  // False when annotator_'s push and pop do nothing (no NVTX tool): scopes
  // then skip the calls.
  const bool annotate_ = !AnnotatorIsInert(*annotator_);
  // NVTX counter tracks (under agg_mu_): when they were last sampled.
  int64_t counters_at_ns_ = INT64_MIN / 2;
  uint64_t counters_at_step_ = 0;
  void SampleCountersLocked();
  DeviceTimer* timer_ = nullptr;  // backends_.device_timer once it started, else null (agg_mu_)
  std::atomic<DeviceTimer*> hot_timer_{nullptr};  // the same, for the recording thread
  ActivitySource* activity_ = nullptr;     // backends_.activity when the cupti source won (agg_mu_)
  DeviceTimer* fallback_timer_ = nullptr;  // not started: events after ReleaseCupti()
  Telemetry* telemetry_ = nullptr;         // backends_.telemetry once started
  // Held for a whole Pump(): the telemetry's sampling state and samples_.
  // Lock order: the worker's lock, pump_mu_, agg_mu_, drain_mu_; readers
  // never take it.
  std::mutex pump_mu_;
  std::vector<TelemetrySample> samples_;       // collected, not yet aggregated (pump_mu_)
  std::atomic<bool> events_on_{false};         // cleared when the source is lowered to host
  std::atomic<Source> source_{Source::kHost};  // written under agg_mu_ after construction
  std::string source_reason_;                  // guarded by agg_mu_ after construction
  std::atomic<bool>* const recording_flag_;    // Session::recording_
  PhaseTable phases_;

  // ---- Recording thread only.
  std::array<Frame, kMaxOpenScopes> stack_{};
  int depth_ = 0;
  int step_frame_ = -1;  // index of the open step's frame, -1 if none
  uint64_t step_seq_ = 0;
  int64_t step_samples_ = -1;
  int64_t step_tokens_ = -1;
  bool step_incomplete_ = false;
  uint32_t next_serial_ = 1;
  uint64_t stream_ = 0;
  int64_t last_end_ = 0;  // when a scope last ended (session units; EndAtLastActivity())
  SpscQueue<Record> queue_;
  // Markers of records the full queue dropped, for the background side to
  // release (producer: the recording thread).
  SpscQueue<uint32_t> orphaned_markers_;
  // The staging buffer's bound, in records (64 bytes each; see drain_mu_).
  const size_t max_staged_records_;

  // ---- Shared, atomic.
  std::atomic<uint64_t> owner_thread_{0};
  bool names_training_thread_ = true;  // set before the first scope, read at the claim
  SingleWriterCounter out_of_order_end_, stale_end_, nested_step_, too_deep_, invalid_phase_,
      dropped_records_;
  std::atomic<int64_t> wrong_thread_{0};  // written from any thread
  std::atomic<bool> closed_{false};
  std::atomic<bool> registered_{false};

  // ---- Staging. Protects the queue's consumer side and staged_. Taken by
  // the worker when a reader holds agg_mu_, and after agg_mu_ by whoever
  // drains; held only to move records; never by the recording thread.
  std::mutex drain_mu_;
  std::vector<Record> staged_;          // drained from the queue, not yet aggregated, oldest first
  std::atomic<size_t> staged_size_{0};  // staged_.size(), for the worker's pacing
  size_t last_drained_ = 0;       // records the last drain took from the queue itself (agg_mu_)
  int64_t records_consumed_ = 0;  // records taken in since the session started (agg_mu_)
  int64_t steps_consumed_ = 0;    // ... of them steps (warm-up and reset ones too)
  double worker_cpu_s_ = 0;       // the worker's CPU when records last came in (agg_mu_)
  double worker_cpu_share_ = 0;   // ... and its share of one core then

  // ---- Aggregator. Protects aggregator_ and reported_. Taken by the worker
  // (after its own lock) and by readers; never by the recording thread.
  // Lock order: the worker's lock, pump_mu_, agg_mu_, drain_mu_.
  mutable std::mutex agg_mu_;
  Aggregator aggregator_;
  MisuseCounts reported_;  // misuse already logged

  // ---- Ranks (SetRank(), SetRankRecords()). A leaf lock: held only to copy
  // in or out, never while taking another.
  mutable std::mutex ranks_mu_;
  std::optional<RankIdentity> rank_;
  std::optional<RanksStats> ranks_;
  int64_t ranks_at_ns_ = 0;  // CLOCK_MONOTONIC of the last exchange
  // The last kRankHistory exchanges that compared 3 ranks or more, newest
  // last: the ranks each compared and those it found slow.
  struct RankHistoryEntry {
    std::vector<int> compared;
    std::vector<int> slow;
  };
  std::deque<RankHistoryEntry> slow_history_;

  // ---- The GPU's model name for MFU's peak table, when Options::device_name
  // is empty: asked of the CUDA driver until it answers (the framework may
  // initialize CUDA after the session starts), then kept. A leaf lock.
  std::mutex device_name_mu_;
  std::string device_name_;
};

// White-box access for tests, benchmarks and the simulated device: sessions
// on injected backends, and the implementation behind a Session.
// MeasuredScopeNs()
//
// Host nanoseconds one phase scope (begin and end, inside a step) costs on
// this machine: measured once per process, at the first call, on a private
// host-only session (no GPU source, no telemetry; NVTX as configured),
// 5 rounds of 64 steps of 15 phases each, the median round's cost per scope
// (the step's own begin and end spread over its phases); about a millisecond.
// nullopt where recording is off (GPUSCOPE_DISABLE) or in a forked child.
std::optional<double> MeasuredScopeNs();

class SessionTestPeer {
 public:
  static std::unique_ptr<Session> Create(Options options, Backends backends);
  static SessionImpl& Impl(Session& session);
  static size_t QueuedRecords(Session& session) { return Impl(session).queued_records(); }
  // Holds the aggregator lock as a slow reader (a summary of a large window)
  // would, for as long as the returned lock lives.
  static std::unique_lock<std::mutex> HoldAggregator(Session& session) {
    return std::unique_lock<std::mutex>(Impl(session).agg_mu_);
  }
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_SESSION_SESSION_IMPL_H_
