#include "core/aggregator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <map>
#include <string>
#include <tuple>

#include "backends/clocks_event_reasons.h"
#include "core/device_timeline.h"
#include "core/phase_table.h"
#include "core/quantiles.h"

namespace gpuscope::internal {

Aggregator::Aggregator(int window, int max_phases)
    : window_(static_cast<size_t>(window)),
      steps_(static_cast<size_t>(window)),
      phases_(static_cast<size_t>(max_phases)) {
  scratch_.reserve(64);
}

void Aggregator::ReleaseMarkers(const Record& r) {
  if (timer_ == nullptr) return;
  if (r.begin_event != kNoEvent) timer_->Release(r.begin_event);
  if (r.end_event != kNoEvent) timer_->Release(r.end_event);
}

void Aggregator::DiscardScratch() {
  for (const Record& r : scratch_) ReleaseMarkers(r);
  for (const Record& r : cancelled_) ReleaseMarkers(r);
  scratch_.clear();
  cancelled_.clear();
  scratch_overflow_ = false;
}

bool Aggregator::ScratchHasMarkers() const {
  if (scratch_overflow_) return true;  // records left out may have had some
  for (const std::vector<Record>* v : {&scratch_, &cancelled_}) {
    for (const Record& r : *v) {
      if (r.begin_event != kNoEvent || r.end_event != kNoEvent) return true;
    }
  }
  return false;
}

void Aggregator::QueueForget() {
  if (timer_ == nullptr || !resolving_) return;
  if (pending_.empty()) {
    ForgetLanes();
    return;
  }
  PendingStep forget;
  forget.kind = PendingStep::Kind::kForget;
  pending_.push_back(std::move(forget));
}

void Aggregator::ForgetLanes() {
  if (timer_ == nullptr) return;
  for (LanePast& p : lane_past_) p.state = LanePast::State::kUnknown;
  lane_default_ = LanePast::State::kUnknown;
}

void Aggregator::RememberLanes(const PendingStep& p) {
  const auto remember = [this](const PendingMarker& m) {
    if (m.lane >= lane_past_.size()) lane_past_.resize(m.lane + size_t{1}, LanePast{lane_default_, {}});
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

namespace {

// A weighted mean that skips unknown (NaN) values: nullopt when none came.
struct Mean {
  double sum = 0, weight = 0;
  void Add(double v, double w) {
    if (!std::isnan(v) && w > 0) {
      sum += v * w;
      weight += w;
    }
  }
  std::optional<double> Get() const { return weight > 0 ? std::optional<double>(sum / weight) : std::nullopt; }
};

float AsFloat(std::optional<double> v) {
  return v.has_value() ? static_cast<float>(*v) : std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

void Aggregator::AddTelemetry(const TelemetrySample& sample) {
  if (!samples_.empty() && sample.host_ns < samples_.back().host_ns) return;  // out of order
  if (samples_.size() == kTelemetrySamples) samples_.pop_front();
  samples_.push_back(sample);
  // Revise the steps still open (the newest ones: steps end in order).
  telemetry_open_ = std::min(telemetry_open_, steps_.size());
  size_t still_open = 0;
  for (size_t k = steps_.size() - telemetry_open_; k < steps_.size(); ++k) {
    StepRecord& s = steps_[k];
    s.telemetry = TelemetryOver(s.begin_ns, s.end_ns);
    if (s.end_ns > sample.host_ns) ++still_open;
  }
  telemetry_open_ = still_open;
}

template <typename F>
void Aggregator::ForEachSampleOver(int64_t begin_ns, int64_t end_ns, F f) const {
  const size_t n = samples_.size();
  // The first sample that can bear on the window: the one holding at its
  // begin (the last at or before it).
  size_t i = static_cast<size_t>(
      std::upper_bound(samples_.begin(), samples_.end(), begin_ns,
                       [](int64_t t, const TelemetrySample& s) { return t < s.host_ns; }) -
      samples_.begin());
  if (i > 0) --i;
  const bool instant = end_ns == begin_ns;
  for (; i < n; ++i) {
    const int64_t at = samples_[i].host_ns;
    const int64_t prev = i > 0 ? samples_[i - 1].host_ns : INT64_MIN;
    if (prev >= end_ns && !(instant && prev == end_ns)) break;
    const int64_t next = i + 1 < n ? samples_[i + 1].host_ns : INT64_MAX;
    double hold = static_cast<double>(std::min(next, end_ns) - std::max(at, begin_ns));
    if (instant) hold = at <= begin_ns && begin_ns < next ? 1 : 0;
    double rate = 0;
    if (i > 0) {
      rate = static_cast<double>(std::min(at, end_ns) - std::max(prev, begin_ns));
      if (instant) rate = prev < begin_ns && begin_ns <= at ? 1 : 0;
    }
    if (hold > 0 || rate > 0) f(samples_[i], std::max(0.0, hold), std::max(0.0, rate));
  }
}

// State (clocks, throttle reasons) holds from a sample to the next; rates
// (CPU, iowait, nvidia-smi's utilization, which NVML computes over its own
// past sample period) describe the interval from the previous sample to it.
StepTelemetry Aggregator::TelemetryOver(int64_t begin_ns, int64_t end_ns) const {
  StepTelemetry t;
  Mean util, ratio, cpu, iowait, proc, children;
  ForEachSampleOver(begin_ns, end_ns, [&](const TelemetrySample& s, double hold, double rate) {
    Mean gpu_util;
    double lowest_ratio = std::numeric_limits<double>::quiet_NaN();
    for (int g = 0; g < s.gpu_count; ++g) {
      const GpuSample& gs = s.gpus[static_cast<size_t>(g)];
      gpu_util.Add(gs.utilization_pct, 1);
      if (gs.sm_clock_max_mhz > 0) {
        const double r = gs.sm_clock_mhz / gs.sm_clock_max_mhz;
        if (std::isnan(lowest_ratio) || r < lowest_ratio) lowest_ratio = r;
      }
      if (hold > 0) t.clocks_event_reasons |= gs.clocks_event_reasons;
    }
    util.Add(gpu_util.Get().value_or(std::numeric_limits<double>::quiet_NaN()), rate);
    ratio.Add(lowest_ratio, hold);
    cpu.Add(s.host_cpu_pct, rate);
    iowait.Add(s.host_iowait_pct, rate);
    proc.Add(s.process_cores, rate);
    children.Add(s.children_cores, rate);
  });
  t.gpu_utilization_pct = AsFloat(util.Get());
  t.sm_clock_ratio = AsFloat(ratio.Get());
  t.host_cpu_pct = AsFloat(cpu.Get());
  t.host_iowait_pct = AsFloat(iowait.Get());
  t.process_cores = AsFloat(proc.Get());
  t.children_cores = AsFloat(children.Get());
  return t;
}

void Aggregator::FillTelemetry(Summary* out) const {
  out->telemetry.reset();
  if (telemetry_source_.empty()) return;
  TelemetryStats ts;
  ts.source = telemetry_source_;
  Mean util, ratio, cpu, iowait, proc, children, throttled_ratio;
  uint64_t reasons = 0;
  int64_t throttled = 0;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const StepRecord& s = steps_[i];
    const StepTelemetry& t = s.telemetry;
    const bool covered = !std::isnan(t.gpu_utilization_pct) || !std::isnan(t.host_cpu_pct) ||
                         !std::isnan(t.sm_clock_ratio) || !std::isnan(t.process_cores);
    if (!covered) continue;
    ++ts.steps;
    const double w = static_cast<double>(std::max<int64_t>(1, s.duration_ns()));
    util.Add(t.gpu_utilization_pct, w);
    ratio.Add(t.sm_clock_ratio, w);
    cpu.Add(t.host_cpu_pct, w);
    iowait.Add(t.host_iowait_pct, w);
    proc.Add(t.process_cores, w);
    children.Add(t.children_cores, w);
    reasons |= t.clocks_event_reasons;
    if (IsThrottling(t.clocks_event_reasons)) {
      ++throttled;
      throttled_ratio.Add(t.sm_clock_ratio, w);
    }
  }
  ts.gpu_utilization_pct = util.Get();
  ts.sm_clock_ratio = ratio.Get();
  ts.throttled_sm_clock_ratio = throttled_ratio.Get();
  ts.host_cpu_pct = cpu.Get();
  ts.host_iowait_pct = iowait.Get();
  ts.process_cores = proc.Get();
  ts.worker_cores = children.Get();
  ts.throttled_steps = ts.steps > 0 ? static_cast<double>(throttled) / static_cast<double>(ts.steps) : 0.0;
  ts.clocks_event_reasons = ClocksEventReasonNames(reasons);
  // Host memory and load, and per GPU: time-weighted over the window, each
  // sample holding until the next (as for steps); state is the last
  // sample's that covers the window.
  if (!steps_.empty()) {
    const int64_t from = steps_[0].begin_ns;
    const int64_t to = steps_[steps_.size() - 1].end_ns;
    Mean avail, pressure, swap, load, cpus;
    struct GpuMeans {
      GpuTelemetry latest;
      Mean util, sm, sm_max, mem, mem_max, power, limit, temp, used, total, rx, tx;
      uint64_t reasons = 0;
    };
    std::map<int, GpuMeans> per_gpu;
    ForEachSampleOver(from, to, [&](const TelemetrySample& s, double w, double rate) {
      avail.Add(s.memory_available_bytes, w);
      pressure.Add(s.memory_pressure_pct, w);
      swap.Add(s.swap_pages_per_s, rate);
      load.Add(s.load1, w);
      cpus.Add(s.cpus_available, w);
      for (int g = 0; g < s.gpu_count; ++g) {
        const GpuSample& gs = s.gpus[static_cast<size_t>(g)];
        GpuMeans& m = per_gpu[gs.index];
        m.util.Add(gs.utilization_pct, rate);
        m.latest.index = gs.index;
        if (w <= 0) continue;  // the rest is state, holding after the sample
        m.sm.Add(gs.sm_clock_mhz, w);
        m.sm_max.Add(gs.sm_clock_max_mhz, w);
        m.mem.Add(gs.mem_clock_mhz, w);
        m.mem_max.Add(gs.mem_clock_max_mhz, w);
        m.power.Add(gs.power_w, w);
        m.limit.Add(gs.power_limit_w, w);
        m.temp.Add(gs.temperature_c, w);
        m.used.Add(gs.memory_used_bytes, w);
        m.total.Add(gs.memory_total_bytes, w);
        m.rx.Add(gs.pcie_rx_bytes_per_s, w);
        m.tx.Add(gs.pcie_tx_bytes_per_s, w);
        m.reasons |= gs.clocks_event_reasons;
        GpuTelemetry& l = m.latest;
        l.pcie_gen = gs.pcie_gen;
        l.pcie_gen_max = gs.pcie_gen_max;
        l.pcie_width = gs.pcie_width;
        l.pcie_width_max = gs.pcie_width_max;
        l.ecc_corrected = gs.ecc_corrected;
        l.ecc_uncorrected = gs.ecc_uncorrected;
        l.persistence_mode = gs.persistence_mode;
        l.compute_mode = gs.compute_mode;
        l.mig_mode = gs.mig_mode;
      }
    });
    ts.memory_available_bytes = avail.Get();
    ts.memory_pressure_pct = pressure.Get();
    ts.swap_pages_per_s = swap.Get();
    ts.load1 = load.Get();
    ts.cpus_available = cpus.Get();
    const auto value = [](const Mean& m) { return m.Get().value_or(std::numeric_limits<double>::quiet_NaN()); };
    for (auto& [index, m] : per_gpu) {
      GpuTelemetry g = m.latest;
      g.utilization_pct = value(m.util);
      g.sm_clock_mhz = value(m.sm);
      g.sm_clock_max_mhz = value(m.sm_max);
      g.mem_clock_mhz = value(m.mem);
      g.mem_clock_max_mhz = value(m.mem_max);
      g.power_w = value(m.power);
      g.power_limit_w = value(m.limit);
      g.temperature_c = value(m.temp);
      g.memory_used_bytes = value(m.used);
      g.memory_total_bytes = value(m.total);
      g.pcie_rx_bytes_per_s = value(m.rx);
      g.pcie_tx_bytes_per_s = value(m.tx);
      g.clocks_event_reasons = ClocksEventReasonNames(m.reasons);
      ts.gpus.push_back(std::move(g));
    }
  }
  out->telemetry = std::move(ts);
}

Aggregator::PendingMarker Aggregator::Pending(uint32_t slot, int64_t host_ns) const {
  PendingMarker m;
  m.slot = slot;
  m.host_ns = host_ns;
  if (slot != kNoEvent && timer_ != nullptr) m.lane = timer_->LaneOf(slot);
  return m;
}

void Aggregator::Consume(const Record& record) {
  const int64_t duration = std::max<int64_t>(0, record.end_ns - record.begin_ns);
  if (record.step_seq > last_step_seq_ + 1) {
    // Every record of a step was dropped (a full queue): its markers and the
    // work between them went unseen.
    QueueForget();
  }
  last_step_seq_ = std::max(last_step_seq_, record.step_seq);
  if (record.kind == RecordKind::kPhase && record.step_seq == 0 &&
      (record.flags & kRecordNamedStream) != 0) {
    // Work on a named stream between steps: no markers bracket it.
    QueueForget();
  }
  if (record.kind == RecordKind::kPhase) {
    const bool cancelled = (record.flags & kRecordCancelled) != 0;
    if (record.name_id >= phases_.size() || (cancelled && record.step_seq == 0)) {
      ReleaseMarkers(record);
      return;
    }
    if (record.step_seq == 0) {
      ReleaseMarkers(record);  // phases outside steps are timed on the host only
      PhaseHistory& h = phases_[record.name_id];
      ++h.outside_count;
      h.outside_total_ns += duration;
      return;
    }
    if (record.step_seq != scratch_seq_) {
      // The previous step's own record never arrived (dropped): leave it out.
      if (!scratch_.empty() || scratch_overflow_) ++incomplete_steps_;
      if (ScratchHasMarkers()) QueueForget();
      DiscardScratch();
      scratch_seq_ = record.step_seq;
    }
    if (scratch_.size() + cancelled_.size() >= kMaxRecordsPerStep) {
      scratch_overflow_ = true;
      ReleaseMarkers(record);
      return;
    }
    // A cancelled phase is no part of the step, but its markers tell where
    // its stream stands.
    (cancelled ? cancelled_ : scratch_).push_back(record);
    return;
  }
  if (record.kind != RecordKind::kStep) {
    ReleaseMarkers(record);
    return;
  }
  if (record.step_seq != scratch_seq_) {
    if (!scratch_.empty() || scratch_overflow_) ++incomplete_steps_;
    if (ScratchHasMarkers()) QueueForget();
    DiscardScratch();
    scratch_seq_ = record.step_seq;
  }
  if ((record.flags & kRecordCancelled) != 0) {
    // Not a step after all (the probe for an item that never came); its
    // markers still say where each lane stands.
    if (timer_ != nullptr) MakePending(record, PendingStep::Kind::kHistoryOnly);
    DiscardScratch();
  } else if ((record.flags & kRecordIncomplete) != 0 || scratch_overflow_) {
    ++incomplete_steps_;
    QueueForget();  // records of it were dropped, markers with them
    DiscardScratch();
    ReleaseMarkers(record);
  } else {
    // Phases cancelled in a step that was not bracket work this step's
    // analysis cannot place: the step goes without device numbers.
    const bool unplaceable = !cancelled_.empty();
    for (const Record& r : cancelled_) ReleaseMarkers(r);
    cancelled_.clear();
    FinishStep(record, unplaceable);  // takes the markers of the step and its phases
    scratch_.clear();
  }
}

void Aggregator::FinishStep(const Record& step, bool no_device_numbers) {
  // Filled in place in the ring: a StepRecord is large, copies cost.
  StepRecord& s = steps_.Append();
  s.index = completed_;
  s.begin_ns = step.begin_ns;
  s.end_ns = std::max(step.end_ns, step.begin_ns);
  s.samples = step.samples;
  s.tokens = step.tokens;
  s.device_busy_ns = -1;
  s.num_devices = 0;
  s.device_span_ns = -1;
  s.backlog_begin_ns = -1;
  s.idle_other_ns = -1;
  s.idle_launch_ns = -1;
  s.telemetry = TelemetryOver(s.begin_ns, s.end_ns);
  if (samples_.empty() || samples_.back().host_ns < s.end_ns) {
    telemetry_open_ = std::min(telemetry_open_ + 1, steps_.size());
  }

  // Group the step's phase intervals by name, in begin order, to take each
  // name's union (a phase nested in itself, or repeated, is not counted twice).
  if (scratch_.size() > 1) std::sort(scratch_.begin(), scratch_.end(), [](const Record& a, const Record& b) {
    return std::tie(a.name_id, a.begin_ns, a.end_ns) < std::tie(b.name_id, b.begin_ns, b.end_ns);
  });
  int64_t top_level = 0;
  for (size_t i = 0; i < scratch_.size();) {
    const uint16_t id = scratch_[i].name_id;
    PhaseSample sample;
    sample.step_index = s.index;
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
        ++sample.top_count;
      }
    }
    sample.total_ns += cur_end - cur_begin;
    top_level += sample.top_ns;
    PhaseHistory& h = phases_[id];
    if (h.window.capacity() == 0) h.window.Reset(window_);
    h.window.Push(sample);
  }
  s.top_level_ns = std::min(top_level, s.duration_ns());
  if (trace_.capacity() > 0) {
    TraceStep& t = trace_.Append();
    t.index = s.index;
    t.begin_ns = s.begin_ns;
    t.end_ns = s.end_ns;
    t.phases.clear();
    t.activity.clear();
    t.has_activity = false;
    t.activity_dropped = 0;
    for (const Record& r : scratch_) {
      TraceSpan span;
      span.id = r.name_id;
      span.depth = r.depth;
      span.begin_ns = r.begin_ns;
      span.end_ns = std::max(r.end_ns, r.begin_ns);
      t.phases.push_back(span);
    }
  }
  last_step_end_ns_ = std::max(last_step_end_ns_, s.end_ns);
  lifetime_.Add(s.duration_ns());
  ++completed_;
  if (timer_ != nullptr) {
    MakePending(step, no_device_numbers ? PendingStep::Kind::kNone : PendingStep::Kind::kAnalyze);
  } else if (activity_ != nullptr && resolving_) {
    // Waits for the activity records of its window (host times only).
    PendingStep p;
    p.index = completed_ - 1;
    p.begin.host_ns = step.begin_ns;
    p.end.host_ns = std::max(step.end_ns, step.begin_ns);
    p.phases.reserve(scratch_.size());
    for (const Record& r : scratch_) {
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

// Takes the markers of `step` and of the scratch records (which stay in
// scratch_, without their markers' ownership).
void Aggregator::MakePending(const Record& step, PendingStep::Kind kind) {
  PendingStep p;
  p.kind = kind;
  p.index = completed_ - 1;
  bool complete = kind != PendingStep::Kind::kNone && step.begin_event != kNoEvent &&
                  step.end_event != kNoEvent;
  p.begin = Pending(step.begin_event, step.begin_ns);
  p.end = Pending(step.end_event, std::max(step.end_ns, step.begin_ns));
  // A cancelled step's history includes its cancelled phases.
  const bool with_cancelled = kind == PendingStep::Kind::kHistoryOnly;
  p.phases.reserve(scratch_.size() + (with_cancelled ? cancelled_.size() : 0));
  for (const std::vector<Record>* v : {&scratch_, &cancelled_}) {
    if (v == &cancelled_ && !with_cancelled) break;
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
    DiscardScratch();
    return;
  }
  pending_.push_back(std::move(p));
  // The markers are the pending step's now.
  scratch_.clear();
  if (with_cancelled) cancelled_.clear();
}

void Aggregator::ReleaseMarkers(const PendingStep& p) {
  // Forget entries and activity-mode steps hold none.
  if (p.kind == PendingStep::Kind::kForget || timer_ == nullptr) return;
  timer_->Release(p.begin.slot);
  timer_->Release(p.end.slot);
  for (const PendingPhase& ph : p.phases) {
    timer_->Release(ph.begin.slot);
    timer_->Release(ph.end.slot);
  }
}

Aggregator::Resolution Aggregator::ResolveFromActivity(bool final) {
  const size_t before = acts_.size();
  acts_horizon_ = std::max(acts_horizon_, activity_->Drain(&acts_, final));
  // Kept in begin order, so that each step looks at its own slice only.
  const auto by_begin = [](const DeviceInterval& a, const DeviceInterval& b) { return a.begin_ns < b.begin_ns; };
  std::sort(acts_.begin() + static_cast<std::ptrdiff_t>(before), acts_.end(), by_begin);
  std::inplace_merge(acts_.begin(), acts_.begin() + static_cast<std::ptrdiff_t>(before), acts_.end(), by_begin);
  for (size_t i = before; i < acts_.size(); ++i) {
    longest_activity_ns_ = std::max(longest_activity_ns_, acts_[i].end_ns - acts_[i].begin_ns);
  }
  while (!pending_.empty() && pending_.front().end.host_ns <= acts_horizon_) {
    ApplyActivityResult(pending_.front());
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

void Aggregator::NoteDeviceActivity(const DeviceInterval& a) {
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

void Aggregator::FoldHistoryUpTo(int64_t t) {
  if (t <= history_until_) return;
  auto it = std::lower_bound(acts_.cbegin(), acts_.cend(), history_until_,
                             [](const DeviceInterval& a, int64_t v) { return a.begin_ns < v; });
  for (; it != acts_.cend() && it->begin_ns < t; ++it) NoteDeviceActivity(*it);
  history_until_ = t;
}

void Aggregator::ApplyActivityResult(const PendingStep& p) {
  // Everything that began before the step's end is in (the horizon passed
  // it): fold it into the device history, whether or not the step is kept.
  FoldHistoryUpTo(p.end.host_ns);
  const uint64_t first = completed_ - steps_.size();
  if (p.index < first) return;  // rolled out of the window meanwhile
  ActivityStepInput in;
  in.begin_ns = p.begin.host_ns;
  in.end_ns = p.end.host_ns;
  // The slice that can concern the step: from activity that may still run
  // (or end a launch gap, or precede a kernel on its stream) at its begin, to
  // activity beginning by its end plus the launch threshold. Records are in
  // begin order; the longest one bounds how far back to look.
  const auto begins_before = [this](int64_t t) {
    return std::lower_bound(acts_.cbegin(), acts_.cend(), t,
                            [](const DeviceInterval& a, int64_t v) { return a.begin_ns < v; });
  };
  const auto lo = begins_before(in.begin_ns - longest_activity_ns_ - launch_threshold_ns_ - 1);
  const auto hi = begins_before(in.end_ns + launch_threshold_ns_ + 1);
  const auto at = [this](std::vector<DeviceInterval>::const_iterator it) {
    return acts_.data() + (it - acts_.cbegin());
  };
  in.activity = std::span<const DeviceInterval>(at(lo), static_cast<size_t>(hi - lo));
  // Work a phase launched begins at or after the step's begin, possibly
  // after its end.
  const auto launched_from = begins_before(in.begin_ns);
  const std::span<const DeviceInterval> launched(at(launched_from),
                                                 static_cast<size_t>(acts_.cend() - launched_from));
  in.launch_threshold_ns = launch_threshold_ns_;
  // A device takes part in a step, even idle throughout, when it has worked
  // by the step's end and within the 10 s before its begin: not every step
  // forever (a stray memset on a device must not count it idle for good).
  constexpr int64_t kDeviceRecentNs = 10'000'000'000;
  for (const SeenDevice& d : seen_devices_) {
    if (d.last_ns >= in.begin_ns - kDeviceRecentNs) {
      in.known_devices.push_back(d.device);
    }
  }
  in.phases.reserve(p.phases.size());
  for (const PendingPhase& ph : p.phases) {
    in.phases.push_back({ph.id, ph.depth, ph.begin.host_ns, ph.end.host_ns});
  }
  const ActivityStepResult r = AnalyzeActivityStep(in);
  if (TraceStep* t = FindTrace(p.index); t != nullptr) {
    // What overlaps the step, and what lies within the launch threshold of
    // its edges (it decides whether an edge gap is a launch gap, as above).
    const int64_t from = in.begin_ns - launch_threshold_ns_, to = in.end_ns + launch_threshold_ns_;
    for (const DeviceInterval& a : in.activity) {
      if (!(a.end_ns > from && a.begin_ns < to) && !(a.begin_ns == a.end_ns && a.begin_ns >= from && a.begin_ns < to)) {
        continue;
      }
      if (t->activity.size() >= kMaxTraceActivityPerStep) {
        ++t->activity_dropped;
        continue;
      }
      t->activity.push_back(a);
    }
    t->has_activity = true;
  }
  StepRecord& s = steps_[static_cast<size_t>(p.index - first)];
  if (r.devices.empty() || r.devices.size() > kMaxDevicesPerStep) return;
  s.num_devices = static_cast<uint8_t>(r.devices.size());
  for (size_t i = 0; i < r.devices.size(); ++i) s.devices[i] = {r.devices[i].device, r.devices[i].busy_ns};
  s.device_busy_ns = r.busy_ns;
  s.idle_other_ns = r.idle_other_ns;
  s.idle_launch_ns = r.idle_launch_ns;
  s.activity = r.counts;
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
    PhaseSample* sample = FindSample(id, p.index);
    if (sample == nullptr) continue;
    sample->device_ns = LaunchedDeviceTime(launched, ranges);
    sample->idle_ns = idle;
    sample->backlog_ns = -1;
  }
}

Aggregator::Resolution Aggregator::ResolvePending(bool final) {
  if (!resolving_) return Resolution::kOk;
  if (activity_ != nullptr) return ResolveFromActivity(final);
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
      ApplyDeviceResult(p);
    } else {
      RememberLanes(p);
    }
    ReleaseMarkers(p);
    pending_.pop_front();
  }
  return Resolution::kOk;
}

void Aggregator::DropPending() {
  for (const PendingStep& p : pending_) ReleaseMarkers(p);
  pending_.clear();
}

PhaseSample* Aggregator::FindSample(uint16_t phase_id, uint64_t step_index) {
  Ring<PhaseSample>& ring = phases_[phase_id].window;
  for (size_t k = ring.size(); k-- > 0;) {
    PhaseSample& sample = ring[k];
    if (sample.step_index == step_index) return &sample;
    if (sample.step_index < step_index) break;
  }
  return nullptr;
}

void Aggregator::ApplyDeviceResult(PendingStep& p) {
  const uint64_t first = completed_ - steps_.size();
  if (p.index < first) {  // rolled out of the window before the GPU caught up
    RememberLanes(p);
    return;
  }
  const auto boundary = [](const PendingMarker& m) { return Boundary{m.host_ns, m.device_ns, m.lane}; };
  StepTimelineInput in;
  in.begin = boundary(p.begin);
  in.end = boundary(p.end);
  in.phases.reserve(p.phases.size());
  uint16_t lanes = static_cast<uint16_t>(std::max(p.begin.lane, p.end.lane) + 1);
  for (const PendingPhase& ph : p.phases) {
    in.phases.push_back({ph.id, ph.depth, ph.id == static_cast<uint16_t>(Phase::kData),
                         boundary(ph.begin), boundary(ph.end)});
    lanes = std::max({lanes, static_cast<uint16_t>(ph.begin.lane + 1), static_cast<uint16_t>(ph.end.lane + 1)});
  }
  in.past = lane_past_;
  in.past.resize(std::max<size_t>(in.past.size(), lanes), LanePast{lane_default_, {}});
  in.lane_device.resize(in.past.size());
  for (size_t lane = 0; lane < in.lane_device.size(); ++lane) {
    in.lane_device[lane] = std::max(0, timer_->LaneDevice(static_cast<uint16_t>(lane)));
  }
  const StepTimeline t = AnalyzeStepTimeline(in);
  if (TraceStep* trace = FindTrace(p.index); trace != nullptr) {
    // p.phases begins with the step's records in the order the trace took
    // them (FinishStep's sorted scratch_).
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
  StepRecord& s = steps_[static_cast<size_t>(p.index - first)];
  if (t.devices.size() > kMaxDevicesPerStep) return;  // more devices than a step keeps
  s.num_devices = static_cast<uint8_t>(t.devices.size());
  for (size_t i = 0; i < t.devices.size(); ++i) s.devices[i] = {t.devices[i].device, t.devices[i].busy_upper_ns};
  s.device_busy_ns = t.busy_upper_ns;
  s.device_span_ns = t.device_span_ns;
  s.backlog_begin_ns = t.backlog_begin_ns;
  s.idle_other_ns = t.idle_other_ns;
  // p.phases is in (phase id, begin) order: a phase's first occurrence
  // comes first and gives its backlog; its device time is the union of its
  // occurrences' spans (a phase nested in itself is not counted twice).
  int64_t union_end = 0;
  for (size_t i = 0; i < p.phases.size(); ++i) {
    PhaseSample* sample = FindSample(p.phases[i].id, p.index);
    if (sample == nullptr) continue;
    const int64_t b = p.phases[i].begin.device_ns;
    const int64_t e = std::max(p.phases[i].end.device_ns, b);
    if (sample->device_ns < 0) {
      sample->device_ns = 0;
      sample->idle_ns = 0;
      sample->backlog_ns = t.phases[i].backlog_begin_ns;
      union_end = b;
    }
    if (b > union_end) union_end = b;  // a gap: start a new piece
    sample->device_ns += std::max<int64_t>(0, e - std::max(union_end, b));
    union_end = std::max(union_end, e);
    sample->idle_ns += t.phases[i].idle_ns;
  }
}

bool Aggregator::RollingCounters(double* step_p95_s, std::optional<double>* gpu_idle_pct) const {
  if (steps_.empty()) return false;
  std::vector<int64_t> durations;
  durations.reserve(steps_.size());
  double window = 0, idle = 0;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const StepRecord& s = steps_[i];
    durations.push_back(s.duration_ns());
    if (s.device_busy_ns >= 0) {
      const double w = static_cast<double>(s.duration_ns()) * std::max<double>(1, s.num_devices);
      window += w;
      idle += w - static_cast<double>(s.device_busy_ns);
    }
  }
  *step_p95_s = ExactQuantiles(durations).p95;
  gpu_idle_pct->reset();
  if (window > 0) *gpu_idle_pct = 100.0 * idle / window;
  return true;
}

TraceStep* Aggregator::FindTrace(uint64_t index) {
  for (size_t i = trace_.size(); i-- > 0;) {
    if (trace_[i].index == index) return &trace_[i];
    if (trace_[i].index < index) break;
  }
  return nullptr;
}

void Aggregator::TraceSnapshot(std::vector<TraceStep>* out, int64_t* launch_threshold_ns) const {
  out->clear();
  out->reserve(trace_.size());
  for (size_t i = 0; i < trace_.size(); ++i) out->push_back(trace_[i]);
  *launch_threshold_ns = launch_threshold_ns_;
}

void Aggregator::FillSeries(const PhaseTable& table, std::vector<StepPoint>* out) const {
  out->clear();
  out->reserve(steps_.size());
  const uint64_t first = completed_ - steps_.size();
  for (size_t i = 0; i < steps_.size(); ++i) {
    const StepRecord& s = steps_[i];
    StepPoint p;
    p.index = s.index;
    p.begin = static_cast<double>(s.begin_ns) * kNsToSeconds;
    p.duration = static_cast<double>(s.duration_ns()) * kNsToSeconds;
    p.phases[std::string(kOtherPhaseName)] = static_cast<double>(s.duration_ns() - s.top_level_ns) * kNsToSeconds;
    if (s.device_busy_ns >= 0 && s.duration_ns() > 0) {
      const double window = static_cast<double>(s.duration_ns()) * std::max<double>(1, s.num_devices);
      p.gpu_idle_pct = 100.0 * (window - static_cast<double>(s.device_busy_ns)) / window;
      // Idle seconds per cause, per device on average (as gpu_idle_pct).
      const double per_device = 1.0 / std::max<double>(1, s.num_devices);
      if (s.idle_other_ns > 0) {
        p.idle_by_cause[std::string(kOtherPhaseName)] = static_cast<double>(s.idle_other_ns) * kNsToSeconds * per_device;
      }
      if (s.idle_launch_ns > 0) {
        p.idle_by_cause[std::string(kLaunchCauseName)] = static_cast<double>(s.idle_launch_ns) * kNsToSeconds * per_device;
      }
    }
    const auto opt = [](float v) { return std::isnan(v) ? std::nullopt : std::optional<double>(v); };
    p.gpu_utilization_pct = opt(s.telemetry.gpu_utilization_pct);
    p.sm_clock_ratio = opt(s.telemetry.sm_clock_ratio);
    p.host_cpu_pct = opt(s.telemetry.host_cpu_pct);
    p.host_iowait_pct = opt(s.telemetry.host_iowait_pct);
    p.worker_cores = opt(s.telemetry.children_cores);
    out->push_back(std::move(p));
  }
  // Each phase's per-step samples, by step index.
  for (size_t id = 0; id < phases_.size() && id < static_cast<size_t>(table.size()); ++id) {
    const PhaseHistory& h = phases_[id];
    const std::string name(table.Name(static_cast<uint16_t>(id)));
    for (size_t k = 0; k < h.window.size(); ++k) {
      const PhaseSample& ps = h.window[k];
      if (ps.step_index < first || ps.step_index - first >= out->size()) continue;
      StepPoint& p = (*out)[static_cast<size_t>(ps.step_index - first)];
      if (ps.top_ns > 0) p.phases[name] = static_cast<double>(ps.top_ns) * kNsToSeconds;
      if (ps.idle_ns > 0 && p.gpu_idle_pct.has_value()) {
        const StepRecord& s = steps_[static_cast<size_t>(ps.step_index - first)];
        p.idle_by_cause[name] = static_cast<double>(ps.idle_ns) * kNsToSeconds / std::max<double>(1, s.num_devices);
      }
    }
  }
}

void Aggregator::Fill(const PhaseTable& table, Summary* out) const {
  out->window = static_cast<int64_t>(window_);
  out->pending_steps = std::count_if(pending_.begin(), pending_.end(), [](const PendingStep& p) {
    return p.kind == PendingStep::Kind::kAnalyze;
  });
  out->steps = static_cast<int64_t>(steps_.size());
  out->total_steps = static_cast<int64_t>(completed_);
  out->lifetime_step_time = lifetime_.Summarize();

  std::vector<int64_t> durations;
  std::vector<int64_t> other;
  durations.reserve(steps_.size());
  other.reserve(steps_.size());
  int64_t window_ns = 0;
  int64_t other_ns = 0;
  int64_t samples = 0, samples_ns = 0, tokens = 0, tokens_ns = 0;
  bool have_samples = false, have_tokens = false;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const StepRecord& s = steps_[i];
    const int64_t d = s.duration_ns();
    durations.push_back(d);
    other.push_back(d - s.top_level_ns);
    window_ns += d;
    other_ns += d - s.top_level_ns;
    if (s.samples >= 0) {
      have_samples = true;
      samples += s.samples;
      samples_ns += d;
    }
    if (s.tokens >= 0) {
      have_tokens = true;
      tokens += s.tokens;
      tokens_ns += d;
    }
  }
  out->window_time = static_cast<double>(window_ns) * kNsToSeconds;
  out->step_time = ExactQuantiles(durations);
  out->samples_per_second.reset();
  out->tokens_per_second.reset();
  if (have_samples && samples_ns > 0) {
    out->samples_per_second = static_cast<double>(samples) / (static_cast<double>(samples_ns) * kNsToSeconds);
  }
  if (have_tokens && tokens_ns > 0) {
    out->tokens_per_second = static_cast<double>(tokens) / (static_cast<double>(tokens_ns) * kNsToSeconds);
  }
  // Device side, over the window's steps whose markers all completed.
  // Time is counted once per device timed in a step.
  std::vector<int64_t> device_spans;
  int64_t gpu_steps = 0;
  int64_t gpu_window_ns = 0, gpu_idle_ns = 0, idle_other_ns = 0, idle_launch_ns = 0;
  ActivityCounts act;  // sums over the timed steps (cupti)
  std::vector<int64_t> kernel_medians;
  struct PerDevice {
    int64_t steps = 0, window_ns = 0, busy_ns = 0;
  };
  double kernel_ns_sum = 0, gemm_ns_sum = 0, gemm_fp32_ns_sum = 0, collective_ns_sum = 0, collective_exposed_ns_sum = 0;
  std::map<int, PerDevice> per_device;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const StepRecord& s = steps_[i];
    if (s.device_busy_ns < 0) continue;
    ++gpu_steps;
    if (s.device_span_ns >= 0) device_spans.push_back(s.device_span_ns);
    idle_launch_ns += std::max<int64_t>(0, s.idle_launch_ns);
    if (activity_ != nullptr) {
      const ActivityCounts& c = s.activity;
      act.kernels += c.kernels;
      if (c.kernels > 0) kernel_medians.push_back(c.kernel_median_ns);
      act.h2d_bytes += c.h2d_bytes;
      act.d2h_bytes += c.d2h_bytes;
      act.copies += c.copies;
      act.pageable_copies += c.pageable_copies;
      act.syncs += c.syncs;
      act.sync_ns += c.sync_ns;
      act.host_wait_gaps += c.host_wait_gaps;
      act.host_wait_ns += c.host_wait_ns;
      act.pageable_h2d_copies += c.pageable_h2d_copies;
      // Kernel times per device (a step on two GPUs is not twice as long).
      const double share = 1.0 / std::max<double>(1, s.num_devices);  // ns per device
      kernel_ns_sum += static_cast<double>(c.kernel_ns) * share;
      gemm_ns_sum += static_cast<double>(c.gemm_ns) * share;
      gemm_fp32_ns_sum += static_cast<double>(c.gemm_fp32_ns) * share;
      collective_ns_sum += static_cast<double>(c.collective_ns) * share;
      // Exposed time is clipped to the step, total counts kernels beginning
      // in it: a collective begun in the previous step must not make the
      // exposed part exceed the total.
      collective_exposed_ns_sum += static_cast<double>(std::min(c.collective_exposed_ns, c.collective_ns)) * share;
    }
    const int64_t device_window = s.duration_ns() * std::max<int64_t>(1, s.num_devices);
    gpu_window_ns += device_window;
    gpu_idle_ns += device_window - s.device_busy_ns;
    idle_other_ns += std::max<int64_t>(0, s.idle_other_ns);
    for (size_t d = 0; d < s.num_devices; ++d) {
      PerDevice& pd = per_device[s.devices[d].device];
      ++pd.steps;
      pd.window_ns += s.duration_ns();
      pd.busy_ns += s.devices[d].busy_ns;
    }
  }
  out->devices.clear();
  for (const auto& [device, pd] : per_device) {
    DeviceStats ds;
    ds.device = device;
    ds.gpu_steps = pd.steps;
    if (pd.window_ns > 0) {
      ds.gpu_idle_pct = 100.0 * static_cast<double>(pd.window_ns - pd.busy_ns) / static_cast<double>(pd.window_ns);
    }
    out->devices.push_back(ds);
  }
  FillTelemetry(out);
  out->gpu_steps = gpu_steps;
  out->activity.reset();
  if (activity_ != nullptr && gpu_steps > 0) {
    const double n = static_cast<double>(gpu_steps);
    ActivityStats a;
    a.kernels_per_step = static_cast<double>(act.kernels) / n;
    a.kernel_time_p50 = ExactQuantiles(kernel_medians).p50;  // seconds
    a.h2d_bytes_per_step = static_cast<double>(act.h2d_bytes) / n;
    a.d2h_bytes_per_step = static_cast<double>(act.d2h_bytes) / n;
    a.copies_per_step = static_cast<double>(act.copies) / n;
    a.pageable_copies_per_step = static_cast<double>(act.pageable_copies) / n;
    a.syncs_per_step = static_cast<double>(act.syncs) / n;
    a.sync_time_per_step = static_cast<double>(act.sync_ns) * kNsToSeconds / n;
    a.host_wait_gaps_per_step = static_cast<double>(act.host_wait_gaps) / n;
    a.host_wait_time_per_step = static_cast<double>(act.host_wait_ns) * kNsToSeconds / n;
    a.pageable_h2d_copies_per_step = static_cast<double>(act.pageable_h2d_copies) / n;
    a.kernel_time_per_step = kernel_ns_sum * kNsToSeconds / n;
    a.gemm_time_per_step = gemm_ns_sum * kNsToSeconds / n;
    a.fp32_gemm_time_per_step = gemm_fp32_ns_sum * kNsToSeconds / n;
    a.collective_time_per_step = collective_ns_sum * kNsToSeconds / n;
    a.exposed_collective_time_per_step = collective_exposed_ns_sum * kNsToSeconds / n;
    a.dropped_records = static_cast<int64_t>(activity_->dropped());
    out->activity = a;
  }
  out->device_step_time = ExactQuantiles(device_spans);
  out->gpu_idle_pct.reset();
  out->idle_by_cause.clear();
  const auto pct_of_gpu_window = [&](int64_t ns) {
    return 100.0 * static_cast<double>(ns) / static_cast<double>(gpu_window_ns);
  };
  if (gpu_window_ns > 0) {
    out->gpu_idle_pct = pct_of_gpu_window(gpu_idle_ns);
    if (idle_other_ns > 0) out->idle_by_cause[std::string(kOtherPhaseName)] = pct_of_gpu_window(idle_other_ns);
    if (idle_launch_ns > 0) out->idle_by_cause[std::string(kLaunchCauseName)] = pct_of_gpu_window(idle_launch_ns);
  }

  const auto share_of = [&](int64_t ns) {
    return window_ns > 0 ? static_cast<double>(ns) / static_cast<double>(window_ns) : 0.0;
  };

  const uint64_t first_index = completed_ - steps_.size();
  out->phases.clear();
  std::vector<int64_t> per_step, per_step_device, backlogs;
  const int known = table.size();
  for (size_t id = 0; id < phases_.size() && id < static_cast<size_t>(known); ++id) {
    const PhaseHistory& h = phases_[id];
    per_step.clear();
    per_step_device.clear();
    backlogs.clear();
    PhaseStats ps;
    int64_t total_ns = 0, top_ns = 0, idle_ns = 0;
    for (size_t k = h.window.size(); k-- > 0;) {
      const PhaseSample& sample = h.window[k];
      if (sample.step_index < first_index) break;  // older than the window
      per_step.push_back(sample.total_ns);
      total_ns += sample.total_ns;
      top_ns += sample.top_ns;
      ps.count += sample.count;
      if (sample.top_count > 0) ps.top_level = true;
      if (sample.device_ns >= 0) {
        per_step_device.push_back(sample.device_ns);
        if (sample.backlog_ns >= 0) backlogs.push_back(sample.backlog_ns);
        idle_ns += sample.idle_ns;
      }
    }
    ps.device = ExactQuantiles(per_step_device);
    ps.backlog_p50 = ExactQuantiles(backlogs).p50;
    if (per_step.empty() && h.outside_count == 0) continue;
    ps.name = std::string(table.Name(static_cast<uint16_t>(id)));
    ps.builtin = id < static_cast<size_t>(kNumBuiltinPhases);
    ps.steps = static_cast<int64_t>(per_step.size());
    ps.total = static_cast<double>(total_ns) * kNsToSeconds;
    ps.inclusive_share = share_of(total_ns);
    ps.share = share_of(top_ns);
    ps.time = ExactQuantiles(per_step);
    ps.outside_steps_count = h.outside_count;
    ps.outside_steps_total = static_cast<double>(h.outside_total_ns) * kNsToSeconds;
    if (gpu_window_ns > 0 && idle_ns > 0) out->idle_by_cause[ps.name] = pct_of_gpu_window(idle_ns);
    out->phases.push_back(std::move(ps));
  }
  if (!steps_.empty()) {
    PhaseStats ps;
    ps.name = std::string(kOtherPhaseName);
    ps.builtin = true;
    ps.top_level = true;
    ps.steps = static_cast<int64_t>(steps_.size());
    ps.count = ps.steps;
    ps.total = static_cast<double>(other_ns) * kNsToSeconds;
    ps.inclusive_share = share_of(other_ns);
    ps.share = ps.inclusive_share;
    ps.time = ExactQuantiles(other);
    out->phases.push_back(std::move(ps));
  }
  std::sort(out->phases.begin(), out->phases.end(), [](const PhaseStats& a, const PhaseStats& b) {
    return std::tie(b.share, b.inclusive_share, a.name) < std::tie(a.share, a.inclusive_share, b.name);
  });
}

}  // namespace gpuscope::internal
