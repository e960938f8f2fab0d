// The recorder: the recording thread's side of a session (the hot path).
//
// It owns what only the recording thread writes (the stack of open scopes,
// the current step, the producer side of the record queue) and the misuse
// counters it keeps. Scope begin and end, step counts and the stream run
// here, inline: no allocation, no lock, no system call beyond the clock
// (but one gettid() when the first scope claims the session). Other threads
// read what it publishes: the queue's consumer side, the markers of dropped
// records, and the counters (relaxed atomics); the pump (session/pump.h)
// attaches and detaches the device timer whose markers scopes record.
//
// Budget: a phase or step scope, begin and end, costs at most two clock
// reads plus 15 ns (benchmarks/scope_overhead_benchmark.cc).

#ifndef GPUSCOPE_LIB_SESSION_RECORDER_H_
#define GPUSCOPE_LIB_SESSION_RECORDER_H_

#include <pthread.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "backends/annotator.h"
#include "backends/device_timer.h"
#include "backends/host/clock.h"
#include "backends/host/tsc.h"
#include "base/fork.h"
#include "base/spsc_queue.h"
#include "core/phase_table.h"
#include "core/record.h"
#include "gpuscope/options.h"
#include "gpuscope/session.h"
#include "gpuscope/summary.h"

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

class Recorder {
 public:
  // `options` enabled: a queue of Options::queue_capacity records (else a
  // token one). `clock` null: TSC ticks when `tsc` is set, else
  // CLOCK_MONOTONIC. `phases` and `recording_flag` (Session::recording_)
  // outlive the recorder. `device_timer`: the session may record markers
  // (room is made for the markers of dropped records).
  Recorder(const Options& options, uint16_t session_tag, const Clock* clock, const TscClock* tsc,
           Annotator* annotator, PhaseTable* phases, std::atomic<bool>* recording_flag,
           bool device_timer);

  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // ---- Recording thread.
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
  int open_scopes() const noexcept { return Get(depth_, std::memory_order_relaxed); }
  // The recording thread's kernel id (0 before the first scope). Any thread.
  int owner_tid() const noexcept { return owner_tid_.load(std::memory_order_relaxed); }
  // The open step's sequence number (1-based; 0: no step open) and the
  // phases open, outermost first, inside the step and around it (into
  // `phases`, cleared). Recording thread only.
  bool owner_is_caller() const noexcept {
    return owner_thread_.load(std::memory_order_relaxed) == CurrentThreadId();
  }
  uint64_t OpenPath(std::vector<uint16_t>* phases) const {
    phases->clear();
    for (int i = 0; i < depth_; ++i) {
      if (i != step_frame_) phases->push_back(stack_[static_cast<size_t>(i)].name_id);
    }
    return step_frame_ >= 0 ? step_seq_ : 0;
  }

  // Before any scope: the thread that claims this session is not the
  // training thread (gpuscope's own calibration session).
  void DontNameTrainingThread() { names_training_thread_ = false; }

  // ---- Any thread.

  // Whether this recorder was made before a fork() of the process it is in.
  bool InForkedChild() const noexcept {
    return fork_generation_ != g_fork_generation.load(std::memory_order_relaxed);
  }
  // Records ended scopes wait in for the pump (consumer: whoever holds the
  // pump's staging lock).
  SpscQueue<Record>& queue() { return queue_; }
  const SpscQueue<Record>& queue() const { return queue_; }
  // Markers of records the full queue dropped, for the pump to release.
  SpscQueue<uint32_t>& orphaned_markers() { return orphaned_markers_; }
  // TSC ticks' clock, when records carry ticks (null: nanoseconds).
  const TscClock* tsc() const { return tsc_; }
  // Misuse counted so far (`incomplete_steps` left 0: the window counts it).
  MisuseCounts misuse() const;

  // Scopes record markers with `timer` from now on (the events source
  // started), or no longer (null: lowered to host, released, closed). Scopes
  // still open end without one.
  void SetDeviceTimer(DeviceTimer* timer) {
    // events_on_ is set (release) after hot_timer_, and cleared first.
    if (timer == nullptr) events_on_.store(false);
    hot_timer_.store(timer, std::memory_order_relaxed);
    if (timer != nullptr) events_on_.store(true, std::memory_order_release);
  }
  bool markers_on() const { return events_on_.load(std::memory_order_relaxed); }

  // The scopes open on the recording thread, read from any thread (the
  // stall watch, session/pump.cc) straight from its own stack: no lock and
  // no copy. The recording thread's only added work is one store a scope
  // begins (its serial zeroed before the frame is written, set after) and
  // one a step begins (last_step_begin_); a frame read while it was being
  // rewritten is told by its serial, and read again. Times in the session's
  // units (TSC ticks when tsc() is set).
  struct OpenFrame {
    int64_t begin = 0;
    uint32_t marker = kNoEvent;  // its begin marker (kNoEvent: none)
    uint16_t name_id = 0;        // a phase's id
    bool is_step = false;
  };
  struct OpenScopes {
    int depth = 0;
    uint64_t step_seq = 0;        // the last step begun (the open one, where a frame is_step)
    int64_t last_step_begin = 0;  // ... and when it began
    std::array<OpenFrame, kMaxOpenScopes> frames{};
  };
  // False when every try found a frame being written (the recording thread
  // was beginning scopes as fast as it could).
  bool ReadOpenScopes(OpenScopes* out) const noexcept;

  // After the session closed (scopes can no longer run): `release` gets the
  // begin marker of every scope left open.
  template <typename Release>
  void ReleaseOpenMarkers(Release release) const {
    for (int i = 0; i < depth_; ++i) {
      const uint32_t slot = stack_[static_cast<size_t>(i)].begin_event;
      if (slot != kNoEvent) release(slot);
    }
  }

 private:
  // Written with Put() where ReadOpenScopes() reads it: begin_ns,
  // begin_event, name_id, is_step, and serial, 0 while the frame is written.
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
  // Host time in the session's units: TSC ticks when tsc_ is set (converted
  // to nanoseconds as records are drained), else nanoseconds.
  int64_t Now() const noexcept {
    if (tsc_ != nullptr) return ReadTsc();  // then clock_ is null
    return clock_ != nullptr ? clock_->NowNs() : ReadMonotonicNs();
  }
  // The fields another thread reads (ReadOpenScopes()) are written as
  // atomics: a relaxed or release store is the plain store it replaces on
  // x86-64, and keeps ThreadSanitizer's account exact.
  template <typename T>
  static void Put(T& field, std::type_identity_t<T> value) noexcept {
    std::atomic_ref<T>(field).store(value, std::memory_order_relaxed);
  }
  template <typename T>
  static void PutRelease(T& field, std::type_identity_t<T> value) noexcept {
    std::atomic_ref<T>(field).store(value, std::memory_order_release);
  }
  template <typename T>
  static T Get(const T& field, std::memory_order order) noexcept {
    return std::atomic_ref<T>(const_cast<T&>(field)).load(order);
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
    if (stream == kNoStream || !events_on_.load(std::memory_order_acquire)) return kNoEvent;
    DeviceTimer* timer = hot_timer_.load(std::memory_order_relaxed);
    return timer != nullptr ? timer->Record(stream) : kNoEvent;
  }

  // ---- Immutable after construction.
  const uint32_t fork_generation_;
  const uint16_t session_tag_;  // tells this session's PhaseIds and tokens from others'
  const Clock* const clock_;    // Options::clock; null: TSC or CLOCK_MONOTONIC
  const TscClock* const tsc_;   // non-null: scopes are stamped in TSC ticks
  Annotator* const annotator_;  // never null
  // False when annotator_'s push and pop do nothing (no NVTX tool): scopes
  // then skip the calls.
  const bool annotate_;
  PhaseTable* const phases_;
  std::atomic<bool>* const recording_flag_;  // Session::recording_

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
  int64_t last_end_ = 0;         // when a scope last ended (session units; EndAtLastActivity())
  int64_t last_step_begin_ = 0;  // when the last step began (session units)
  SpscQueue<Record> queue_;
  SpscQueue<uint32_t> orphaned_markers_;  // producer: the recording thread

  // ---- Shared, atomic.
  std::atomic<DeviceTimer*> hot_timer_{nullptr};
  std::atomic<bool> events_on_{false};
  std::atomic<uint64_t> owner_thread_{0};
  bool names_training_thread_ = true;  // set before the first scope, read at the claim
  SingleWriterCounter out_of_order_end_, stale_end_, nested_step_, too_deep_, invalid_phase_,
      dropped_records_;
  std::atomic<int64_t> wrong_thread_{0};  // written from any thread
  std::atomic<int> owner_tid_{0};
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_SESSION_RECORDER_H_
