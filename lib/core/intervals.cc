#include "core/intervals.h"

#include <algorithm>

namespace gpuscope::internal {

std::vector<Interval> UnionOf(std::vector<Interval> v) {
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

void ChargeToInnermost(const std::vector<Interval>& idle, const std::vector<PhaseRange>& phases,
                       std::vector<int64_t>* per_phase, int64_t* other) {
  // Phase boundaries, where the innermost open phase may change.
  std::vector<int64_t> cuts;
  cuts.reserve(2 * phases.size());
  for (const PhaseRange& p : phases) {
    cuts.push_back(p.begin);
    cuts.push_back(p.end);
  }
  std::sort(cuts.begin(), cuts.end());
  for (const Interval& gap : idle) {
    int64_t x = gap.begin;
    while (x < gap.end) {
      const auto next_cut = std::upper_bound(cuts.begin(), cuts.end(), x);
      const int64_t y = next_cut == cuts.end() ? gap.end : std::min(gap.end, *next_cut);
      int innermost = -1;
      for (size_t i = 0; i < phases.size(); ++i) {
        const PhaseRange& p = phases[i];
        if (p.begin <= x && x < p.end &&
            (innermost < 0 || p.depth > phases[static_cast<size_t>(innermost)].depth)) {
          innermost = static_cast<int>(i);
        }
      }
      if (innermost < 0) {
        *other += y - x;
      } else {
        (*per_phase)[static_cast<size_t>(innermost)] += y - x;
      }
      x = y;
    }
  }
}

}  // namespace gpuscope::internal
