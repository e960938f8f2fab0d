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

Quantiles ExactQuantiles(std::vector<int64_t>& values_ns) {
  Quantiles out;
  if (values_ns.empty()) return out;
  std::sort(values_ns.begin(), values_ns.end());
  const double n = static_cast<double>(values_ns.size());
  long double sum = 0;
  for (int64_t v : values_ns) sum += v;
  const double mean = static_cast<double>(sum / values_ns.size());
  long double sq = 0;
  for (int64_t v : values_ns) {
    const long double d = static_cast<long double>(v) - mean;
    sq += d * d;
  }
  out.count = static_cast<int64_t>(values_ns.size());
  out.mean = mean * kNsToSeconds;
  out.stddev = std::sqrt(static_cast<double>(sq) / n) * kNsToSeconds;
  out.min = static_cast<double>(values_ns.front()) * kNsToSeconds;
  out.max = static_cast<double>(values_ns.back()) * kNsToSeconds;
  out.p50 = QuantileOfSorted(values_ns, 0.50) * kNsToSeconds;
  out.p90 = QuantileOfSorted(values_ns, 0.90) * kNsToSeconds;
  out.p95 = QuantileOfSorted(values_ns, 0.95) * kNsToSeconds;
  out.p99 = QuantileOfSorted(values_ns, 0.99) * kNsToSeconds;
  return out;
}

}  // namespace gpuscope::internal
