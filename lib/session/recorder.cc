// The recorder (session/recorder.h): scope begin and end, step counts, the
// stream, and the record appended to the queue. Recording thread only: no
// allocation, no lock, no system call beyond the clock (but one gettid()
// when the first scope claims the session). The checks every call makes
// first (CheckCaller(), the clock, the marker) are inline in the header.
//
// Budget: a phase or step scope, begin and end, costs at most two clock reads
// plus 15 ns (benchmarks/scope_overhead_benchmark.cc). Everything a scope
// does beside the clock counts, so each Begin*() and End() is one function
// with its checks inlined (no calls but the clock, a marker, and NVTX when a
// tool is attached), and End() of the innermost scope, the common case, takes
// a path without the loops that closing several scopes at once needs.

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>

#define GPUSCOPE_INLINE inline __attribute__((always_inline))

#include "backends/nvtx/nvtx_annotator.h"
#include "backends/telemetry/process_roles.h"
#include "session/recorder.h"

namespace gpuscope::internal {

Recorder::Recorder(const Options& options, uint16_t session_tag, const Clock* clock,
                   const TscClock* tsc, Annotator* annotator, PhaseTable* phases,
                   std::atomic<bool>* recording_flag, bool device_timer)
    : fork_generation_(g_fork_generation.load(std::memory_order_relaxed)),
      session_tag_(session_tag),
      clock_(clock),
      tsc_(tsc),
      annotator_(annotator),
      annotate_(!AnnotatorIsInert(*annotator)),
      phases_(phases),
      recording_flag_(recording_flag),
      stream_(options.stream),
      queue_(options.enabled ? static_cast<size_t>(options.queue_capacity) : 2),
      orphaned_markers_(device_timer ? size_t{1} << 16 : 2) {}

MisuseCounts Recorder::misuse() const {
  MisuseCounts m;
  m.out_of_order_end = out_of_order_end_.Get();
  m.stale_end = stale_end_.Get();
  m.nested_step = nested_step_.Get();
  m.wrong_thread = wrong_thread_.load(std::memory_order_relaxed);
  m.too_deep = too_deep_.Get();
  m.invalid_phase = invalid_phase_.Get();
  m.dropped_records = dropped_records_.Get();
  return m;
}

ScopeStatus Recorder::ForkedAway() noexcept {
  recording_flag_->store(false, std::memory_order_relaxed);  // scopes now cost one branch
  return ScopeStatus::kDisabled;
}

ScopeStatus Recorder::ClaimOrReject(uint64_t self) noexcept {
  uint64_t owner = 0;
  if (owner_thread_.compare_exchange_strong(owner, self, std::memory_order_relaxed)) {
    // The first caller becomes the recording thread: the one whose wait for
    // a CPU the telemetry measures, and whose stack a stall report takes.
    const int tid = static_cast<int>(syscall(SYS_gettid));
    owner_tid_.store(tid, std::memory_order_relaxed);
    if (names_training_thread_) SetTrainingThread(tid);
    return ScopeStatus::kOk;
  }
  if (owner == self) return ScopeStatus::kOk;
  wrong_thread_.fetch_add(1, std::memory_order_relaxed);
  return ScopeStatus::kWrongThread;
}

// Inline in End(): the record is written in place into its queue slot
// (WriteRecord()), everything it holds read first.
GPUSCOPE_INLINE void Recorder::Emit(const Frame& frame, int index, int64_t end_ns, uint16_t flags,
                                    uint32_t end_marker) noexcept {
  if (frame.named_stream) flags = static_cast<uint16_t>(flags | kRecordNamedStream);
  const int64_t begin_ns = frame.begin_ns;
  const uint32_t begin_event = frame.begin_event;
  Record* const r = queue_.Claim();
  if (frame.is_step) {
    if (step_incomplete_) flags = static_cast<uint16_t>(flags | kRecordIncomplete);
    step_frame_ = -1;
    if (r == nullptr) [[unlikely]]
      return Dropped(begin_event, end_marker);
    WriteRecord(r, begin_ns, end_ns, step_seq_, step_samples_, step_tokens_, begin_event,
                end_marker, 0, RecordKind::kStep, 0, flags);
  } else {
    if (r == nullptr) [[unlikely]]
      return Dropped(begin_event, end_marker);
    const uint16_t name_id = frame.name_id;
    const int step_frame = step_frame_;
    const bool in_step = step_frame >= 0 && index > step_frame;
    // step_seq 0: a phase outside any step; depth counted from the step's.
    WriteRecord(r, begin_ns, end_ns, in_step ? step_seq_ : 0, -1, -1, begin_event, end_marker,
                name_id, RecordKind::kPhase,
                static_cast<uint8_t>(in_step ? index - step_frame - 1 : index), flags);
  }
  queue_.Commit();
}

void Recorder::Dropped(uint32_t begin_event, uint32_t end_event) noexcept {
  dropped_records_.Increment();
  if (step_frame_ >= 0) step_incomplete_ = true;
  // The markers must still go back to the pool: hand them over apart.
  if (begin_event != kNoEvent) orphaned_markers_.TryPush(begin_event);
  if (end_event != kNoEvent) orphaned_markers_.TryPush(end_event);
}

ScopeToken Recorder::BeginStep(const StepOptions& step) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  if (step_frame_ >= 0) {
    nested_step_.Increment();
    return {0, 0, ScopeStatus::kNestedStep};
  }
  if (depth_ >= kMaxOpenScopes) {
    too_deep_.Increment();
    return {0, 0, ScopeStatus::kTooDeep};
  }
  Put(step_seq_, step_seq_ + 1);
  step_samples_ = step.samples;
  step_tokens_ = step.tokens;
  step_incomplete_ = false;
  step_frame_ = depth_;
  const int d = depth_;
  Frame& f = stack_[static_cast<size_t>(d)];
  // Serial 0 first, the serial last, each field between as a release: a
  // reader that sees any of them new sees the serial changed (ReadOpenScopes()).
  Put(f.serial, uint32_t{0});
  const uint32_t serial = NextSerial();
  PutRelease(f.name_id, uint16_t{0});
  PutRelease(f.is_step, true);
  if (annotate_) annotator_->PushStep(step_seq_ - 1);
  // The marker first, then the clock: a boundary's host time is never
  // before its marker was enqueued, so an idle GPU completes the marker no
  // later than that time (plus its latency) even if this thread is preempted
  // in between.
  f.stream = stream_;
  f.named_stream = false;
  PutRelease(f.begin_event, RecordMarker(f.stream));
  const int64_t begin = Now();
  PutRelease(f.begin_ns, begin);
  PutRelease(last_step_begin_, begin);
  PutRelease(f.serial, serial);
  PutRelease(depth_, d + 1);
  return {serial, static_cast<uint8_t>(d), ScopeStatus::kOk, session_tag_};
}

GPUSCOPE_INLINE ScopeToken Recorder::OpenPhase(uint16_t id, uint64_t stream,
                                               bool named_stream) noexcept {
  if (depth_ >= kMaxOpenScopes) {
    too_deep_.Increment();
    return {0, 0, ScopeStatus::kTooDeep};
  }
  const int d = depth_;
  Frame& f = stack_[static_cast<size_t>(d)];
  Put(f.serial, uint32_t{0});  // as in BeginStep()
  const uint32_t serial = NextSerial();
  PutRelease(f.name_id, id);
  PutRelease(f.is_step, false);
  if (annotate_) annotator_->PushPhase(id);
  // Phases outside steps, or in a step without markers, are timed on the
  // host only: no marker.
  f.stream = stream;
  f.named_stream = named_stream;
  PutRelease(f.begin_event,
             step_frame_ >= 0 && stack_[static_cast<size_t>(step_frame_)].begin_event != kNoEvent
                 ? RecordMarker(stream)
                 : kNoEvent);
  PutRelease(f.begin_ns, Now());
  PutRelease(f.serial, serial);
  PutRelease(depth_, d + 1);
  return {serial, static_cast<uint8_t>(d), ScopeStatus::kOk, session_tag_};
}

// An int, not an optional<uint16_t>: GCC returns the latter through memory,
// and reading it back stalls on store forwarding.
GPUSCOPE_INLINE int Recorder::Validate(PhaseId phase) noexcept {
  if (phase.value() >= phases_->size() || (!phase.builtin() && phase.session_tag() != session_tag_))
      [[unlikely]] {
    invalid_phase_.Increment();  // another session's id
    return -1;
  }
  return phase.value();
}

int Recorder::LookUp(std::string_view name) noexcept {
  std::optional<PhaseId> id = phases_->Find(name);
  if (!id.has_value() && !phases_->full() && PhaseNameProblem(name) == nullptr) {
    // First use of a custom name: registration locks and allocates, once.
    absl::StatusOr<PhaseId> registered = phases_->Register(name);
    if (registered.ok()) id = *registered;
  }
  if (!id.has_value()) {
    invalid_phase_.Increment();
    return -1;
  }
  return id->value();
}

ScopeToken Recorder::BeginPhase(PhaseId phase) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) [[unlikely]]
    return {0, 0, s};
  const int id = Validate(phase);
  if (id < 0) [[unlikely]]
    return {0, 0, ScopeStatus::kInvalidPhase};
  return OpenPhase(static_cast<uint16_t>(id), stream_, false);
}

ScopeToken Recorder::BeginPhase(std::string_view name) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  const int id = LookUp(name);
  return id >= 0 ? OpenPhase(static_cast<uint16_t>(id), stream_, false)
                 : ScopeToken{0, 0, ScopeStatus::kInvalidPhase};
}

ScopeToken Recorder::BeginPhase(PhaseId phase, uint64_t stream) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  const int id = Validate(phase);
  return id >= 0 ? OpenPhase(static_cast<uint16_t>(id), stream, true)
                 : ScopeToken{0, 0, ScopeStatus::kInvalidPhase};
}

ScopeToken Recorder::BeginPhase(std::string_view name, uint64_t stream) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  const int id = LookUp(name);
  return id >= 0 ? OpenPhase(static_cast<uint16_t>(id), stream, true)
                 : ScopeToken{0, 0, ScopeStatus::kInvalidPhase};
}

// End() of the innermost open scope (the scopes' destructors, in order) in
// straight line; anything else (misuse, several scopes closed at once)
// through CloseChecked(), which does the same for one scope.
ScopeStatus Recorder::End(ScopeToken token) noexcept {
  if (!token.ok()) return token.status;
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) [[unlikely]]
    return s;
  const int d = token.depth;
  if (token.session_tag != session_tag_ || d + 1 != depth_ ||
      stack_[static_cast<size_t>(d)].serial != token.serial) [[unlikely]] {
    return CloseChecked(token, /*record=*/true, /*at_last_activity=*/false);
  }
  const Frame& f = stack_[static_cast<size_t>(d)];
  // The end marker first, then the clock (see BeginStep()).
  const uint32_t end_marker = f.begin_event != kNoEvent ? RecordMarker(f.stream) : kNoEvent;
  const int64_t now = Now();
  last_end_ = now;
  PutRelease(depth_, d);
  if (annotate_) annotator_->Pop();
  Emit(f, d, now, 0, end_marker);
  return ScopeStatus::kOk;
}

ScopeStatus Recorder::Close(ScopeToken token, bool record, bool at_last_activity) noexcept {
  if (!token.ok()) return token.status;
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return s;
  return CloseChecked(token, record, at_last_activity);
}

ScopeStatus Recorder::CloseChecked(ScopeToken token, bool record, bool at_last_activity) noexcept {
  if (token.session_tag != session_tag_) {
    stale_end_.Increment();
    return ScopeStatus::kWrongSession;
  }
  const int d = token.depth;
  if (d >= depth_ || stack_[static_cast<size_t>(d)].serial != token.serial) {
    stale_end_.Increment();  // ended twice, or closed with an enclosing scope
    return ScopeStatus::kAlreadyEnded;
  }
  const bool out_of_order = d + 1 != depth_;
  if (out_of_order) out_of_order_end_.Increment();
  // End markers first (innermost first, as the scopes close), then one clock
  // read for all of them: see BeginStep() for why the clock comes last.
  uint32_t end_markers[kMaxOpenScopes];
  for (int i = depth_ - 1; i >= d; --i) {
    const Frame& f = stack_[static_cast<size_t>(i)];
    // A scope ended after the fact gets no end marker: one recorded now
    // would take in whatever the GPU ran since. Its step keeps host numbers
    // only (a marker missing: see DeviceResolver::MakePending).
    end_markers[i] =
        f.begin_event != kNoEvent && !at_last_activity ? RecordMarker(f.stream) : kNoEvent;
  }
  int64_t now = Now();
  if (at_last_activity) {
    // Never before a scope being closed began: begins grow with depth, so
    // the innermost open frame's is the latest.
    now = std::max(last_end_, stack_[static_cast<size_t>(depth_ - 1)].begin_ns);
  } else {
    last_end_ = now;
  }
  const int open = depth_;
  PutRelease(depth_, d);
  for (int i = open - 1; i >= d; --i) {
    const Frame& f = stack_[static_cast<size_t>(i)];
    uint16_t flags = i == d ? 0 : kRecordAutoClosed;
    // A cancelled scope still sends its record, flagged: the aggregator then
    // drops it (and a step's phases) and returns its markers to the pool.
    if (!record) flags = static_cast<uint16_t>(flags | kRecordCancelled);
    if (annotate_) annotator_->Pop();
    Emit(f, i, now, flags, end_markers[i]);
  }
  return out_of_order ? ScopeStatus::kEndedOutOfOrder : ScopeStatus::kOk;
}

bool Recorder::ReadOpenScopes(OpenScopes* out) const noexcept {
  // Acquire loads throughout: a field's load is never moved before the
  // serial's first load, nor the serial's second load before the field's.
  constexpr std::memory_order kAcq = std::memory_order_acquire;
  for (int attempt = 0; attempt < 16; ++attempt) {
    const uint64_t step_seq = Get(step_seq_, kAcq);
    const int depth = std::clamp(Get(depth_, kAcq), 0, kMaxOpenScopes);
    out->depth = depth;
    out->step_seq = step_seq;
    out->last_step_begin = Get(last_step_begin_, kAcq);
    bool torn = false;
    for (int i = 0; i < depth && !torn; ++i) {
      const Frame& s = stack_[static_cast<size_t>(i)];
      OpenFrame& f = out->frames[static_cast<size_t>(i)];
      const uint32_t serial = Get(s.serial, kAcq);
      f.name_id = Get(s.name_id, kAcq);
      f.is_step = Get(s.is_step, kAcq);
      f.marker = Get(s.begin_event, kAcq);
      f.begin = Get(s.begin_ns, kAcq);
      torn = serial == 0 || Get(s.serial, kAcq) != serial;
    }
    // A step began while this read (its frame, step_seq and last_step_begin
    // belong together).
    if (!torn && Get(step_seq_, kAcq) == step_seq) return true;
  }
  return false;
}

void Recorder::SetStepCounts(int64_t samples, int64_t tokens) noexcept {
  if (CheckCaller() != ScopeStatus::kOk || step_frame_ < 0) return;
  step_samples_ = samples;
  step_tokens_ = tokens;
}

void Recorder::SetStream(uint64_t stream) noexcept {
  if (CheckCaller() == ScopeStatus::kOk) stream_ = stream;
}

}  // namespace gpuscope::internal
