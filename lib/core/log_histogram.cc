#include "core/log_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/quantiles.h"

namespace gpuscope::internal {

double LogHistogram::Midpoint(int bucket) {
  if (bucket < kSubBuckets) return bucket;
  const int exponent = (bucket - kSubBuckets) / kSubBuckets + kSubBucketBits;
  const int sub = (bucket - kSubBuckets) % kSubBuckets;
  const double width = std::ldexp(1.0, exponent - kSubBucketBits);
  const double low = std::ldexp(1.0, exponent) + sub * width;
  return low + width / 2;
}

double LogHistogram::ValueAtRank(int64_t k) const {
  if (count_ == 0) return 0;
  k = std::clamp<int64_t>(k, 0, count_ - 1);
  if (k == 0) return static_cast<double>(min_);
  if (k == count_ - 1) return static_cast<double>(max_);
  uint64_t seen = 0;
  for (int b = 0; b < kNumBuckets; ++b) {
    seen += counts_[static_cast<size_t>(b)];
    if (seen > static_cast<uint64_t>(k)) {
      return std::clamp(Midpoint(b), static_cast<double>(min_), static_cast<double>(max_));
    }
  }
  return static_cast<double>(max_);
}

double LogHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double h = static_cast<double>(count_ - 1) * q;
  const int64_t lo = static_cast<int64_t>(std::floor(h));
  const double frac = h - static_cast<double>(lo);
  const double a = ValueAtRank(lo);
  if (frac == 0) return a;
  return a + frac * (ValueAtRank(lo + 1) - a);
}

Quantiles LogHistogram::Summarize() const {
  Quantiles out;
  if (count_ == 0) return out;
  out.count = count_;
  out.mean = static_cast<double>(sum_) / static_cast<double>(count_) * kNsToSeconds;
  const double n = static_cast<double>(count_);
  const double mean_d = shifted_sum_ / n;
  out.stddev = std::sqrt(std::max(0.0, shifted_sum_sq_ / n - mean_d * mean_d)) * kNsToSeconds;
  out.min = static_cast<double>(min_) * kNsToSeconds;
  out.max = static_cast<double>(max_) * kNsToSeconds;
  out.p50 = Quantile(0.50) * kNsToSeconds;
  out.p90 = Quantile(0.90) * kNsToSeconds;
  out.p95 = Quantile(0.95) * kNsToSeconds;
  out.p99 = Quantile(0.99) * kNsToSeconds;
  return out;
}

}  // namespace gpuscope::internal
