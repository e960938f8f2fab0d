// Exact quantiles and moments of a sample of durations, from scratch
// (ExactQuantiles()) or from a window kept incrementally (WindowColumn and
// SelectQuantiles()), which gives the same numbers without sorting or
// copying the whole sample on every call.

#ifndef GPUSCOPE_LIB_CORE_QUANTILES_H_
#define GPUSCOPE_LIB_CORE_QUANTILES_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpuscope/summary.h"

namespace gpuscope::internal {

inline constexpr double kNsToSeconds = 1e-9;

// Exact sums of squares of durations need 128 bits (a GCC/Clang extension).
__extension__ typedef __int128 Int128;

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

// WindowColumn
//
// The values of one measure (a phase's per-step time, say) over a sliding
// window, kept so that their exact quantiles are cheap to find: the count,
// the exact sum and sum of squares, and a histogram of how many values fall
// in each of kBuckets log-spaced buckets (128 per power of two, about 0.55 %
// wide; values below 128 have a bucket each). Add() and Remove() are O(1);
// the histogram is allocated on the first Add() (20 KB).
class WindowColumn {
 public:
  static constexpr int kExactBelow = 128;   // values below have a bucket each
  static constexpr int kSubBucketBits = 7;  // 128 buckets per power of two
  static constexpr int kMaxExponent = 44;   // values from 2^45 ns (9.8 h) share the last
  static constexpr size_t kBuckets =
      kExactBelow + (kMaxExponent - kSubBucketBits + 1) * (size_t{1} << kSubBucketBits) + 1;
  static_assert(kExactBelow == 1 << kSubBucketBits, "values below 2^bits have a bucket each");

  // The bucket of `v`: non-decreasing in `v` (every value <= 0 is in bucket 0).
  static size_t Bucket(int64_t v) {
    if (v < kExactBelow) return v <= 0 ? 0 : static_cast<size_t>(v);
    const int e = 63 - std::countl_zero(static_cast<uint64_t>(v));  // >= kSubBucketBits
    if (e > kMaxExponent) return kBuckets - 1;
    const auto sub = static_cast<size_t>(v >> (e - kSubBucketBits)) & ((1 << kSubBucketBits) - 1);
    return kExactBelow + static_cast<size_t>(e - kSubBucketBits) * (size_t{1} << kSubBucketBits) +
           sub;
  }

  void Add(int64_t v) {
    if (counts_.empty()) counts_.assign(kBuckets, 0);
    ++n_;
    sum_ += v;
    sum_sq_ += static_cast<Int128>(v) * v;
    ++counts_[Bucket(v)];
  }
  // `v` must have been added (and not removed since).
  void Remove(int64_t v) {
    --n_;
    sum_ -= v;
    sum_sq_ -= static_cast<Int128>(v) * v;
    --counts_[Bucket(v)];
  }

  int64_t count() const { return n_; }
  Int128 sum() const { return sum_; }
  Int128 sum_sq() const { return sum_sq_; }
  // Values per bucket (empty before the first Add()).
  const std::vector<uint32_t>& counts() const { return counts_; }

 private:
  int64_t n_ = 0;
  Int128 sum_ = 0;
  Int128 sum_sq_ = 0;
  std::vector<uint32_t> counts_;
};

// SelectQuantiles()
//
// What ExactQuantiles() returns for the values `column` holds, which
// `for_each(f)` visits (calls f(int64_t) once per value, in any order). The
// histogram says which bucket holds each order statistic needed; one pass
// over the values collects those buckets' values and a selection among
// them finds it. Cost: one pass over the values plus a selection among a
// few buckets' worth, instead of a copy and selections over all of them.
template <typename ForEach>
Quantiles SelectQuantiles(const WindowColumn& column, ForEach for_each);

// --- Implementation details.

namespace quantiles_internal {

// The ranks SelectQuantiles() needs (min, max, and each quantile's two
// neighbouring order statistics), ascending and unique, for `n` values.
struct Ranks {
  size_t rank[10];
  size_t size = 0;
};
Ranks NeededRanks(size_t n);

// Count, mean and stddev from exact sums; the quantile fields from the
// order statistics at `ranks` (value_at[i] is the value of rank.rank[i]).
Quantiles FromOrderStatistics(int64_t n, Int128 sum, Int128 sum_sq, const Ranks& ranks,
                              const int64_t* value_at);

}  // namespace quantiles_internal

template <typename ForEach>
Quantiles SelectQuantiles(const WindowColumn& column, ForEach for_each) {
  using quantiles_internal::Ranks;
  const int64_t n = column.count();
  if (n <= 0) return Quantiles{};
  const Ranks ranks = quantiles_internal::NeededRanks(static_cast<size_t>(n));
  // For each rank, its bucket and its rank among that bucket's values.
  const std::vector<uint32_t>& counts = column.counts();
  size_t bucket_of[10], rank_in[10];
  {
    size_t b = 0;
    uint64_t below = 0;  // values in buckets before b
    for (size_t i = 0; i < ranks.size; ++i) {
      while (below + counts[b] <= ranks.rank[i]) below += counts[b++];
      bucket_of[i] = b;
      rank_in[i] = ranks.rank[i] - below;
    }
  }
  // Slots for the distinct buckets (ranks are ascending, so are buckets).
  size_t slot_bucket[10];
  size_t slot_of[10];
  size_t slots = 0;
  for (size_t i = 0; i < ranks.size; ++i) {
    if (slots == 0 || slot_bucket[slots - 1] != bucket_of[i]) slot_bucket[slots++] = bucket_of[i];
    slot_of[i] = slots - 1;
  }
  // One pass: the values of the target buckets, found by a lookup of each
  // value's bucket (one table of a byte per bucket, in L1). Few values are
  // in a target bucket, so the branch is well predicted.
  std::vector<uint8_t> target(WindowColumn::kBuckets, 0);
  std::vector<int64_t> buffer[10];
  for (size_t s = 0; s < slots; ++s) {
    target[slot_bucket[s]] = static_cast<uint8_t>(s + 1);
    buffer[s].reserve(counts[slot_bucket[s]]);
  }
  for_each([&](int64_t v) {
    if (const uint8_t t = target[WindowColumn::Bucket(v)]; t != 0) [[unlikely]] {
      buffer[t - 1].push_back(v);
    }
  });
  // Each rank among its bucket's values, ascending: a selection, or for the
  // next rank up, the least of what lies above the previous one.
  int64_t value_at[10];
  for (size_t i = 0; i < ranks.size; ++i) {
    int64_t* c = buffer[slot_of[i]].data();
    const size_t m = buffer[slot_of[i]].size();
    const size_t r = std::min(rank_in[i], m - 1);
    const bool after_previous = i > 0 && slot_of[i - 1] == slot_of[i];
    if (after_previous && r == rank_in[i - 1] + 1) {
      std::iter_swap(c + r, std::min_element(c + r, c + m));
    } else {
      std::nth_element(after_previous ? c + rank_in[i - 1] + 1 : c, c + r, c + m);
    }
    value_at[i] = c[r];
  }
  return quantiles_internal::FromOrderStatistics(n, column.sum(), column.sum_sq(), ranks, value_at);
}

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_QUANTILES_H_
