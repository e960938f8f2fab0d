// The lifetime histogram's stated error bound (<= 1 %) holds.

#include "core/log_histogram.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/quantiles.h"
#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

TEST(LogHistogramTest, StatedBoundIsUnderOnePercent) {
  EXPECT_LE(LogHistogram::kMaxRelativeError, 0.01);
}

TEST(LogHistogramTest, EveryValueIsWithinBoundOfItsBucketMidpoint) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> log_value(0, std::log(9.2e18));
  for (int i = 0; i < 200000; ++i) {
    const auto v = static_cast<int64_t>(std::exp(log_value(rng)));
    const int b = LogHistogram::BucketOf(v);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, LogHistogram::kNumBuckets);
    const double mid = LogHistogram::Midpoint(b);
    if (v == 0) continue;
    ASSERT_LE(std::abs(mid - static_cast<double>(v)) / static_cast<double>(v),
              LogHistogram::kMaxRelativeError)
        << "value " << v << " bucket " << b;
  }
  // Buckets are monotone in the value.
  int64_t prev_bucket = -1;
  for (int64_t v = 0; v < 100000; v += 7) {
    const int b = LogHistogram::BucketOf(v);
    ASSERT_GE(b, prev_bucket);
    prev_bucket = b;
  }
  EXPECT_EQ(LogHistogram::BucketOf(INT64_MAX), LogHistogram::kNumBuckets - 1);
  EXPECT_EQ(LogHistogram::BucketOf(-5), 0);
}

// Quantiles from the histogram against exact quantiles of the same data, on
// distributions a training run produces: tight, long-tailed, bimodal, and
// spread over ten decades.
TEST(LogHistogramTest, QuantilesAreWithinStatedRelativeError) {
  std::mt19937_64 rng(11);
  std::vector<std::vector<int64_t>> datasets(4);
  std::normal_distribution<double> tight(50e6, 0.5e6);
  std::lognormal_distribution<double> tail(std::log(10e6), 1.0);
  std::uniform_real_distribution<double> decades(0, 10 * std::log(10.0));
  for (int i = 0; i < 50000; ++i) {
    datasets[0].push_back(static_cast<int64_t>(std::max(1.0, tight(rng))));
    datasets[1].push_back(static_cast<int64_t>(tail(rng)));
    datasets[2].push_back(i % 10 == 0 ? 400'000'000 + i : 20'000'000 + (i % 1000));
    datasets[3].push_back(static_cast<int64_t>(std::exp(decades(rng))));
  }
  for (size_t d = 0; d < datasets.size(); ++d) {
    LogHistogram h;
    for (int64_t v : datasets[d]) h.Add(v);
    std::vector<int64_t> sorted = datasets[d];
    std::sort(sorted.begin(), sorted.end());
    for (double q : {0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0}) {
      const double exact = QuantileOfSorted(sorted, q);
      const double approx = h.Quantile(q);
      EXPECT_LE(std::abs(approx - exact) / exact, LogHistogram::kMaxRelativeError)
          << "dataset " << d << " q " << q << " exact " << exact << " approx " << approx;
    }
    const Quantiles s = h.Summarize();
    Quantiles exact = ExactQuantiles(sorted);
    EXPECT_EQ(s.count, exact.count);
    EXPECT_DOUBLE_EQ(s.min, exact.min);
    EXPECT_DOUBLE_EQ(s.max, exact.max);
    EXPECT_NEAR(s.mean, exact.mean, 1e-12 * exact.mean);
    EXPECT_NEAR(s.stddev, exact.stddev, 1e-9 * exact.stddev + 1e-15);
  }
}

TEST(LogHistogramTest, SmallValuesAreExact) {
  LogHistogram h;
  for (int64_t v = 0; v < 64; ++v) h.Add(v);
  for (int64_t k = 0; k < 64; ++k) EXPECT_EQ(h.ValueAtRank(k), static_cast<double>(k));
}

TEST(LogHistogramTest, EmptyHistogramSummarizesToZeros) {
  LogHistogram h;
  EXPECT_EQ(h.Summarize(), Quantiles{});
  EXPECT_EQ(h.Quantile(0.5), 0);
}

}  // namespace
}  // namespace gpuscope::internal
