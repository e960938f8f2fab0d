#include "core/device_timeline.h"

#include <algorithm>
#include <utility>

namespace gpuscope::internal {
namespace {

struct Interval {
  int64_t begin;
  int64_t end;
};

// Sorts and merges `v` in place; returns the merged intervals.
std::vector<Interval> Union(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.end <= i.begin) continue;
    if (!out.empty() && i.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

}  // namespace

StepTimeline AnalyzeStepTimeline(const StepTimelineInput& in) {
  StepTimeline out;
  out.phases.resize(in.phases.size());
  const int64_t w_begin = in.begin.host_ns;
  const int64_t w_end = std::max(in.end.host_ns, w_begin);
  out.window_ns = w_end - w_begin;
  out.device_span_ns = std::max<int64_t>(0, in.end.device_ns - in.begin.device_ns);
  out.backlog_begin_ns = std::max<int64_t>(0, in.begin.device_ns - in.begin.host_ns);

  // Every marker of the step in record order (host time, then device time:
  // both grow along an in-order stream).
  std::vector<Boundary> marks;
  marks.reserve(2 + 2 * in.phases.size());
  marks.push_back(in.begin);
  marks.push_back(in.end);
  for (size_t i = 0; i < in.phases.size(); ++i) {
    const PhaseSpan& p = in.phases[i];
    marks.push_back(p.begin);
    marks.push_back(p.end);
    out.phases[i].device_span_ns = std::max<int64_t>(0, p.end.device_ns - p.begin.device_ns);
    out.phases[i].backlog_begin_ns = std::max<int64_t>(0, p.begin.device_ns - p.begin.host_ns);
  }
  std::sort(marks.begin(), marks.end(), [](const Boundary& a, const Boundary& b) {
    return a.host_ns != b.host_ns ? a.host_ns < b.host_ns : a.device_ns < b.device_ns;
  });

  // Whether `data` is the innermost phase open at host time t: a phase
  // nested in data (a blocking .cuda() timed as h2d, say) may well wait for
  // the GPU, so it does not count.
  const auto in_data = [&](int64_t t) {
    const PhaseSpan* innermost = nullptr;
    for (const PhaseSpan& p : in.phases) {
      if (p.begin.host_ns <= t && t < p.end.host_ns && (innermost == nullptr || p.depth > innermost->depth)) {
        innermost = &p;
      }
    }
    return innermost != nullptr && innermost->is_data;
  };

  // Where the GPU may have been busy.
  std::vector<Interval> maybe_busy;
  maybe_busy.push_back({in.begin.host_ns, in.begin.device_ns});  // earlier work still running
  for (size_t i = 0; i + 1 < marks.size(); ++i) {
    const Boundary& a = marks[i];
    const Boundary& b = marks[i + 1];
    const int64_t lo = std::max(a.device_ns, a.host_ns);
    const int64_t hi = b.device_ns;
    if (hi <= lo) continue;
    const bool work_shown = b.device_ns > std::max(a.device_ns, b.host_ns) + kMarkerSlackNs;
    if (b.host_ns > a.host_ns && in_data(a.host_ns + (b.host_ns - a.host_ns) / 2) && !work_shown) {
      continue;  // the input pipeline enqueues no GPU work (the stated assumption)
    }
    maybe_busy.push_back({lo, hi});
  }
  std::vector<Interval> busy = Union(std::move(maybe_busy));

  // Clip to the window; what is left of the window is idle.
  std::vector<Interval> idle;
  int64_t cursor = w_begin;
  for (const Interval& b : busy) {
    const int64_t lo = std::max(b.begin, w_begin);
    const int64_t hi = std::min(b.end, w_end);
    if (hi <= lo) continue;
    out.busy_upper_ns += hi - lo;
    if (lo > cursor) idle.push_back({cursor, lo});
    cursor = std::max(cursor, hi);
  }
  if (w_end > cursor) idle.push_back({cursor, w_end});
  out.idle_lower_ns = out.window_ns - out.busy_upper_ns;

  // Charge each idle piece to the innermost phase open over it.
  std::vector<int64_t> cuts;
  for (const PhaseSpan& p : in.phases) {
    cuts.push_back(p.begin.host_ns);
    cuts.push_back(p.end.host_ns);
  }
  std::sort(cuts.begin(), cuts.end());
  for (const Interval& gap : idle) {
    int64_t x = gap.begin;
    while (x < gap.end) {
      const auto next_cut = std::upper_bound(cuts.begin(), cuts.end(), x);
      const int64_t y = next_cut == cuts.end() ? gap.end : std::min(gap.end, *next_cut);
      int innermost = -1;
      for (size_t i = 0; i < in.phases.size(); ++i) {
        const PhaseSpan& p = in.phases[i];
        if (p.begin.host_ns <= x && x < p.end.host_ns &&
            (innermost < 0 || p.depth > in.phases[static_cast<size_t>(innermost)].depth)) {
          innermost = static_cast<int>(i);
        }
      }
      if (innermost < 0) {
        out.idle_other_ns += y - x;
      } else {
        out.phases[static_cast<size_t>(innermost)].idle_ns += y - x;
      }
      x = y;
    }
  }
  return out;
}

}  // namespace gpuscope::internal
