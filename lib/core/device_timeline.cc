#include "core/device_timeline.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/intervals.h"

namespace gpuscope::internal {
namespace {

// Whether marker `b`, following `a` on its lane, shows work enqueued between
// them: it completed later than both the work before it and its own record.
bool ShowsWork(const Boundary& a, const Boundary& b) {
  return b.device_ns > std::max(a.device_ns, b.host_ns) + kMarkerSlackNs;
}

}  // namespace

// Long: one algorithm over the step's markers (by lane, where each device
// may have been busy, idle charged to phases); the tests on a lane's pair
// of markers are lambdas over the step's phases used only here, and the
// stages hand on the lane map and the busy bounds.
StepTimeline AnalyzeStepTimeline(const StepTimelineInput& in) {
  StepTimeline out;
  out.phases.resize(in.phases.size());
  const int64_t w_begin = in.begin.host_ns;
  const int64_t w_end = std::max(in.end.host_ns, w_begin);
  out.window_ns = w_end - w_begin;
  out.device_span_ns = std::max<int64_t>(0, in.end.device_ns - in.begin.device_ns);
  out.backlog_begin_ns = std::max<int64_t>(0, in.begin.device_ns - in.begin.host_ns);

  // Every marker of the step, by lane, each lane in record order (host time,
  // then device time: both grow along an in-order stream).
  std::map<uint16_t, std::vector<Boundary>> lanes;
  lanes[in.begin.lane].push_back(in.begin);
  lanes[in.end.lane].push_back(in.end);
  for (size_t i = 0; i < in.phases.size(); ++i) {
    const PhaseSpan& p = in.phases[i];
    lanes[p.begin.lane].push_back(p.begin);
    lanes[p.end.lane].push_back(p.end);
    out.phases[i].device_span_ns = std::max<int64_t>(0, p.end.device_ns - p.begin.device_ns);
    out.phases[i].backlog_begin_ns = std::max<int64_t>(0, p.begin.device_ns - p.begin.host_ns);
  }

  // The innermost phase open at host time t, or null. A phase nested in data
  // (a blocking .cuda() timed as h2d, say) may well wait for the GPU, so
  // time in it is not data time.
  const auto innermost_at = [&](int64_t t) {
    const PhaseSpan* innermost = nullptr;
    for (const PhaseSpan& p : in.phases) {
      if (p.begin.host_ns <= t && t < p.end.host_ns &&
          (innermost == nullptr || p.depth > innermost->depth)) {
        innermost = &p;
      }
    }
    return innermost;
  };
  const auto same = [](const Boundary& x, const Boundary& y) {
    return x.host_ns == y.host_ns && x.device_ns == y.device_ns && x.lane == y.lane;
  };
  // Whether one data phase is innermost over the whole of a lane's pair of
  // markers (a, b), which may span other lanes' phases. Where the phase's
  // begin or end ties with a or b in host time, it must be that very marker:
  // work enqueued between them at the same instant would be outside data.
  const auto in_data_throughout = [&](const Boundary& a, const Boundary& b) {
    const PhaseSpan* d = innermost_at(a.host_ns);
    if (d == nullptr || !d->is_data || d->end.host_ns < b.host_ns) return false;
    if (d->begin.host_ns == a.host_ns && !same(d->begin, a)) return false;
    if (d->end.host_ns == b.host_ns && !same(d->end, b)) return false;
    for (const PhaseSpan& p : in.phases) {
      for (const int64_t t : {p.begin.host_ns, p.end.host_ns}) {
        if (a.host_ns < t && t < b.host_ns && innermost_at(t) != d) return false;
      }
    }
    return true;
  };
  // Whether a scope recorded on `lane` is open over all of [t0, t1]: the
  // step on its own lane, or a phase that named the lane.
  const auto scope_open = [&](uint16_t lane, int64_t t0, int64_t t1) {
    if (lane == in.begin.lane) return true;  // the step spans every pair of its markers
    for (const PhaseSpan& p : in.phases) {
      if (p.begin.lane == lane && p.begin.host_ns <= t0 && t1 <= p.end.host_ns) return true;
    }
    return false;
  };
  const auto device_of = [&](uint16_t lane) {
    return lane < in.lane_device.size() ? in.lane_device[lane] : 0;
  };

  // Where each device may have been busy.
  std::map<int, std::vector<Interval>> maybe_busy;
  for (auto& [lane, marks] : lanes) {
    std::sort(marks.begin(), marks.end(), [](const Boundary& a, const Boundary& b) {
      return a.host_ns != b.host_ns ? a.host_ns < b.host_ns : a.device_ns < b.device_ns;
    });
    std::vector<Interval>& busy = maybe_busy[device_of(lane)];
    const Boundary& first = marks.front();
    const LanePast past = lane < in.past.size() ? in.past[lane] : LanePast{};
    switch (past.state) {
      case LanePast::State::kNone:  // nothing earlier: only the first marker's own wait
        busy.push_back({first.host_ns, first.device_ns});
        break;
      case LanePast::State::kUnknown:  // earlier work may have run from the window's begin
        busy.push_back({w_begin, first.device_ns});
        break;
      case LanePast::State::kKnown:
        // Work before the previous marker ran until it completed; work between
        // it and the first marker only if the first marker shows some.
        busy.push_back({w_begin, past.last.device_ns});
        busy.push_back({first.host_ns, first.device_ns});
        if (ShowsWork(past.last, first)) {
          busy.push_back({std::max(past.last.device_ns, past.last.host_ns), first.device_ns});
        }
        break;
    }
    for (size_t i = 0; i + 1 < marks.size(); ++i) {
      const Boundary& a = marks[i];
      const Boundary& b = marks[i + 1];
      const int64_t lo = std::max(a.device_ns, a.host_ns);
      const int64_t hi = b.device_ns;
      if (hi <= lo) continue;
      if (!ShowsWork(a, b)) {
        // The stated assumptions: nothing is enqueued while the input pipeline
        // runs, nor on a named stream while no scope on it is open.
        if (b.host_ns > a.host_ns && in_data_throughout(a, b)) continue;
        if (!scope_open(lane, a.host_ns, b.host_ns)) continue;
      }
      busy.push_back({lo, hi});
    }
    out.lane_last.push_back(marks.back());
  }

  // Lanes with no marker in this step: work enqueued before their last
  // marker may still run into the window. With unknown history, a lane of a
  // device the step uses may have been busy throughout.
  for (size_t lane = 0; lane < in.past.size(); ++lane) {
    const LanePast& past = in.past[lane];
    if (lanes.count(static_cast<uint16_t>(lane)) != 0) continue;
    const int device = device_of(static_cast<uint16_t>(lane));
    if (past.state == LanePast::State::kKnown && past.last.device_ns > w_begin) {
      maybe_busy[device].push_back({w_begin, past.last.device_ns});
    }
  }
  for (size_t lane = 0; lane < in.past.size(); ++lane) {
    if (in.past[lane].state != LanePast::State::kUnknown) continue;
    if (lanes.count(static_cast<uint16_t>(lane)) != 0) continue;
    const auto it = maybe_busy.find(device_of(static_cast<uint16_t>(lane)));
    if (it != maybe_busy.end()) it->second.push_back({w_begin, w_end});
  }

  std::vector<PhaseRange> ranges;
  ranges.reserve(in.phases.size());
  for (const PhaseSpan& p : in.phases) ranges.push_back({p.begin.host_ns, p.end.host_ns, p.depth});
  std::vector<int64_t> phase_idle(in.phases.size());

  for (auto& [device, maybe] : maybe_busy) {
    DeviceIdle d;
    d.device = device;
    // Clip to the window; what is left of the window is idle.
    std::vector<Interval> idle;
    int64_t cursor = w_begin;
    for (const Interval& b : UnionOf(std::move(maybe))) {
      const int64_t lo = std::max(b.begin, w_begin);
      const int64_t hi = std::min(b.end, w_end);
      if (hi <= lo) continue;
      d.busy_upper_ns += hi - lo;
      if (lo > cursor) idle.push_back({cursor, lo});
      cursor = std::max(cursor, hi);
    }
    if (w_end > cursor) idle.push_back({cursor, w_end});
    d.idle_lower_ns = out.window_ns - d.busy_upper_ns;

    // Charge each idle piece to the innermost phase open over it.
    std::fill(phase_idle.begin(), phase_idle.end(), 0);
    ChargeToInnermost(idle, ranges, &phase_idle, &d.idle_other_ns);
    for (size_t i = 0; i < phase_idle.size(); ++i) out.phases[i].idle_ns += phase_idle[i];
    out.busy_upper_ns += d.busy_upper_ns;
    out.idle_lower_ns += d.idle_lower_ns;
    out.idle_other_ns += d.idle_other_ns;
    out.devices.push_back(d);
  }
  return out;
}

}  // namespace gpuscope::internal
