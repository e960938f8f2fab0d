// Host-clock interval helpers shared by the events and activity timelines.

#ifndef GPUSCOPE_LIB_CORE_INTERVALS_H_
#define GPUSCOPE_LIB_CORE_INTERVALS_H_

#include <cstdint>
#include <vector>

namespace gpuscope::internal {

struct Interval {
  int64_t begin;
  int64_t end;
};

// The union of `v`: sorted, overlapping and touching intervals merged, empty
// ones dropped.
std::vector<Interval> UnionOf(std::vector<Interval> v);

// The length of `a` not covered by `b` (both as UnionOf returns them).
int64_t LengthOutside(const std::vector<Interval>& a, const std::vector<Interval>& b);

// One phase occurrence as the idle charging sees it.
struct PhaseRange {
  int64_t begin;
  int64_t end;
  int depth;  // deeper wins
};

// Charges each piece of `idle` to the innermost of `phases` open over it:
// adds to (*per_phase)[i] (sized like `phases`), or to `*other` where none is.
void ChargeToInnermost(const std::vector<Interval>& idle, const std::vector<PhaseRange>& phases,
                       std::vector<int64_t>* per_phase, int64_t* other);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_INTERVALS_H_
