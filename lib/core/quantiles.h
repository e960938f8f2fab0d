// Exact quantiles and moments of a sample of durations.

#ifndef GPUSCOPE_LIB_CORE_QUANTILES_H_
#define GPUSCOPE_LIB_CORE_QUANTILES_H_

#include <cstdint>
#include <vector>

#include "gpuscope/summary.h"

namespace gpuscope::internal {

// QuantileOfSorted()
//
// The q-quantile (0 <= q <= 1) of ascending `sorted` by linear interpolation
// between order statistics (NumPy's default, Hyndman-Fan type 7): with
// h = (n-1)q, x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h]).
// 0 for an empty input.
double QuantileOfSorted(const std::vector<int64_t>& sorted, double q);

// ExactQuantiles()
//
// Count, mean, population stddev, min, max and p50/p90/p95/p99 (as
// QuantileOfSorted() defines them) of `values_ns`, in seconds. Reorders
// `values_ns` (selection, not a full sort: O(n) expected).
Quantiles ExactQuantiles(std::vector<int64_t>& values_ns);

inline constexpr double kNsToSeconds = 1e-9;

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_QUANTILES_H_
