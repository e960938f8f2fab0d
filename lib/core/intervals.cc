#include "core/intervals.h"

#include <algorithm>

namespace gpuscope::internal {

std::vector<Interval> UnionOf(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(),
            [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
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

namespace gpuscope::internal {

int64_t LengthOutside(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t total = 0;
  size_t j = 0;
  for (const Interval& x : a) {
    int64_t cursor = x.begin;
    while (j < b.size() && b[j].end <= cursor) ++j;
    for (size_t k = j; k < b.size() && b[k].begin < x.end; ++k) {
      if (b[k].begin > cursor) total += b[k].begin - cursor;
      cursor = std::max(cursor, b[k].end);
      if (cursor >= x.end) break;
    }
    if (cursor < x.end) total += x.end - cursor;
  }
  return total;
}

}  // namespace gpuscope::internal
