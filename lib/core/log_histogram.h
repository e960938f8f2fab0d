// A log-bucketed histogram of non-negative durations for lifetime quantiles.
//
// Buckets follow the HDR scheme: values below 64 ns have a bucket each;
// above, every power of two is split into 64 equal sub-buckets. A value is
// represented by its bucket's midpoint, so the relative error of any
// reported order statistic is at most 1/128 (0.79 %), under the 1 % the
// design promises. 3712 buckets cover every int64 value (30 KB). Adding a
// value is a few instructions (a count-leading-zeros and two shifts).

#ifndef GPUSCOPE_LIB_CORE_LOG_HISTOGRAM_H_
#define GPUSCOPE_LIB_CORE_LOG_HISTOGRAM_H_

#include <array>
#include <bit>
#include <cstdint>

#include "gpuscope/summary.h"

namespace gpuscope::internal {

class LogHistogram {
 public:
  static constexpr int kSubBucketBits = 6;
  static constexpr int kSubBuckets = 1 << kSubBucketBits;
  static constexpr int kNumBuckets = kSubBuckets + (62 - kSubBucketBits + 1) * kSubBuckets;
  // Bound on |reported - true| / true for any order statistic.
  static constexpr double kMaxRelativeError = 1.0 / (2 * kSubBuckets);

  void Add(int64_t value_ns) {
    if (value_ns < 0) value_ns = 0;
    const int64_t n = count_;  // read before the bucket store, which may alias it
    if (n == 0) {
      min_ = max_ = shift_ = value_ns;
    } else {
      min_ = value_ns < min_ ? value_ns : min_;
      max_ = value_ns > max_ ? value_ns : max_;
    }
    count_ = n + 1;
    sum_ += value_ns;
    const auto d = static_cast<double>(value_ns - shift_);
    shifted_sum_ += d;
    shifted_sum_sq_ += d * d;
    ++counts_[static_cast<size_t>(BucketOf(value_ns))];
  }

  int64_t count() const { return count_; }

  // The value at 0-based rank `k` (0 <= k < count()), within
  // kMaxRelativeError, clamped to the exact min and max.
  double ValueAtRank(int64_t k) const;

  // The q-quantile with the same interpolation as QuantileOfSorted(): the
  // interpolation of two order statistics that are each within
  // kMaxRelativeError, hence itself within it.
  double Quantile(double q) const;

  // count, exact mean, min, max and stddev (shifted sums), and p50..p99 from the
  // buckets; in seconds.
  Quantiles Summarize() const;

  static int BucketOf(int64_t value_ns) {
    const uint64_t v = value_ns < 0 ? 0 : static_cast<uint64_t>(value_ns);
    if (v < static_cast<uint64_t>(kSubBuckets)) return static_cast<int>(v);
    const int exponent = 63 - std::countl_zero(v);  // >= kSubBucketBits
    const int sub = static_cast<int>((v >> (exponent - kSubBucketBits)) & (kSubBuckets - 1));
    return kSubBuckets + (exponent - kSubBucketBits) * kSubBuckets + sub;
  }
  static double Midpoint(int bucket);

 private:
  std::array<uint64_t, kNumBuckets> counts_{};
  int64_t count_ = 0;
  int64_t min_ = 0;
  int64_t max_ = 0;
  int64_t sum_ = 0;  // exact sum for the mean (overflows after 292 years of steps)
  // Shifted sums for the variance: deviations from the first value, so that
  // the variance keeps its precision when it is tiny next to the mean.
  int64_t shift_ = 0;
  double shifted_sum_ = 0;
  double shifted_sum_sq_ = 0;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_LOG_HISTOGRAM_H_
