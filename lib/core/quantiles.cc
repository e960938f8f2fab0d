#include "core/quantiles.h"

#include <algorithm>
#include <cmath>

namespace gpuscope::internal {

double QuantileOfSorted(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double h = static_cast<double>(sorted.size() - 1) * q;
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = h - static_cast<double>(lo);
  const double a = static_cast<double>(sorted[lo]);
  const double b = static_cast<double>(sorted[hi]);
  return a + frac * (b - a);
}

namespace {

// Puts into place the order statistics at the 0-based ranks in `ranks`
// (ascending), leaving everything before each at most it and everything
// after at least it. Expected O(n) per rank, no full sort.
void SelectRanks(std::vector<int64_t>& v, const size_t* ranks, size_t n_ranks) {
  auto from = v.begin();
  for (size_t i = 0; i < n_ranks; ++i) {
    const auto at = v.begin() + static_cast<std::ptrdiff_t>(ranks[i]);
    if (at < from) continue;  // already in place (a repeated rank)
    std::nth_element(from, at, v.end());
    from = at + 1;
  }
}

}  // namespace

Quantiles ExactQuantiles(std::vector<int64_t>& values_ns) {
  Quantiles out;
  if (values_ns.empty()) return out;
  const size_t n = values_ns.size();
  long double sum = 0;
  int64_t lo = values_ns.front(), hi = values_ns.front();
  for (int64_t v : values_ns) {
    sum += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const double mean = static_cast<double>(sum / n);
  long double sq = 0;
  for (int64_t v : values_ns) {
    const long double d = static_cast<long double>(v) - mean;
    sq += d * d;
  }
  out.count = static_cast<int64_t>(n);
  out.mean = mean * kNsToSeconds;
  out.stddev = std::sqrt(static_cast<double>(sq / n)) * kNsToSeconds;
  out.min = static_cast<double>(lo) * kNsToSeconds;
  out.max = static_cast<double>(hi) * kNsToSeconds;

  // Each quantile interpolates between the order statistics at floor(h) and
  // floor(h) + 1, h = (n - 1) q; select just those instead of sorting.
  constexpr double kQs[] = {0.50, 0.90, 0.95, 0.99};
  size_t ranks[8];
  for (size_t i = 0; i < 4; ++i) {
    const auto below = static_cast<size_t>(std::floor(static_cast<double>(n - 1) * kQs[i]));
    ranks[2 * i] = below;
    ranks[2 * i + 1] = std::min(below + 1, n - 1);
  }
  SelectRanks(values_ns, ranks, 8);
  double q[4];
  for (size_t i = 0; i < 4; ++i) {
    const double h = static_cast<double>(n - 1) * kQs[i];
    const double a = static_cast<double>(values_ns[ranks[2 * i]]);
    const double b = static_cast<double>(values_ns[ranks[2 * i + 1]]);
    q[i] = (a + (h - std::floor(h)) * (b - a)) * kNsToSeconds;
  }
  out.p50 = q[0];
  out.p90 = q[1];
  out.p95 = q[2];
  out.p99 = q[3];
  return out;
}

}  // namespace gpuscope::internal
