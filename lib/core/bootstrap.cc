#include "core/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

namespace gpuscope::internal {
namespace {

// Average ranks (0-based; ties share the mean of their positions).
std::vector<double> AverageRanks(std::span<const double> xs) {
  std::vector<size_t> order(xs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return xs[a] < xs[b]; });
  std::vector<double> ranks(xs.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && xs[order[j + 1]] == xs[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = static_cast<double>(i + j) / 2.0;
    i = j + 1;
  }
  return ranks;
}

// a == b also covers inf (a resample of 0 s steps), where b - a is NaN.
double Interpolate(double a, double b, double frac) { return a == b ? a : a + frac * (b - a); }

}  // namespace

int BootstrapBlockLength(std::span<const double> xs) {
  const size_t n = xs.size();
  if (n < 4) return 1;
  const size_t shortest =
      std::max<size_t>(1, static_cast<size_t>(std::lround(std::cbrt(static_cast<double>(n)))));
  const size_t longest = std::max<size_t>(1, n / 4);
  std::vector<double> r = AverageRanks(xs);
  const double mean = static_cast<double>(n - 1) / 2.0;
  double var = 0;
  for (double& v : r) {
    v -= mean;
    var += v * v;
  }
  if (var <= 0) return static_cast<int>(std::min(shortest, longest));  // every step the same
  const double band = 2.0 / std::sqrt(static_cast<double>(n));
  size_t lag = 1;
  for (; lag < longest; ++lag) {
    double cov = 0;
    for (size_t i = 0; i + lag < n; ++i) cov += r[i] * r[i + lag];
    if (cov / var < band) break;
  }
  return static_cast<int>(std::min(std::max(shortest, lag), longest));
}

std::vector<double> BootstrapResamples(std::span<const double> xs, int block,
                                       std::span<const uint32_t> words, double q) {
  const size_t n = xs.size();
  if (n == 0 || block < 1) return {};
  const size_t b = std::min<size_t>(static_cast<size_t>(block), n);
  const size_t k = (n + b - 1) / b;
  const size_t last = n - (k - 1) * b;
  const size_t resamples = words.size() / k;
  auto start = [&](size_t w) { return static_cast<size_t>((uint64_t{words[w]} * n) >> 32); };
  std::vector<double> out;
  out.reserve(resamples);
  if (q < 0) {
    // Block sums from prefix sums of the doubled series: one subtraction per block.
    std::vector<double> prefix(2 * n + 1, 0.0);
    for (size_t i = 0; i < 2 * n; ++i) prefix[i + 1] = prefix[i] + xs[i % n];
    for (size_t i = 0; i < resamples; ++i) {
      double sum = 0;
      for (size_t j = 0; j + 1 < k; ++j) {
        const size_t s = start(i * k + j);
        sum += prefix[s + b] - prefix[s];
      }
      const size_t s = start(i * k + k - 1);
      sum += prefix[s + last] - prefix[s];
      out.push_back(sum / static_cast<double>(n));
    }
    return out;
  }
  const double h = static_cast<double>(n - 1) * q;
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, n - 1);
  const double frac = h - static_cast<double>(lo);
  std::vector<double> doubled(xs.begin(), xs.end());  // a block wraps without a modulo
  doubled.insert(doubled.end(), xs.begin(), xs.end());
  std::vector<double> sample(n);
  for (size_t i = 0; i < resamples; ++i) {
    auto out_it = sample.begin();
    for (size_t j = 0; j < k; ++j) {
      const auto from = doubled.begin() + static_cast<ptrdiff_t>(start(i * k + j));
      out_it = std::copy(from, from + static_cast<ptrdiff_t>(j + 1 < k ? b : last), out_it);
    }
    std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(lo),
                     sample.end());
    const double a = sample[lo];
    const double c =
        hi == lo
            ? a
            : *std::min_element(sample.begin() + static_cast<std::ptrdiff_t>(lo + 1), sample.end());
    out.push_back(Interpolate(a, c, frac));
  }
  return out;
}

}  // namespace gpuscope::internal
