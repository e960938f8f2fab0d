#include "core/device_resolution.h"

#include <algorithm>
#include <span>
#include <tuple>
#include <utility>

#include "gpuscope/phase.h"

namespace gpuscope::internal {

void DeviceResolver::QueueForget() {
  if (timer_ == nullptr || !resolving_) return;
  if (pending_.empty()) {
    ForgetLanes();
    return;
  }
  PendingStep forget;
  forget.kind = PendingStep::Kind::kForget;
  pending_.push_back(std::move(forget));
}

void DeviceResolver::ForgetLanes() {
  if (timer_ == nullptr) return;
  for (LanePast& p : lane_past_) p.state = LanePast::State::kUnknown;
  lane_default_ = LanePast::State::kUnknown;
}

void DeviceResolver::RememberLanes(const PendingStep& p) {
  const auto remember = [this](const PendingMarker& m) {
    if (m.lane >= lane_past_.size())
      lane_past_.resize(m.lane + size_t{1}, LanePast{lane_default_, {}});
    LanePast& past = lane_past_[m.lane];
    const Boundary b{m.host_ns, m.device_ns, m.lane};
    if (past.state != LanePast::State::kKnown || past.last.host_ns < b.host_ns ||
        (past.last.host_ns == b.host_ns && past.last.device_ns <= b.device_ns)) {
      past = {LanePast::State::kKnown, b};
    }
  };
  remember(p.begin);
  remember(p.end);
  for (const PendingPhase& ph : p.phases) {
    remember(ph.begin);
    remember(ph.end);
  }
}

DeviceResolver::PendingMarker DeviceResolver::Pending(uint32_t slot, int64_t host_ns) const {
  PendingMarker m;
  m.slot = slot;
  m.host_ns = host_ns;
  if (slot != kNoEvent && timer_ != nullptr) m.lane = timer_->LaneOf(slot);
  return m;
}

void DeviceResolver::MakeCompletedStepPending(const Record& step, uint64_t index,
                                              bool no_device_numbers, std::vector<Record>* phases) {
  if (timer_ != nullptr) {
    MakePending(step, no_device_numbers ? PendingStep::Kind::kNone : PendingStep::Kind::kAnalyze,
                index, phases, /*cancelled=*/nullptr);
  } else if (activity_ != nullptr && resolving_) {
    // Waits for the activity records of its window (host times only).
    PendingStep p;
    p.index = index;
    p.begin.host_ns = step.begin_ns;
    p.end.host_ns = std::max(step.end_ns, step.begin_ns);
    p.phases.reserve(phases->size());
    for (const Record& r : *phases) {
      PendingPhase ph;
      ph.id = r.name_id;
      ph.depth = r.depth;
      ph.begin.host_ns = r.begin_ns;
      ph.end.host_ns = std::max(r.end_ns, r.begin_ns);
      p.phases.push_back(ph);
    }
    pending_.push_back(std::move(p));
  }
}

void DeviceResolver::TakeCancelledStep(const Record& step, uint64_t index,
                                       std::vector<Record>* phases,
                                       std::vector<Record>* cancelled) {
  // Not a step after all; its markers still say where each lane stands.
  if (timer_ != nullptr) {
    MakePending(step, PendingStep::Kind::kHistoryOnly, index, phases, cancelled);
  }
  phases->clear();  // without a timer, records carry no markers
  cancelled->clear();
}

void DeviceResolver::MakePending(const Record& step, PendingStep::Kind kind, uint64_t index,
                                 std::vector<Record>* phases, std::vector<Record>* cancelled) {
  PendingStep p;
  p.kind = kind;
  p.index = index;
  bool complete = kind != PendingStep::Kind::kNone && step.begin_event != kNoEvent &&
                  step.end_event != kNoEvent;
  p.begin = Pending(step.begin_event, step.begin_ns);
  p.end = Pending(step.end_event, std::max(step.end_ns, step.begin_ns));
  // A cancelled step's history includes its cancelled phases.
  p.phases.reserve(phases->size() + (cancelled != nullptr ? cancelled->size() : 0));
  for (const std::vector<Record>* v : {phases, cancelled}) {
    if (v == nullptr) break;
    for (const Record& r : *v) {
      complete = complete && r.begin_event != kNoEvent && r.end_event != kNoEvent;
      PendingPhase ph;
      ph.id = r.name_id;
      ph.depth = r.depth;
      ph.begin = Pending(r.begin_event, r.begin_ns);
      ph.end = Pending(r.end_event, std::max(r.end_ns, r.begin_ns));
      // Both ends on one lane, or the phase's work cannot be placed (the
      // device was switched inside it while marking a default stream).
      complete = complete && ph.begin.lane == ph.end.lane;
      p.phases.push_back(ph);
    }
  }
  if (!complete || !resolving_) {
    // A marker is missing (pool empty, device error, no stream), or the
    // source was lowered: no device numbers for this step; its markers go
    // straight back, and what ran on each lane meanwhile is unknown.
    QueueForget();
    ReleaseMarkers(step);
    for (const std::vector<Record>* v : {phases, cancelled}) {
      if (v == nullptr) break;
      for (const Record& r : *v) ReleaseMarkers(r);
    }
  } else {
    pending_.push_back(std::move(p));  // the markers are the pending step's now
  }
  phases->clear();
  if (cancelled != nullptr) cancelled->clear();
}

void DeviceResolver::ReleaseMarkers(const PendingStep& p) {
  // Forget entries and activity-mode steps hold none.
  if (p.kind == PendingStep::Kind::kForget || timer_ == nullptr) return;
  timer_->Release(p.begin.slot);
  timer_->Release(p.end.slot);
  for (const PendingPhase& ph : p.phases) {
    timer_->Release(ph.begin.slot);
    timer_->Release(ph.end.slot);
  }
}

DeviceResolver::Resolution DeviceResolver::Resolve(StepWindow* window, bool final) {
  if (!resolving_) return Resolution::kOk;
  if (activity_ != nullptr) return ResolveFromActivity(final, window);
  if (timer_ == nullptr) return Resolution::kOk;
  while (!pending_.empty()) {
    PendingStep& p = pending_.front();
    if (p.kind == PendingStep::Kind::kForget) {
      ForgetLanes();
      pending_.pop_front();
      continue;
    }
    // Markers complete in record order on a stream: ask in that order and
    // stop at the first one still pending.
    MarkerState state = MarkerState::kComplete;
    const auto ask = [&](PendingMarker& m) {
      if (m.done || state != MarkerState::kComplete) return;
      int64_t t = 0;
      state = timer_->Query(m.slot, &t);
      if (state == MarkerState::kComplete) {
        m.device_ns = std::max(t, m.host_ns);
        m.done = true;
      }
    };
    ask(p.begin);
    for (PendingPhase& ph : p.phases) {
      ask(ph.begin);
      ask(ph.end);
    }
    ask(p.end);
    if (state == MarkerState::kLost) return Resolution::kMarkerLost;
    if (state == MarkerState::kPending) return Resolution::kOk;
    if (p.kind == PendingStep::Kind::kAnalyze) {
      ApplyDeviceResult(p, window);
    } else {
      RememberLanes(p);
    }
    ReleaseMarkers(p);
    pending_.pop_front();
  }
  return Resolution::kOk;
}

void DeviceResolver::DropPending() {
  for (const PendingStep& p : pending_) ReleaseMarkers(p);
  pending_.clear();
}

int64_t DeviceResolver::steps_waiting(uint64_t first_index) const {
  return std::count_if(pending_.begin(), pending_.end(), [first_index](const PendingStep& p) {
    return p.kind == PendingStep::Kind::kAnalyze && p.index >= first_index;
  });
}

void DeviceResolver::ApplyDeviceResult(PendingStep& p, StepWindow* window) {
  const uint64_t first = window->first_index();
  if (p.index < first) {  // rolled out of the window before the GPU caught up
    RememberLanes(p);
    return;
  }
  const auto boundary = [](const PendingMarker& m) {
    return Boundary{m.host_ns, m.device_ns, m.lane};
  };
  StepTimelineInput in;
  in.begin = boundary(p.begin);
  in.end = boundary(p.end);
  in.phases.reserve(p.phases.size());
  uint16_t lanes = static_cast<uint16_t>(std::max(p.begin.lane, p.end.lane) + 1);
  for (const PendingPhase& ph : p.phases) {
    in.phases.push_back({ph.id, ph.depth, ph.id == static_cast<uint16_t>(Phase::kData),
                         boundary(ph.begin), boundary(ph.end)});
    lanes = std::max(
        {lanes, static_cast<uint16_t>(ph.begin.lane + 1), static_cast<uint16_t>(ph.end.lane + 1)});
  }
  in.past = lane_past_;
  in.past.resize(std::max<size_t>(in.past.size(), lanes), LanePast{lane_default_, {}});
  in.lane_device.resize(in.past.size());
  for (size_t lane = 0; lane < in.lane_device.size(); ++lane) {
    in.lane_device[lane] = std::max(0, timer_->LaneDevice(static_cast<uint16_t>(lane)));
  }
  const StepTimeline t = AnalyzeStepTimeline(in);
  if (TraceStep* trace = window->FindTrace(p.index); trace != nullptr) {
    // p.phases begins with the step's records in the order the trace took
    // them (step assembly's sorted phase records).
    for (size_t i = 0; i < trace->phases.size() && i < p.phases.size(); ++i) {
      TraceSpan& span = trace->phases[i];
      const PendingPhase& ph = p.phases[i];
      if (span.id != ph.id || span.begin_ns != ph.begin.host_ns) continue;
      span.device_begin_ns = ph.begin.device_ns;
      span.device_end_ns = std::max(ph.end.device_ns, ph.begin.device_ns);
      span.lane = ph.begin.lane;
      span.device = std::max(0, timer_->LaneDevice(ph.begin.lane));
    }
  }
  RememberLanes(p);
  StepRecord* s = window->MutableStep(p.index);
  if (s == nullptr || t.devices.size() > kMaxDevicesPerStep) return;
  s->num_devices = static_cast<uint8_t>(t.devices.size());
  s->device_busy_ns = t.busy_upper_ns;
  s->device_span_ns = t.device_span_ns;
  s->backlog_begin_ns = t.backlog_begin_ns;
  s->idle_other_ns = t.idle_other_ns;
  if (StepDevices* d = window->MutableDevices(p.index); d != nullptr) {
    for (size_t i = 0; i < t.devices.size(); ++i)
      d->devices[i] = {t.devices[i].device, t.devices[i].busy_upper_ns};
  }
  // p.phases is in (phase id, begin) order: a phase's first occurrence
  // comes first and gives its backlog; its device time is the union of its
  // occurrences' spans (a phase nested in itself is not counted twice).
  for (size_t i = 0; i < p.phases.size();) {
    const uint16_t id = p.phases[i].id;
    const int64_t backlog = t.phases[i].backlog_begin_ns;
    int64_t device_ns = 0, idle_ns = 0;
    int64_t union_end = p.phases[i].begin.device_ns;
    for (; i < p.phases.size() && p.phases[i].id == id; ++i) {
      const int64_t b = p.phases[i].begin.device_ns;
      const int64_t e = std::max(p.phases[i].end.device_ns, b);
      if (b > union_end) union_end = b;  // a gap: start a new piece
      device_ns += std::max<int64_t>(0, e - std::max(union_end, b));
      union_end = std::max(union_end, e);
      idle_ns += t.phases[i].idle_ns;
    }
    window->SetPhaseDevice(id, p.index, device_ns, idle_ns, backlog);
  }
}

DeviceResolver::Resolution DeviceResolver::ResolveFromActivity(bool final, StepWindow* window) {
  const size_t before = acts_.size();
  acts_horizon_ = std::max(acts_horizon_, activity_->Drain(&acts_, final));
  // Kept in begin order, so that each step looks at its own slice only; ties
  // broken by the rest of the record, so that the order (which the trace
  // shows) never depends on how the records were drained.
  const auto by_begin = [](const DeviceInterval& a, const DeviceInterval& b) {
    return std::tie(a.begin_ns, a.end_ns, a.device, a.stream, a.kind, a.launch_ns, a.bytes) <
           std::tie(b.begin_ns, b.end_ns, b.device, b.stream, b.kind, b.launch_ns, b.bytes);
  };
  std::sort(acts_.begin() + static_cast<std::ptrdiff_t>(before), acts_.end(), by_begin);
  std::inplace_merge(acts_.begin(), acts_.begin() + static_cast<std::ptrdiff_t>(before),
                     acts_.end(), by_begin);
  for (size_t i = before; i < acts_.size(); ++i) {
    longest_activity_ns_ = std::max(longest_activity_ns_, acts_[i].end_ns - acts_[i].begin_ns);
    latest_activity_end_ns_ = std::max(latest_activity_end_ns_, acts_[i].end_ns);
  }
  while (!pending_.empty() && pending_.front().end.host_ns <= acts_horizon_) {
    ApplyActivityResult(pending_.front(), window);
    pending_.pop_front();
  }
  // At close, steps whose records are not all in go without GPU numbers:
  // partial records would overstate their idle time.
  if (final) pending_.clear();
  // Keep what a pending step, or one not ended yet, may still need: activity
  // that ends after, or is launched after, the oldest such step's begin, less
  // a margin for launch gaps and host-wait tests that look one activity
  // back. A step not ended yet began after the last completed one ended.
  constexpr int64_t kMarginNs = 100'000'000;
  const int64_t keep_from =
      (pending_.empty() ? last_step_end_ns_ : pending_.front().begin.host_ns) - kMarginNs;
  const auto stale = [keep_from](const DeviceInterval& a) {
    return a.end_ns < keep_from && a.launch_ns < keep_from;
  };
  for (const DeviceInterval& a : acts_) {
    // Before every unresolved step: part of the device history for all of them.
    if (stale(a) && a.begin_ns >= history_until_) NoteDeviceActivity(a);
  }
  acts_.erase(std::remove_if(acts_.begin(), acts_.end(), stale), acts_.end());
  return Resolution::kOk;
}

void DeviceResolver::NoteDeviceActivity(const DeviceInterval& a) {
  if (!IsDeviceActivity(a.kind)) return;
  const int device = static_cast<int>(a.device);
  auto it = std::find_if(seen_devices_.begin(), seen_devices_.end(),
                         [device](const SeenDevice& d) { return d.device == device; });
  if (it == seen_devices_.end()) {
    seen_devices_.push_back({device, a.end_ns});
  } else {
    it->last_ns = std::max(it->last_ns, a.end_ns);
  }
}

void DeviceResolver::FoldHistoryUpTo(int64_t t) {
  if (t <= history_until_) return;
  auto it = std::lower_bound(acts_.cbegin(), acts_.cend(), history_until_,
                             [](const DeviceInterval& a, int64_t v) { return a.begin_ns < v; });
  for (; it != acts_.cend() && it->begin_ns < t; ++it) NoteDeviceActivity(*it);
  history_until_ = t;
}

namespace {

// The index of the first of `acts` (in begin order) that begins at or
// after `t`.
size_t FirstBeginningAt(const std::vector<DeviceInterval>& acts, int64_t t) {
  return static_cast<size_t>(
      std::lower_bound(acts.cbegin(), acts.cend(), t,
                       [](const DeviceInterval& a, int64_t v) { return a.begin_ns < v; }) -
      acts.cbegin());
}

// A traced step's activity: what overlaps the step, and what lies within
// the launch threshold of its edges (it decides whether an edge gap is a
// launch gap); and its devices' time by category.
void TraceActivity(const ActivityStepInput& in, const ActivityStepResult& r,
                   int64_t launch_threshold_ns, TraceStep& t) {
  const int64_t from = in.begin_ns - launch_threshold_ns, to = in.end_ns + launch_threshold_ns;
  for (const DeviceInterval& a : in.activity) {
    if (!(a.end_ns > from && a.begin_ns < to) &&
        !(a.begin_ns == a.end_ns && a.begin_ns >= from && a.begin_ns < to)) {
      continue;
    }
    if (t.activity.size() >= kMaxTraceActivityPerStep) {
      ++t.activity_dropped;
      continue;
    }
    t.activity.push_back(a);
  }
  t.has_activity = true;
  t.device_time.clear();
  for (const ActivityDeviceResult& d : r.devices) {
    t.device_time.push_back({static_cast<uint32_t>(d.device), d.kernel_ns, d.memcpy_ns, d.memset_ns,
                             d.comm_ns, d.idle_ns});
  }
}

}  // namespace

void DeviceResolver::FillActivityInput(const PendingStep& p, ActivityStepInput* in) const {
  in->begin_ns = p.begin.host_ns;
  in->end_ns = p.end.host_ns;
  // The slice that can concern the step: from activity that may still run
  // (or end a launch gap, or precede a kernel on its stream) at its begin, to
  // activity beginning by its end plus the launch threshold. Records are in
  // begin order; the longest one bounds how far back to look.
  const size_t lo =
      FirstBeginningAt(acts_, in->begin_ns - longest_activity_ns_ - launch_threshold_ns_ - 1);
  const size_t hi = FirstBeginningAt(acts_, in->end_ns + launch_threshold_ns_ + 1);
  in->activity = std::span<const DeviceInterval>(acts_.data() + lo, hi - lo);
  in->launch_threshold_ns = launch_threshold_ns_;
  // A device takes part in a step, even idle throughout, when it has worked
  // by the step's end and within the 10 s before its begin: not every step
  // forever (a stray memset on a device must not count it idle for good).
  constexpr int64_t kDeviceRecentNs = 10'000'000'000;
  for (const SeenDevice& d : seen_devices_) {
    if (d.last_ns >= in->begin_ns - kDeviceRecentNs) {
      in->known_devices.push_back(d.device);
    }
  }
  in->phases.reserve(p.phases.size());
  for (const PendingPhase& ph : p.phases) {
    in->phases.push_back({ph.id, ph.depth, ph.begin.host_ns, ph.end.host_ns});
  }
}

void DeviceResolver::ApplyActivityResult(const PendingStep& p, StepWindow* window) {
  // Everything that began before the step's end is in (the horizon passed
  // it): fold it into the device history, whether or not the step is kept.
  FoldHistoryUpTo(p.end.host_ns);
  const uint64_t first = window->first_index();
  if (p.index < first) return;  // rolled out of the window meanwhile
  ActivityStepInput in;
  FillActivityInput(p, &in);
  // Work a phase launched begins at or after the step's begin, possibly
  // after its end.
  const size_t launched_from = FirstBeginningAt(acts_, in.begin_ns);
  const std::span<const DeviceInterval> launched(acts_.data() + launched_from,
                                                 acts_.size() - launched_from);
  const ActivityStepResult r = AnalyzeActivityStep(in);
  if (TraceStep* t = window->FindTrace(p.index); t != nullptr) {
    TraceActivity(in, r, launch_threshold_ns_, *t);
  }
  StepRecord* s = window->MutableStep(p.index);
  if (s == nullptr || r.devices.empty() || r.devices.size() > kMaxDevicesPerStep) return;
  s->num_devices = static_cast<uint8_t>(r.devices.size());
  s->device_busy_ns = r.busy_ns;
  s->idle_other_ns = r.idle_other_ns;
  s->idle_launch_ns = r.idle_launch_ns;
  if (StepDevices* d = window->MutableDevices(p.index); d != nullptr) {
    for (size_t i = 0; i < r.devices.size(); ++i)
      d->devices[i] = {r.devices[i].device, r.devices[i].busy_ns};
    d->activity = r.counts;
    d->num_kernels = static_cast<uint8_t>(std::min(r.kernels.size(), kKernelsPerStep));
    std::copy_n(r.kernels.begin(), d->num_kernels, d->kernels.begin());
  }
  // Per phase id: idle charged to its occurrences, and the device time of
  // the work launched in them (p.phases is in (phase id, begin) order).
  for (size_t i = 0; i < p.phases.size();) {
    const uint16_t id = p.phases[i].id;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    int64_t idle = 0;
    for (; i < p.phases.size() && p.phases[i].id == id; ++i) {
      ranges.emplace_back(p.phases[i].begin.host_ns, p.phases[i].end.host_ns);
      idle += r.phases[i].idle_ns;
    }
    window->SetPhaseDevice(id, p.index, LaunchedDeviceTime(launched, ranges), idle, -1);
  }
}

}  // namespace gpuscope::internal
