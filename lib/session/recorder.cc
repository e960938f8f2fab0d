// The recorder: the recording thread's side of a session (the hot path).
// Scope begin and end, step counts, the stream, and the record appended to
// the queue. Recording thread only: no allocation, no lock, no system call
// beyond the clock. The checks every call makes first (CheckCaller(), the
// clock, the marker) are inline in session/session_impl.h.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>

#include "session/session_impl.h"

namespace gpuscope::internal {

ScopeStatus SessionImpl::ForkedAway() noexcept {
  recording_flag_->store(false, std::memory_order_relaxed);  // scopes now cost one branch
  return ScopeStatus::kDisabled;
}

ScopeStatus SessionImpl::ClaimOrReject(uint64_t self) noexcept {
  uint64_t owner = 0;
  if (owner_thread_.compare_exchange_strong(owner, self, std::memory_order_relaxed)) {
    return ScopeStatus::kOk;  // the first caller becomes the recording thread
  }
  if (owner == self) return ScopeStatus::kOk;
  wrong_thread_.fetch_add(1, std::memory_order_relaxed);
  return ScopeStatus::kWrongThread;
}

ScopeToken SessionImpl::BeginStep(const StepOptions& step) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  if (step_frame_ >= 0) {
    nested_step_.Increment();
    return {0, 0, ScopeStatus::kNestedStep};
  }
  if (depth_ >= kMaxOpenScopes) {
    too_deep_.Increment();
    return {0, 0, ScopeStatus::kTooDeep};
  }
  ++step_seq_;
  step_samples_ = step.samples;
  step_tokens_ = step.tokens;
  step_incomplete_ = false;
  step_frame_ = depth_;
  Frame& f = stack_[static_cast<size_t>(depth_)];
  f.serial = NextSerial();
  f.name_id = 0;
  f.is_step = true;
  annotator_->PushStep(step_seq_ - 1);
  // The marker first, then the clock: a boundary's host time is never
  // before its marker was enqueued, so an idle GPU completes the marker no
  // later than that time (plus its latency) even if this thread is preempted
  // in between.
  f.stream = stream_;
  f.named_stream = false;
  f.begin_event = RecordMarker(f.stream);
  f.begin_ns = Now();
  return {f.serial, static_cast<uint8_t>(depth_++), ScopeStatus::kOk, session_tag_};
}

ScopeToken SessionImpl::OpenPhase(uint16_t id, uint64_t stream, bool named_stream) noexcept {
  if (depth_ >= kMaxOpenScopes) {
    too_deep_.Increment();
    return {0, 0, ScopeStatus::kTooDeep};
  }
  Frame& f = stack_[static_cast<size_t>(depth_)];
  f.serial = NextSerial();
  f.name_id = id;
  f.is_step = false;
  annotator_->PushPhase(id);
  // Phases outside steps, or in a step without markers, are timed on the
  // host only: no marker.
  f.stream = stream;
  f.named_stream = named_stream;
  f.begin_event =
      step_frame_ >= 0 && stack_[static_cast<size_t>(step_frame_)].begin_event != kNoEvent
          ? RecordMarker(stream)
          : kNoEvent;
  f.begin_ns = Now();
  return {f.serial, static_cast<uint8_t>(depth_++), ScopeStatus::kOk, session_tag_};
}

std::optional<uint16_t> SessionImpl::Validate(PhaseId phase) noexcept {
  if (phase.value() >= phases_.size() ||
      (!phase.builtin() && phase.session_tag() != session_tag_)) {  // another session's id
    invalid_phase_.Increment();
    return std::nullopt;
  }
  return phase.value();
}

std::optional<uint16_t> SessionImpl::LookUp(std::string_view name) noexcept {
  std::optional<PhaseId> id = phases_.Find(name);
  if (!id.has_value() && !phases_.full() && PhaseNameProblem(name) == nullptr) {
    // First use of a custom name: registration locks and allocates, once.
    absl::StatusOr<PhaseId> registered = phases_.Register(name);
    if (registered.ok()) id = *registered;
  }
  if (!id.has_value()) {
    invalid_phase_.Increment();
    return std::nullopt;
  }
  return id->value();
}

ScopeToken SessionImpl::BeginPhase(PhaseId phase) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  const std::optional<uint16_t> id = Validate(phase);
  return id.has_value() ? OpenPhase(*id, stream_, false)
                        : ScopeToken{0, 0, ScopeStatus::kInvalidPhase};
}

ScopeToken SessionImpl::BeginPhase(std::string_view name) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  const std::optional<uint16_t> id = LookUp(name);
  return id.has_value() ? OpenPhase(*id, stream_, false)
                        : ScopeToken{0, 0, ScopeStatus::kInvalidPhase};
}

ScopeToken SessionImpl::BeginPhase(PhaseId phase, uint64_t stream) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  const std::optional<uint16_t> id = Validate(phase);
  return id.has_value() ? OpenPhase(*id, stream, true)
                        : ScopeToken{0, 0, ScopeStatus::kInvalidPhase};
}

ScopeToken SessionImpl::BeginPhase(std::string_view name, uint64_t stream) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  const std::optional<uint16_t> id = LookUp(name);
  return id.has_value() ? OpenPhase(*id, stream, true)
                        : ScopeToken{0, 0, ScopeStatus::kInvalidPhase};
}

ScopeStatus SessionImpl::Close(ScopeToken token, bool record, bool at_last_activity) noexcept {
  if (!token.ok()) return token.status;
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return s;
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
  while (depth_ > d) {
    --depth_;
    const Frame& f = stack_[static_cast<size_t>(depth_)];
    uint16_t flags = depth_ == d ? 0 : kRecordAutoClosed;
    // A cancelled scope still sends its record, flagged: the aggregator then
    // drops it (and a step's phases) and returns its markers to the pool.
    if (!record) flags = static_cast<uint16_t>(flags | kRecordCancelled);
    annotator_->Pop();
    Emit(f, depth_, now, flags, end_markers[depth_]);
  }
  return out_of_order ? ScopeStatus::kEndedOutOfOrder : ScopeStatus::kOk;
}

void SessionImpl::SetStepCounts(int64_t samples, int64_t tokens) noexcept {
  if (CheckCaller() != ScopeStatus::kOk || step_frame_ < 0) return;
  step_samples_ = samples;
  step_tokens_ = tokens;
}

void SessionImpl::SetStream(uint64_t stream) noexcept {
  if (CheckCaller() == ScopeStatus::kOk) stream_ = stream;
}

void SessionImpl::Emit(const Frame& frame, int index, int64_t end_ns, uint16_t flags,
                       uint32_t end_marker) noexcept {
  Record r;
  r.begin_ns = frame.begin_ns;
  r.end_ns = end_ns;
  r.begin_event = frame.begin_event;
  r.end_event = end_marker;
  r.flags = frame.named_stream ? static_cast<uint16_t>(flags | kRecordNamedStream) : flags;
  if (frame.is_step) {
    r.kind = RecordKind::kStep;
    r.name_id = 0;
    r.depth = 0;
    r.step_seq = step_seq_;
    r.samples = step_samples_;
    r.tokens = step_tokens_;
    if (step_incomplete_) r.flags = static_cast<uint16_t>(r.flags | kRecordIncomplete);
    step_frame_ = -1;
  } else {
    r.kind = RecordKind::kPhase;
    r.name_id = frame.name_id;
    r.samples = -1;
    r.tokens = -1;
    if (step_frame_ >= 0 && index > step_frame_) {
      r.step_seq = step_seq_;
      r.depth = static_cast<uint8_t>(index - step_frame_ - 1);
    } else {
      r.step_seq = 0;  // a phase outside any step
      r.depth = static_cast<uint8_t>(index);
    }
  }
  if (!queue_.TryPush(r)) {
    dropped_records_.Increment();
    if (step_frame_ >= 0) step_incomplete_ = true;
    // The markers must still go back to the pool: hand them over apart.
    if (r.begin_event != kNoEvent) orphaned_markers_.TryPush(r.begin_event);
    if (r.end_event != kNoEvent) orphaned_markers_.TryPush(r.end_event);
  }
}

}  // namespace gpuscope::internal
