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

namespace quantiles_internal {

namespace {
constexpr double kQs[] = {0.50, 0.90, 0.95, 0.99};
}  // namespace

Ranks NeededRanks(size_t n) {
  size_t all[10] = {0, n - 1};
  for (size_t i = 0; i < 4; ++i) {
    const auto below = static_cast<size_t>(std::floor(static_cast<double>(n - 1) * kQs[i]));
    all[2 + 2 * i] = below;
    all[3 + 2 * i] = std::min(below + 1, n - 1);
  }
  std::sort(all, all + 10);
  Ranks r;
  for (size_t rank : all) {
    if (r.size == 0 || r.rank[r.size - 1] != rank) r.rank[r.size++] = rank;
  }
  return r;
}

void LocateRanks(const std::vector<uint32_t>& counts, const Ranks& ranks, size_t* bucket_of,
                 size_t* rank_in) {
  // Blocks of 64 buckets: a block's sum (a loop the compiler vectorizes)
  // skips it whole when the next rank lies beyond it.
  constexpr size_t kBlock = 64;
  const size_t size = counts.size();
  const uint32_t* c = counts.data();
  size_t b = 0;
  uint64_t below = 0;  // values in buckets before b
  for (size_t i = 0; i < ranks.size; ++i) {
    const uint64_t rank = ranks.rank[i];
    while (b % kBlock == 0 && b + kBlock <= size) {
      uint64_t block = 0;
      for (size_t j = 0; j < kBlock; ++j) block += c[b + j];
      if (below + block > rank) break;
      below += block;
      b += kBlock;
    }
    while (b < size && below + c[b] <= rank) below += c[b++];
    bucket_of[i] = std::min(b, size - 1);
    rank_in[i] = static_cast<size_t>(rank - below);
  }
}

void SelectRanks(int64_t* values, size_t size, const Ranks& ranks, int64_t* value_at) {
  int64_t* from = values;
  int64_t* const end = values + size;
  for (size_t i = 0; i < ranks.size; ++i) {
    if (ranks.rank[i] >= size) {
      value_at[i] = 0;
      continue;
    }
    int64_t* at = values + ranks.rank[i];
    if (at == from) {
      // The minimum, or the rank just above the previous one: the least of
      // what lies above.
      std::iter_swap(at, std::min_element(at, end));
    } else {
      std::nth_element(from, at, end);
    }
    value_at[i] = *at;
    from = at + 1;
  }
}

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

Quantiles FromOrderStatistics(int64_t n, Int128 sum, Int128 sum_sq, const Ranks& ranks,
                              const int64_t* value_at) {
  Quantiles out;
  out.count = n;
  const auto nn = static_cast<long double>(n);
  out.mean = static_cast<double>(static_cast<long double>(sum) / nn) * kNsToSeconds;
  // n * sum_sq - sum^2 = n^2 variance, exact in 128 bits while it fits
  // (values below about 2^46 ns at the largest window); else long double.
  long double variance = 0;
  constexpr Int128 kExactLimit = static_cast<Int128>(1) << 108;
  if (sum_sq < kExactLimit) {
    const Int128 num = static_cast<Int128>(n) * sum_sq - sum * sum;
    variance = static_cast<long double>(num) / (nn * nn);
  } else {
    const long double mean = static_cast<long double>(sum) / nn;
    variance = static_cast<long double>(sum_sq) / nn - mean * mean;
  }
  out.stddev = std::sqrt(static_cast<double>(std::max<long double>(0, variance))) * kNsToSeconds;
  const auto at = [&](size_t rank) {
    const size_t* p = std::lower_bound(ranks.rank, ranks.rank + ranks.size, rank);
    return static_cast<double>(value_at[p - ranks.rank]);
  };
  out.min = at(0) * kNsToSeconds;
  out.max = at(static_cast<size_t>(n - 1)) * kNsToSeconds;
  double q[4];
  for (size_t i = 0; i < 4; ++i) {
    const double h = static_cast<double>(n - 1) * kQs[i];
    const auto below = static_cast<size_t>(std::floor(h));
    const double a = at(below);
    const double b = at(std::min(below + 1, static_cast<size_t>(n - 1)));
    q[i] = (a + (h - std::floor(h)) * (b - a)) * kNsToSeconds;
  }
  out.p50 = q[0];
  out.p90 = q[1];
  out.p95 = q[2];
  out.p99 = q[3];
  return out;
}

}  // namespace quantiles_internal

Quantiles ExactQuantiles(std::vector<int64_t>& values_ns) {
  if (values_ns.empty()) return Quantiles{};
  constexpr size_t kHistogramFrom = 16384;  // measured: below, selections win
  if (values_ns.size() >= kHistogramFrom) {
    WindowColumn& column = quantiles_internal::ThreadScratch().Column();
    for (const int64_t v : values_ns) column.Add(v);
    const Quantiles q = SelectQuantiles(column, [&](auto f) {
      for (const int64_t v : values_ns) f(v);
    });
    column.Clear();
    return q;
  }
  const size_t n = values_ns.size();
  Int128 sum = 0, sum_sq = 0;
  for (int64_t v : values_ns) {
    sum += v;
    sum_sq += static_cast<Int128>(v) * v;
  }
  const quantiles_internal::Ranks ranks = quantiles_internal::NeededRanks(n);
  int64_t value_at[10];
  quantiles_internal::SelectRanks(values_ns.data(), n, ranks, value_at);
  return quantiles_internal::FromOrderStatistics(static_cast<int64_t>(n), sum, sum_sq, ranks,
                                                 value_at);
}

}  // namespace gpuscope::internal
