// Window quantiles are exact: checked against a brute-force reference on
// random data, through a real Session on a ManualClock.

#include "core/quantiles.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::ClockedSession;

// Reference: NumPy's default ("linear") quantile, written independently.
double Reference(std::vector<int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto below = static_cast<size_t>(pos);
  if (below + 1 >= v.size()) return static_cast<double>(v.back());
  const double w = pos - static_cast<double>(below);
  return static_cast<double>(v[below]) * (1 - w) + static_cast<double>(v[below + 1]) * w;
}

TEST(QuantilesTest, InterpolatesLikeNumpy) {
  std::vector<int64_t> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(internal::QuantileOfSorted(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(internal::QuantileOfSorted(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(internal::QuantileOfSorted(v, 1.0), 4);
  EXPECT_DOUBLE_EQ(internal::QuantileOfSorted(v, 0.9), 3.7);  // numpy.quantile([1,2,3,4], .9)
  std::vector<int64_t> one = {7};
  EXPECT_DOUBLE_EQ(internal::QuantileOfSorted(one, 0.99), 7);
  std::vector<int64_t> none;
  EXPECT_EQ(internal::ExactQuantiles(none).count, 0);
  EXPECT_EQ(internal::ExactQuantiles(none).p99, 0);
}

TEST(QuantilesTest, MomentsArePopulationStatistics) {
  std::vector<int64_t> v = {2'000'000'000, 4'000'000'000, 4'000'000'000, 4'000'000'000,
                            5'000'000'000, 5'000'000'000, 7'000'000'000, 9'000'000'000};
  Quantiles q = internal::ExactQuantiles(v);
  EXPECT_EQ(q.count, 8);
  EXPECT_DOUBLE_EQ(q.mean, 5.0);
  EXPECT_DOUBLE_EQ(q.stddev, 2.0);  // the textbook population example
  EXPECT_DOUBLE_EQ(q.min, 2.0);
  EXPECT_DOUBLE_EQ(q.max, 9.0);
}

// Every window quantile equals the brute-force reference over the last
// `window` step durations, for several windows and random data.
TEST(QuantilesTest, SessionWindowQuantilesMatchBruteForceReference) {
  std::mt19937_64 rng(20261122);
  for (int window : {1, 2, 7, 100, 512}) {
    ClockedSession s(Options{.window = window});
    std::lognormal_distribution<double> dist(std::log(20e6), 0.6);  // ~20 ms steps, long tail
    std::vector<int64_t> all;
    const int n = window * 3 + 5;
    for (int i = 0; i < n; ++i) {
      const auto d = static_cast<int64_t>(dist(rng));
      StepScope step(*s);
      s.clock->Advance(d);
      all.push_back(d);
    }
    const Summary sum = s->Summarize();
    const std::vector<int64_t> last(all.end() - window, all.end());
    ASSERT_EQ(sum.steps, window);
    ASSERT_EQ(sum.total_steps, n);
    for (auto [q, got] : {std::pair{0.50, sum.step_time.p50}, std::pair{0.90, sum.step_time.p90},
                          std::pair{0.95, sum.step_time.p95}, std::pair{0.99, sum.step_time.p99}}) {
      EXPECT_NEAR(got * 1e9, Reference(last, q), 1e-3) << "window " << window << " q " << q;
    }
    EXPECT_NEAR(sum.step_time.max * 1e9,
                static_cast<double>(*std::max_element(last.begin(), last.end())), 1e-3);
    EXPECT_NEAR(sum.step_time.min * 1e9,
                static_cast<double>(*std::min_element(last.begin(), last.end())), 1e-3);
    double mean = 0;
    for (int64_t d : last) mean += static_cast<double>(d);
    mean /= static_cast<double>(last.size());
    double var = 0;
    for (int64_t d : last) var += (static_cast<double>(d) - mean) * (static_cast<double>(d) - mean);
    EXPECT_NEAR(sum.step_time.mean * 1e9, mean, 1e-3);
    EXPECT_NEAR(sum.step_time.stddev * 1e9, std::sqrt(var / static_cast<double>(last.size())),
                1e-2);
  }
}

// ExactQuantiles() and SelectQuantiles() take different roads by the size
// and shape of the data (selections on the whole input, a histogram that
// filters to a few buckets, a copy when most values share a bucket,
// buckets whose values are all equal); every road must give what sorting
// gives.
TEST(QuantilesTest, EveryRoadGivesWhatSortingGives) {
  std::mt19937_64 rng(20261125);
  using Gen = int64_t (*)(std::mt19937_64&);
  const std::pair<const char*, Gen> shapes[] = {
      {"wide", [](std::mt19937_64& r) { return 100'000 + static_cast<int64_t>(r() % 50'000); }},
      {"narrow",  // 10 ms +- 0.1 %: a bucket or two hold everything
       [](std::mt19937_64& r) { return 10'000'000 + static_cast<int64_t>(r() % 20'000); }},
      {"constant", [](std::mt19937_64&) { return int64_t{0}; }},
      {"tiny",  // 1 ns wide buckets
       [](std::mt19937_64& r) { return static_cast<int64_t>(r() % 300); }},
      {"signed", [](std::mt19937_64& r) { return static_cast<int64_t>(r() % 2000) - 1000; }},
      {"heavy tail",
       [](std::mt19937_64& r) {
         return r() % 100 == 0 ? static_cast<int64_t>(r() % (int64_t{1} << 47))
                               : static_cast<int64_t>(r() % 5'000'000);
       }},
  };
  for (const auto& [name, gen] : shapes) {
    for (size_t n : {size_t{1}, size_t{2}, size_t{5}, size_t{255}, size_t{256}, size_t{4096},
                     size_t{16383}, size_t{16384}, size_t{70'000}}) {
      std::vector<int64_t> v(n);
      for (int64_t& x : v) x = gen(rng);
      std::vector<int64_t> sorted = v;
      std::sort(sorted.begin(), sorted.end());
      std::vector<int64_t> scratch = v;
      const Quantiles q = internal::ExactQuantiles(scratch);
      internal::WindowColumn column;
      for (int64_t x : v) column.Add(x);
      const Quantiles w = internal::SelectQuantiles(column, [&](auto f) {
        for (int64_t x : v) f(x);
      });
      for (const Quantiles& got : {q, w}) {
        ASSERT_EQ(got.count, static_cast<int64_t>(n)) << name << " n=" << n;
        EXPECT_EQ(got.min, static_cast<double>(sorted.front()) * 1e-9) << name << " n=" << n;
        EXPECT_EQ(got.max, static_cast<double>(sorted.back()) * 1e-9) << name << " n=" << n;
        EXPECT_DOUBLE_EQ(got.p50, internal::QuantileOfSorted(sorted, 0.50) * 1e-9)
            << name << " n=" << n;
        EXPECT_DOUBLE_EQ(got.p90, internal::QuantileOfSorted(sorted, 0.90) * 1e-9)
            << name << " n=" << n;
        EXPECT_DOUBLE_EQ(got.p95, internal::QuantileOfSorted(sorted, 0.95) * 1e-9)
            << name << " n=" << n;
        EXPECT_DOUBLE_EQ(got.p99, internal::QuantileOfSorted(sorted, 0.99) * 1e-9)
            << name << " n=" << n;
      }
      EXPECT_EQ(q, w) << name << " n=" << n;
    }
  }
}

// The ring keeps exactly the newest `window` steps as it rolls over.
TEST(QuantilesTest, RingRollsOverToNewestSteps) {
  ClockedSession s(Options{.window = 7});
  for (int i = 1; i <= 20; ++i) {
    StepScope step(*s);
    s.clock->Advance(i * testing::kMs);
  }
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.steps, 7);
  EXPECT_EQ(sum.total_steps, 20);
  EXPECT_DOUBLE_EQ(sum.step_time.min, 0.014);
  EXPECT_DOUBLE_EQ(sum.step_time.max, 0.020);
  EXPECT_DOUBLE_EQ(sum.step_time.p50, 0.017);
  EXPECT_NEAR(sum.window_time, 0.014 + 0.015 + 0.016 + 0.017 + 0.018 + 0.019 + 0.020, 1e-12);
  // The lifetime view still sees all 20.
  EXPECT_EQ(sum.lifetime_step_time.count, 20);
  EXPECT_DOUBLE_EQ(sum.lifetime_step_time.min, 0.001);
  EXPECT_DOUBLE_EQ(sum.lifetime_step_time.max, 0.020);
  EXPECT_DOUBLE_EQ(sum.lifetime_step_time.mean, 0.0105);
}

TEST(QuantilesTest, RingRollsOverOneStepAtATime) {
  ClockedSession s(Options{.window = 3});
  for (int i = 1; i <= 6; ++i) {
    {
      StepScope step(*s);
      s.clock->Advance(i * testing::kMs);
    }
    const Summary sum = s->Summarize();
    ASSERT_EQ(sum.steps, std::min(i, 3));
    EXPECT_DOUBLE_EQ(sum.step_time.max, i * 1e-3);
    EXPECT_DOUBLE_EQ(sum.step_time.min, std::max(1, i - 2) * 1e-3);
  }
}

}  // namespace
}  // namespace gpuscope
