#include "core/step_assembly.h"

#include <algorithm>
#include <tuple>

namespace gpuscope::internal {

StepAssembler::StepAssembler(StepWindow* window, TelemetryWindow* telemetry, MemoryWindow* memory,
                             DeviceResolver* device)
    : window_(window), telemetry_(telemetry), memory_(memory), device_(device) {
  scratch_.reserve(64);
}

void StepAssembler::DiscardScratch() {
  for (const Record& r : scratch_) device_->ReleaseMarkers(r);
  for (const Record& r : cancelled_) device_->ReleaseMarkers(r);
  scratch_.clear();
  cancelled_.clear();
  scratch_overflow_ = false;
}

bool StepAssembler::ScratchHasMarkers() const {
  if (scratch_overflow_) return true;  // records left out may have had some
  for (const std::vector<Record>* v : {&scratch_, &cancelled_}) {
    for (const Record& r : *v) {
      if (r.begin_event != kNoEvent || r.end_event != kNoEvent) return true;
    }
  }
  return false;
}

void StepAssembler::Consume(const Record& record) {
  const int64_t duration = std::max<int64_t>(0, record.end_ns - record.begin_ns);
  if (record.step_seq > last_step_seq_ + 1) {
    // Every record of a step was dropped (a full queue): its markers and the
    // work between them went unseen.
    device_->QueueForget();
  }
  last_step_seq_ = std::max(last_step_seq_, record.step_seq);
  if (record.kind == RecordKind::kPhase && record.step_seq == 0 &&
      (record.flags & kRecordNamedStream) != 0) {
    // Work on a named stream between steps: no markers bracket it.
    device_->QueueForget();
  }
  if (record.kind == RecordKind::kPhase) {
    const bool cancelled = (record.flags & kRecordCancelled) != 0;
    if (record.name_id >= window_->max_phases() || (cancelled && record.step_seq == 0)) {
      device_->ReleaseMarkers(record);
      return;
    }
    if (record.step_seq == 0) {
      device_->ReleaseMarkers(record);  // phases outside steps are timed on the host only
      window_->AddOutside(record.name_id, duration);
      return;
    }
    if (record.step_seq != scratch_seq_) {
      // The previous step's own record never arrived (dropped): leave it out.
      if (!scratch_.empty() || scratch_overflow_) window_->CountIncomplete();
      if (ScratchHasMarkers()) device_->QueueForget();
      DiscardScratch();
      scratch_seq_ = record.step_seq;
    }
    if (scratch_.size() + cancelled_.size() >= kMaxRecordsPerStep) [[unlikely]] {
      scratch_overflow_ = true;
      device_->ReleaseMarkers(record);
      return;
    }
    // A cancelled phase is no part of the step, but its markers tell where
    // its stream stands.
    (cancelled ? cancelled_ : scratch_).push_back(record);
    return;
  }
  if (record.kind != RecordKind::kStep) {
    device_->ReleaseMarkers(record);
    return;
  }
  if (record.step_seq != scratch_seq_) {
    if (!scratch_.empty() || scratch_overflow_) window_->CountIncomplete();
    if (ScratchHasMarkers()) device_->QueueForget();
    DiscardScratch();
    scratch_seq_ = record.step_seq;
  }
  if ((record.flags & kRecordCancelled) != 0) {
    // Not a step after all (the probe for an item that never came); its
    // markers still say where each lane stands.
    device_->TakeCancelledStep(record, window_->completed() - 1, &scratch_, &cancelled_);
    DiscardScratch();
  } else if ((record.flags & kRecordIncomplete) != 0 || scratch_overflow_) {
    window_->CountIncomplete();
    device_->QueueForget();  // records of it were dropped, markers with them
    DiscardScratch();
    device_->ReleaseMarkers(record);
  } else {
    // Phases cancelled in a step that was not bracket work this step's
    // analysis cannot place: the step goes without device numbers.
    const bool unplaceable = !cancelled_.empty();
    for (const Record& r : cancelled_) device_->ReleaseMarkers(r);
    cancelled_.clear();
    FinishStep(record, unplaceable);  // takes the markers of the step and its phases
  }
}

void StepAssembler::FinishStep(const Record& step, bool no_device_numbers) {
  StepRecord record;
  record.begin_ns = step.begin_ns;
  record.end_ns = std::max(step.end_ns, step.begin_ns);
  record.samples = step.samples;
  record.tokens = step.tokens;

  // Group the step's phase intervals by name, in begin order, to take each
  // name's union (a phase nested in itself, or repeated, is not counted twice).
  if (scratch_.size() > 1)
    std::sort(scratch_.begin(), scratch_.end(), [](const Record& a, const Record& b) {
      return std::tie(a.name_id, a.begin_ns, a.end_ns) < std::tie(b.name_id, b.begin_ns, b.end_ns);
    });
  int64_t top_level = 0;
  samples_.clear();
  for (size_t i = 0; i < scratch_.size();) {
    const uint16_t id = scratch_[i].name_id;
    PhaseSample sample;
    int64_t cur_begin = scratch_[i].begin_ns;
    int64_t cur_end = scratch_[i].begin_ns;
    for (; i < scratch_.size() && scratch_[i].name_id == id; ++i) {
      const Record& r = scratch_[i];
      const int64_t end = std::max(r.end_ns, r.begin_ns);
      if (r.begin_ns > cur_end) {
        sample.total_ns += cur_end - cur_begin;
        cur_begin = r.begin_ns;
      }
      cur_end = std::max(cur_end, end);
      ++sample.count;
      if (r.depth == 0) {
        sample.top_ns += end - r.begin_ns;
        sample.top_level = true;
      }
    }
    sample.total_ns += cur_end - cur_begin;
    top_level += sample.top_ns;
    samples_.emplace_back(id, sample);
  }
  record.top_level_ns = std::min(top_level, record.duration_ns());
  StepRecord& s = window_->Append(record, samples_);
  telemetry_->OnStepAppended(&s, window_->size());
  s.memory_peak = memory_->OnStep(s.index, s.begin_ns, s.end_ns, scratch_);
  if (window_->trace.capacity() > 0) {
    TraceStep& t = window_->trace.Append();
    t.index = s.index;
    t.begin_ns = s.begin_ns;
    t.end_ns = s.end_ns;
    t.phases.clear();
    t.activity.clear();
    t.has_activity = false;
    t.activity_dropped = 0;
    t.device_time.clear();
    for (const Record& r : scratch_) {
      TraceSpan span;
      span.id = r.name_id;
      span.depth = r.depth;
      span.begin_ns = r.begin_ns;
      span.end_ns = std::max(r.end_ns, r.begin_ns);
      t.phases.push_back(span);
    }
  }
  // Takes the markers of the step and its phases (scratch_ is left empty).
  device_->TakeCompletedStep(step, s.index, no_device_numbers, &scratch_);
}

}  // namespace gpuscope::internal
