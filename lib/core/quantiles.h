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
// `values_ns` (selection, not a full sort: O(n) expected). From 16,384
// values on, it counts them into a histogram first and selects only among
// the few buckets holding the order statistics (as SelectQuantiles()
// does), which avoids most of the mispredicted branches of partitioning the
// whole input (0.95 -> 0.35 ms for 65,536 values).
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

  // Whether every value in bucket `b` equals b (1 to 255 ns: the buckets
  // below 2^(kSubBucketBits + 1) are one nanosecond wide; bucket 0 also
  // holds values below 0).
  static bool ExactBucket(size_t b) { return b >= 1 && b < 2 * kExactBelow; }

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

  // Empties it (keeping the histogram's memory).
  void Clear() {
    n_ = 0;
    sum_ = sum_sq_ = 0;
    std::fill(counts_.begin(), counts_.end(), 0);
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

// TargetBuckets
//
// The buckets SelectQuantiles() needs the values of (at most 10, those
// holding the order statistics), ascending, and a table from bucket to tag:
// i + 1 for buckets[i], 0 for every other bucket.
struct TargetBuckets {
  const uint8_t* table = nullptr;  // WindowColumn::kBuckets entries
  const size_t* buckets = nullptr;
  size_t size = 0;

  // The tag of `v`'s bucket: nonzero when it is a target.
  uint8_t Tag(int64_t v) const { return table[WindowColumn::Bucket(v)]; }
};

// TargetSink
//
// Where a collector puts the values it finds in the target buckets: each
// target has room for as many values as the histogram counts in its bucket
// (any beyond are dropped: the values and the histogram disagree).
class TargetSink {
 public:
  // A value in the bucket tagged `tag`.
  void Add(int64_t v, uint8_t tag) {
    if (fill_[tag] < end_[tag]) *fill_[tag]++ = v;
  }
  // `n` values in the bucket tagged `tag`.
  void AddSpan(uint8_t tag, const uint32_t* v, size_t n) {
    int64_t* to = fill_[tag];
    n = std::min(n, static_cast<size_t>(end_[tag] - to));
    for (size_t i = 0; i < n; ++i) to[i] = v[i];
    fill_[tag] = to + n;
  }

 private:
  template <typename ForEach, typename Collect>
  friend Quantiles SelectQuantiles(const WindowColumn&, ForEach, Collect);
  int64_t* fill_[11];  // by tag (1 to 10)
  int64_t* end_[11];
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

// SelectQuantiles(column, for_each, collect)
//
// The same, for a source that can find the values in given buckets without
// visiting them all (a window that keeps, per part, the values it found
// there last time): collect(const TargetBuckets& t, TargetSink& sink) puts
// each value `column` holds whose tag is nonzero into `sink` once, in any
// order. for_each is still used when most values are in the targets.
template <typename ForEach, typename Collect>
Quantiles SelectQuantiles(const WindowColumn& column, ForEach for_each, Collect collect);

// --- Implementation details.

namespace quantiles_internal {

// The ranks SelectQuantiles() needs (min, max, and each quantile's two
// neighbouring order statistics), ascending and unique, for `n` values.
struct Ranks {
  size_t rank[10];
  size_t size = 0;
};
Ranks NeededRanks(size_t n);

// For each of `ranks`, the bucket of `counts` holding it and its rank among
// that bucket's values. Skips empty stretches a block of buckets at a time.
void LocateRanks(const std::vector<uint32_t>& counts, const Ranks& ranks, size_t* bucket_of,
                 size_t* rank_in);

// The values of `ranks` among the `size` values at `values` (reordered):
// one selection each, each among what lies after the previous one.
// value_at[i] is 0 for a rank at or beyond `size`.
void SelectRanks(int64_t* values, size_t size, const Ranks& ranks, int64_t* value_at);

// Buffers SelectQuantiles() reuses from call to call on a thread, so that a
// summary allocates nothing per phase once warm: a thread that has
// summarized keeps up to 10 bytes per window step and 25 KB besides until it
// exits. Targets() is all zeros on entry and must be left so.
class Scratch {
 public:
  uint8_t* Targets() {
    if (targets_.empty()) targets_.assign(WindowColumn::kBuckets, 0);
    return targets_.data();
  }
  int64_t* Hits(size_t n) { return Grow(&hits_, n); }
  int64_t* Grouped(size_t n) { return Grow(&grouped_, n); }
  // A histogram for ExactQuantiles(), empty on entry and to be left so.
  WindowColumn& Column() { return column_; }

 private:
  template <typename T>
  static T* Grow(std::vector<T>* v, size_t n) {
    if (v->size() < n) v->resize(n);
    return v->data();
  }
  std::vector<uint8_t> targets_;
  std::vector<int64_t> hits_;
  std::vector<int64_t> grouped_;
  WindowColumn column_;
};
Scratch& ThreadScratch();

// Count, mean and stddev from exact sums; the quantile fields from the
// order statistics at `ranks` (value_at[i] is the value of rank.rank[i]).
Quantiles FromOrderStatistics(int64_t n, Int128 sum, Int128 sum_sq, const Ranks& ranks,
                              const int64_t* value_at);

}  // namespace quantiles_internal

template <typename ForEach>
Quantiles SelectQuantiles(const WindowColumn& column, ForEach for_each) {
  // One pass, a lookup of each value's bucket in a byte-per-bucket table
  // (in L1). Few values are in a target bucket, so the branch is mostly well
  // predicted. (Measured: a branch-free version, which stores every value
  // and advances only on a hit, is slower on large windows.)
  return SelectQuantiles(column, for_each, [&](const TargetBuckets& t, TargetSink& sink) {
    for_each([&](int64_t v) {
      if (const uint8_t tag = t.Tag(v); tag != 0) [[unlikely]]
        sink.Add(v, tag);
    });
  });
}

// Long: one selection whose stages (ranks to buckets, slots, collecting the
// target buckets' values, selecting each rank) share some ten small arrays
// on the stack and the thread's scratch; split, they would all be passed
// from stage to stage.
template <typename ForEach, typename Collect>
Quantiles SelectQuantiles(const WindowColumn& column, ForEach for_each, Collect collect) {
  using quantiles_internal::Ranks;
  const int64_t n = column.count();
  if (n <= 0) return Quantiles{};
  const Ranks ranks = quantiles_internal::NeededRanks(static_cast<size_t>(n));
  // For each rank, its bucket and its rank among that bucket's values.
  size_t bucket_of[10], rank_in[10];
  quantiles_internal::LocateRanks(column.counts(), ranks, bucket_of, rank_in);
  // Slots for the distinct buckets (ranks are ascending, so are buckets),
  // but for a bucket whose values are all equal: its value is known.
  constexpr size_t kKnown = 10;
  size_t slot_bucket[10];
  size_t slot_of[10];
  size_t slots = 0;
  size_t expected = 0;  // values in the target buckets
  for (size_t i = 0; i < ranks.size; ++i) {
    if (WindowColumn::ExactBucket(bucket_of[i])) {
      slot_of[i] = kKnown;
      continue;
    }
    if (slots == 0 || slot_bucket[slots - 1] != bucket_of[i]) {
      slot_bucket[slots++] = bucket_of[i];
      expected += column.counts()[bucket_of[i]];
    }
    slot_of[i] = slots - 1;
  }
  quantiles_internal::Scratch& scratch = quantiles_internal::ThreadScratch();
  if (expected > static_cast<size_t>(n) / 4) {
    // A narrow distribution (most values in a bucket or two): filtering
    // saves little, so select among a copy of all the values instead.
    int64_t* all = scratch.Hits(static_cast<size_t>(n));
    size_t size = 0;
    for_each([&](int64_t v) {
      if (size < static_cast<size_t>(n)) all[size++] = v;
    });
    int64_t value_at[10];
    quantiles_internal::SelectRanks(all, size, ranks, value_at);
    return quantiles_internal::FromOrderStatistics(n, column.sum(), column.sum_sq(), ranks,
                                                   value_at);
  }
  // Collect the target buckets' values straight into their slot's place:
  // the histogram says how many each holds.
  size_t begin[12] = {};  // slot s (tag s, 1 to 10) from begin[s] to begin[s + 1]
  for (size_t s = 1; s <= slots; ++s) begin[s + 1] = begin[s] + column.counts()[slot_bucket[s - 1]];
  uint8_t* target = scratch.Targets();
  for (size_t s = 0; s < slots; ++s) target[slot_bucket[s]] = static_cast<uint8_t>(s + 1);
  int64_t* grouped = scratch.Grouped(expected + 1);
  TargetSink sink;
  for (size_t s = 0; s <= 10; ++s) {
    sink.fill_[s] = grouped + begin[s];
    sink.end_[s] = s >= 1 && s <= slots ? grouped + begin[s + 1] : sink.fill_[s];  // no room
  }
  if (slots > 0) collect(TargetBuckets{target, slot_bucket, slots}, sink);
  for (size_t s = 0; s < slots; ++s) target[slot_bucket[s]] = 0;
  // Each rank among its bucket's values, ascending: a selection, or for the
  // next rank up, the least of what lies above the previous one.
  int64_t value_at[10];
  for (size_t i = 0; i < ranks.size; ++i) {
    if (slot_of[i] == kKnown) {
      value_at[i] = static_cast<int64_t>(bucket_of[i]);
      continue;
    }
    const size_t s = slot_of[i] + 1;
    int64_t* c = grouped + begin[s];
    const auto m = static_cast<size_t>(sink.fill_[s] - c);
    if (m == 0) {  // the histogram and the values disagree: cannot happen
      value_at[i] = 0;
      continue;
    }
    const size_t r = std::min(rank_in[i], m - 1);
    const bool after_previous = i > 0 && slot_of[i - 1] == slot_of[i];
    if (after_previous && r == rank_in[i - 1] + 1) {
      std::iter_swap(c + r, std::min_element(c + r, c + m));
    } else {
      // (Bounded by r: should the values and the histogram ever disagree, a
      // wrong number is the worst outcome, never a read out of range.)
      std::nth_element(after_previous ? c + std::min(rank_in[i - 1] + 1, r) : c, c + r, c + m);
    }
    value_at[i] = c[r];
  }
  return quantiles_internal::FromOrderStatistics(n, column.sum(), column.sum_sq(), ranks, value_at);
}

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_QUANTILES_H_
