// The window: what a session keeps of its completed steps, and what every
// summary, series and trace is read from. The last `window` steps, per phase
// its per-step values, the lifetime histogram of step time, and the last
// steps' timelines for the trace.
//
// Compact and columnar: steps live in chunks of consecutive steps; in a
// chunk, each phase that occurred in it has a column of 5 bytes a step (a
// 32-bit time and a byte of counts and flags), plus 12 bytes a step once it
// has device data; a value that does not fit (4.29 s or more, say) is kept
// exactly on the side. Beside the chunks the window keeps, per measure, a
// WindowColumn (core/quantiles.h): sums and a histogram updated as steps
// enter and leave, from which a summary finds exact quantiles without
// sorting the window; a chunk whose steps have all completed keeps, per
// phase, its values in the buckets the last summary needed, so that the
// next one need not read its column again.
//
// Snapshots: Snapshot() returns a WindowView, an immutable view of the
// window that another thread may read while the window moves on. Chunks are
// shared, copy on write: the window copies a chunk before changing one a
// view still reads (the newest one or two, at most once per view).
//
// Step assembly (core/step_assembly.h) appends to it, device resolution
// (core/device_resolution.h) and the telemetry window
// (core/telemetry_window.h) fill in the fields they measure; the window
// statistics (core/window_stats.h) and the series (core/step_series.h) read
// a view. Not thread-safe: the session's aggregator lock guards the window
// (a view needs no lock).

#ifndef GPUSCOPE_LIB_CORE_STEP_WINDOW_H_
#define GPUSCOPE_LIB_CORE_STEP_WINDOW_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "backends/telemetry.h"
#include "base/ring.h"
#include "core/activity_timeline.h"
#include "core/log_histogram.h"
#include "core/quantiles.h"
#include "core/trace_steps.h"

namespace gpuscope::internal {

// One device's busy time in a step.
struct DeviceBusy {
  int device = 0;
  int64_t busy_ns = 0;  // events: an upper bound
};

// Devices a step keeps numbers for; a step on more is left without GPU
// numbers.
inline constexpr size_t kMaxDevicesPerStep = 8;

// One completed step. Device, idle and telemetry fields are filled by the
// GPU sources when a session has them; -1 / NaN mean "not measured".
struct StepRecord {
  uint64_t index = 0;  // completed-step number, 0-based
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t samples = -1;
  int64_t tokens = -1;
  int64_t top_level_ns = 0;  // sum of top-level phase host time

  int64_t device_busy_ns = -1;    // GPU busy within the step, summed over its devices
  int64_t device_span_ns = -1;    // events: first to last completion
  int64_t backlog_begin_ns = -1;  // events: device lag at the step's begin
  int64_t idle_other_ns = -1;     // idle with no phase open
  int64_t idle_launch_ns = -1;    // idle gaps shorter than the launch threshold
  uint8_t num_devices = 0;        // devices timed in the step (StepDevices)
  StepTelemetry telemetry;        // time-weighted over the step
  // Peak GPU memory allocated in the step (its fullest GPU; bytes), from the
  // memory window; NaN: no allocator sample fell in it.
  float memory_peak = std::numeric_limits<float>::quiet_NaN();

  int64_t duration_ns() const { return end_ns - begin_ns; }
};

// What only steps with GPU data have, kept apart so that a host-only window
// does not pay for it.
struct StepDevices {
  std::array<DeviceBusy, kMaxDevicesPerStep> devices{};  // StepRecord::num_devices used
  ActivityCounts activity;  // cupti: per-step counts (valid when device_busy_ns >= 0)
  // cupti: the step's largest kernels (ActivityStepResult::kernels).
  std::array<KernelTally, kKernelsPerStep> kernels{};
  uint8_t num_kernels = 0;
};

// One phase's share of one step.
struct PhaseSample {
  int64_t total_ns = 0;     // union of the phase's intervals in the step
  int64_t top_ns = 0;       // its top-level intervals' time (part of the breakdown)
  uint32_t count = 0;       // occurrences
  bool top_level = false;   // it occurred directly inside the step
  int64_t device_ns = -1;   // device time (events: span; CUPTI: busy), -1: not measured
  int64_t idle_ns = -1;     // GPU idle charged to this phase
  int64_t backlog_ns = -1;  // events: device lag at the phase's first begin
};

// One phase's window totals, kept as steps enter and leave.
struct PhaseTotals {
  WindowColumn time;            // per-step total_ns, the steps it occurred in
  int64_t top_ns = 0;           // sums over those steps
  int64_t count = 0;            // occurrences
  int64_t top_level_steps = 0;  // steps it occurred directly inside
  WindowColumn device;          // per-step device_ns, where measured
  int64_t idle_ns = 0;          // over the steps with device_ns
  // Outside any step, since the start (not the window).
  int64_t outside_count = 0;
  int64_t outside_total_ns = 0;
};

namespace step_window_internal {

// A phase's values in one chunk's steps: 32-bit fields, with sentinels.
struct PhaseColumn {
  static constexpr uint32_t kAbsent = 0xFFFFFFFF;  // not in the step / not measured (-1)
  static constexpr uint32_t kWide = 0xFFFFFFFE;    // the value is in `wide`
  // meta: bits 0-1 how top_ns relates to total_ns (0: zero, 1: equal,
  // 2: in `wide`), bit 2 top_level, bits 3-7 count (31: in `wide`).
  static constexpr uint8_t kTopZero = 0, kTopEqual = 1, kTopWide = 2;
  static constexpr uint8_t kTopLevelBit = 4;
  static constexpr uint32_t kCountInline = 31;

  explicit PhaseColumn(size_t steps) : total(steps, kAbsent), meta(steps, 0) {}

  std::vector<uint32_t> total;
  std::vector<uint8_t> meta;
  // Allocated on the chunk's first device value for the phase.
  std::vector<uint32_t> device, idle, backlog;
  // Steps (slot) with a value that does not fit: the whole sample.
  std::vector<std::pair<uint32_t, PhaseSample>> wide;

  bool Has(size_t slot) const { return total[slot] != kAbsent; }
  PhaseSample Get(size_t slot) const;
  int64_t TotalAt(size_t slot) const;  // Has(slot)
  void SetHost(size_t slot, const PhaseSample& sample);
  void SetDevice(size_t slot, int64_t device_ns, int64_t idle_ns, int64_t backlog_ns);

 private:
  PhaseSample* FindWide(size_t slot);
  const PhaseSample* FindWide(size_t slot) const;
  PhaseSample& WideSlot(size_t slot);  // found or added
};

// What a full chunk found of one phase's host times in some buckets
// (WindowColumn::Bucket()), kept for the next summary, which most often
// needs the same buckets again: it then reads these few values instead of
// the chunk's whole column.
struct CachedTimes {
  std::vector<size_t> buckets;  // ascending
  // When `kept`: the column's values in `buckets`, bucket by bucket
  // (buckets[i]'s from values[begin[i]] to values[begin[i + 1]]).
  std::vector<uint32_t> begin;
  std::vector<uint32_t> values;
  bool kept = false;  // false: too many to keep for `buckets`
};

// `steps` consecutive steps from `first_index`, with their phases' columns.
struct Chunk {
  Chunk(uint64_t first, size_t steps) : first_index(first), capacity(steps) {
    records.reserve(steps);  // filled as steps complete (no constructing unused records)
  }
  Chunk(const Chunk& other);  // a deep copy (copy on write)

  uint64_t first_index;
  size_t capacity;                                    // steps it holds when full
  std::vector<StepRecord> records;                    // by slot (index - first_index)
  std::unique_ptr<StepDevices[]> devices;             // null until a step has device data
  std::vector<std::unique_ptr<PhaseColumn>> columns;  // by phase id; null: absent here
  // Views reading this chunk: while nonzero the window copies before writing.
  mutable std::atomic<int> readers{0};
  // By phase id, once the chunk is full (host times never change after):
  // summaries on several threads may fill it at once, under cache_mu.
  mutable std::mutex cache_mu;
  mutable std::vector<CachedTimes> cached;

  const PhaseColumn* column(uint16_t id) const {
    return id < columns.size() ? columns[id].get() : nullptr;
  }
  bool full() const { return records.size() == capacity; }

  // Phase `id`'s host times in the buckets of `t` (and maybe others), from
  // `cached`, refreshed by one pass over the column when it does not cover
  // `t`: the targets and their neighbours, or only the targets when those
  // are more than an eighth of the chunk. Null when even the targets' are
  // more than a quarter (then the column is the quicker read) or past 32
  // bits. The chunk is full, has a column for `id`, and the caller holds
  // cache_mu. What it keeps is at most a byte per step of the chunk; a
  // thread that has refreshed one keeps 6 KB of buffers until it exits.
  const CachedTimes* TimesIn(uint16_t id, const TargetBuckets& t) const;
};

// A view's hold on a chunk: keeps it alive and counted as read.
class ChunkRef {
 public:
  explicit ChunkRef(std::shared_ptr<const Chunk> chunk) : chunk_(std::move(chunk)) {
    chunk_->readers.fetch_add(1, std::memory_order_relaxed);
  }
  ChunkRef(const ChunkRef& other) : ChunkRef(other.chunk_) {}
  ChunkRef& operator=(ChunkRef other) {
    std::swap(chunk_, other.chunk_);
    return *this;
  }
  ~ChunkRef() { chunk_->readers.fetch_sub(1, std::memory_order_release); }
  const Chunk& operator*() const { return *chunk_; }
  const Chunk* operator->() const { return chunk_.get(); }

 private:
  std::shared_ptr<const Chunk> chunk_;
};

}  // namespace step_window_internal

// The warm-up steps since the start or the last StepWindow::Reset().
struct WarmupTotals {
  int64_t steps = 0;
  int64_t total_ns = 0;
  int64_t max_ns = 0;
};

// WindowView
//
// An immutable snapshot of a StepWindow (StepWindow::Snapshot()): its steps,
// phase values and totals as they were. Safe to read from any thread while
// the window changes; cheap to take (the totals are copied, the chunks
// shared).
class WindowView {
 public:
  WindowView() = default;

  size_t size() const { return static_cast<size_t>(completed_ - first_index_); }
  bool empty() const { return completed_ == first_index_; }
  uint64_t first_index() const { return first_index_; }
  uint64_t completed() const { return completed_; }  // steps completed since the start
  // Steps measured since the start or the last Reset(): warm-up steps not
  // included (what the lifetime histogram holds).
  uint64_t measured() const { return completed_ - start_; }
  const WarmupTotals& warmup() const { return warmup_; }
  int64_t incomplete_steps() const { return incomplete_steps_; }
  const LogHistogram& lifetime() const { return lifetime_; }
  // By phase id (ids never seen have empty totals).
  const std::vector<PhaseTotals>& phase_totals() const { return phase_totals_; }

  // Calls f(const StepRecord&, const StepDevices* or null) for each step,
  // oldest first.
  template <typename F>
  void ForEachStep(F f) const;

  // Calls f(uint64_t step_index, const PhaseSample&) for each window step
  // phase `id` occurred in, oldest first.
  template <typename F>
  void ForEachSample(uint16_t id, F f) const;

  // Calls f(int64_t total_ns) for each window step phase `id` occurred in:
  // the fast path of ForEachSample() for its host time.
  template <typename F>
  void ForEachPhaseTime(uint16_t id, F f) const;

  // Calls f(size_t k, int64_t total_ns) for each k such that phase `id`
  // occurred in window step `indices[k]` (completed-step numbers in the
  // view, ascending): a phase's times in a few steps, in one walk of the
  // chunks and `indices`.
  template <typename F>
  void ForEachPhaseTimeAt(uint16_t id, const std::vector<uint64_t>& indices, F f) const;

  // Puts into `sink` the time of each window step phase `id` occurred in
  // whose time has a nonzero tag in `t`: the collector SelectQuantiles()
  // takes. A chunk whose steps are all in the view is read from what it
  // kept last time when that covers `t` (Chunk::TimesIn()), so a summary of
  // a live window reads the columns of the newest and oldest chunks only,
  // while its quantiles stay in the same buckets.
  void CollectPhaseTimes(uint16_t id, const TargetBuckets& t, TargetSink& sink) const;

  // The oldest and newest step (the view is not empty).
  const StepRecord& front() const;
  const StepRecord& back() const;

 private:
  friend class StepWindow;
  // Calls f(chunk, first slot, end slot) for the window's part of each chunk.
  template <typename F>
  void ForEachChunkRange(F f) const;

  uint64_t first_index_ = 0;
  uint64_t completed_ = 0;
  uint64_t start_ = 0;
  WarmupTotals warmup_;
  int64_t incomplete_steps_ = 0;
  std::vector<step_window_internal::ChunkRef> chunks_;
  std::vector<PhaseTotals> phase_totals_;
  LogHistogram lifetime_;
};

// StepWindow
//
// The completed steps a session keeps, and their totals.
class StepWindow {
 public:
  // `window` steps, `max_phases` phase ids.
  StepWindow(int window, int max_phases);

  StepWindow(const StepWindow&) = delete;
  StepWindow& operator=(const StepWindow&) = delete;

  size_t capacity() const { return capacity_; }  // Options::window
  size_t size() const { return static_cast<size_t>(completed_ - first_index()); }
  bool empty() const { return size() == 0; }
  uint64_t completed() const { return completed_; }  // steps completed since the start
  // The completed-step number of the oldest step kept: none before the last
  // Reset() or the end of the warm-up.
  uint64_t first_index() const {
    return std::max(start_, completed_ - std::min<uint64_t>(completed_, capacity_));
  }
  size_t max_phases() const { return phase_totals_.size(); }

  // Appends the completed step `step` (its index is set to completed()) with
  // its phases' host values (`phases`: phase id and sample, ids unique and
  // below max_phases(); device fields are ignored), letting the oldest step
  // go when full. Adds its time to the lifetime histogram. Returns the
  // stored record, valid until the next call that changes the window.
  // While warm-up steps remain (SetWarmup(), Reset()), the step is counted
  // in warmup() instead and kept nowhere else: its index is taken, it is
  // never in the window, and the returned record is a scratch copy.
  StepRecord& Append(const StepRecord& step,
                     const std::vector<std::pair<uint16_t, PhaseSample>>& phases);

  // The next `steps` completed steps are warm-up (see Append()).
  void SetWarmup(int steps) { warmup_left_ = std::max(steps, 0); }
  int warmup_left() const { return warmup_left_; }
  const WarmupTotals& warmup() const { return warmup_; }
  // Steps measured since the start or the last Reset(), warm-up excluded.
  uint64_t measured() const { return completed_ - start_; }

  // Measurement restarts: the window's steps, every phase total (outside
  // steps included), the lifetime histogram and the warm-up totals are
  // dropped, and the next `warmup_steps` completed steps are warm-up. Step
  // numbers go on from completed(); the trace keeps its steps (a timeline of
  // what ran, not a statistic); incomplete_steps() is a misuse count and
  // stays. Views taken before keep what they saw.
  void Reset(int warmup_steps);

  // A phase occurrence outside any step (kept since the start or the last
  // Reset()).
  void AddOutside(uint16_t id, int64_t ns);
  // A step left out because records of it were dropped.
  void CountIncomplete() { ++incomplete_steps_; }
  int64_t incomplete_steps() const { return incomplete_steps_; }

  // Step `index`, or null when it is not in the window.
  const StepRecord* Find(uint64_t index) const;
  // Step `index` to change (copied first if a view reads its chunk), or null.
  StepRecord* MutableStep(uint64_t index);
  // Step `index`'s device data (allocated on first use), or null when it is
  // not in the window.
  StepDevices* MutableDevices(uint64_t index);
  // Phase `id`'s values in step `index`, or nullopt (it did not occur there,
  // or the step left the window).
  std::optional<PhaseSample> Sample(uint16_t id, uint64_t index) const;
  // Sets phase `id`'s device numbers in step `index` (replacing any); no-op
  // when it did not occur there or the step left the window.
  void SetPhaseDevice(uint16_t id, uint64_t index, int64_t device_ns, int64_t idle_ns,
                      int64_t backlog_ns);

  // The newest `n` steps' records (n <= size()), oldest first: calls f(StepRecord*)
  // on each, copying chunks views read first.
  template <typename F>
  void ForEachNewest(size_t n, F f);

  // The kept timeline of step `index`, or nullptr.
  TraceStep* FindTrace(uint64_t index);

  // A view of the window as it is now; without the phase totals (empty
  // phase_totals()) when `with_phase_totals` is false, for a caller that
  // only reads the steps.
  WindowView Snapshot(bool with_phase_totals = true) const;

  const std::vector<PhaseTotals>& phase_totals() const { return phase_totals_; }

  LogHistogram lifetime;     // every completed step's time
  Ring<TraceStep> trace{0};  // the last steps' timelines; slots (and vectors) reused

 private:
  using Chunk = step_window_internal::Chunk;
  // The position in chunks_ of the chunk holding `index` (chunks_ not empty,
  // index not before its first step).
  size_t ChunkAt(uint64_t index) const;
  Chunk* WritableChunk(uint64_t index);  // the chunk holding `index`, unshared
  void Evict(uint64_t index);            // takes step `index`'s values out of the totals

  const size_t capacity_;
  const size_t chunk_steps_;  // a power of two
  const int chunk_shift_;     // log2(chunk_steps_)
  uint64_t completed_ = 0;
  uint64_t start_ = 0;  // the first step measured: after the last Reset() and the warm-up
  int warmup_left_ = 0;
  WarmupTotals warmup_;
  StepRecord warmup_record_;  // Append()'s answer for a warm-up step
  int64_t incomplete_steps_ = 0;
  std::deque<std::shared_ptr<Chunk>> chunks_;  // oldest first, consecutive
  std::vector<PhaseTotals> phase_totals_;      // by phase id
};

// --- Implementation details.

template <typename F>
void WindowView::ForEachChunkRange(F f) const {
  for (const step_window_internal::ChunkRef& ref : chunks_) {
    const step_window_internal::Chunk& c = *ref;
    const uint64_t lo = std::max(first_index_, c.first_index);
    const uint64_t hi = std::min<uint64_t>(completed_, c.first_index + c.records.size());
    if (lo >= hi) continue;
    f(c, static_cast<size_t>(lo - c.first_index), static_cast<size_t>(hi - c.first_index));
  }
}

template <typename F>
void WindowView::ForEachStep(F f) const {
  ForEachChunkRange([&](const step_window_internal::Chunk& c, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i)
      f(c.records[i], c.devices != nullptr ? &c.devices[i] : nullptr);
  });
}

template <typename F>
void WindowView::ForEachSample(uint16_t id, F f) const {
  ForEachChunkRange([&](const step_window_internal::Chunk& c, size_t lo, size_t hi) {
    const step_window_internal::PhaseColumn* col = c.column(id);
    if (col == nullptr) return;
    for (size_t i = lo; i < hi; ++i) {
      if (col->Has(i)) f(c.first_index + i, col->Get(i));
    }
  });
}

template <typename F>
void WindowView::ForEachPhaseTime(uint16_t id, F f) const {
  using step_window_internal::PhaseColumn;
  ForEachChunkRange([&](const step_window_internal::Chunk& c, size_t lo, size_t hi) {
    const PhaseColumn* col = c.column(id);
    if (col == nullptr) return;
    const uint32_t* total = col->total.data();
    for (size_t i = lo; i < hi; ++i) {
      const uint32_t v = total[i];
      if (v < PhaseColumn::kWide) {
        f(static_cast<int64_t>(v));
      } else if (v == PhaseColumn::kWide) {
        f(col->TotalAt(i));
      }
    }
  });
}

template <typename F>
void WindowView::ForEachPhaseTimeAt(uint16_t id, const std::vector<uint64_t>& indices, F f) const {
  size_t k = 0;
  ForEachChunkRange([&](const step_window_internal::Chunk& c, size_t lo, size_t hi) {
    const uint64_t end = c.first_index + hi;
    const step_window_internal::PhaseColumn* col = c.column(id);
    for (; k < indices.size() && indices[k] < end; ++k) {
      if (col == nullptr || indices[k] < c.first_index + lo) continue;
      const auto slot = static_cast<size_t>(indices[k] - c.first_index);
      if (col->Has(slot)) f(k, col->TotalAt(slot));
    }
  });
}

inline void WindowView::CollectPhaseTimes(uint16_t id, const TargetBuckets& t,
                                          TargetSink& sink) const {
  using step_window_internal::PhaseColumn;
  ForEachChunkRange([&](const step_window_internal::Chunk& c, size_t lo, size_t hi) {
    const PhaseColumn* col = c.column(id);
    if (col == nullptr) return;
    if (lo == 0 && hi == c.capacity && c.full()) {
      std::lock_guard<std::mutex> lock(c.cache_mu);
      if (const step_window_internal::CachedTimes* cached = c.TimesIn(id, t); cached != nullptr) {
        // Both lists of buckets ascend: walk them together (every target is
        // there; the bounds are checked all the same).
        const size_t size = cached->buckets.size();
        for (size_t i = 0, j = 0; i < t.size; ++i) {
          while (j < size && cached->buckets[j] < t.buckets[i]) ++j;
          if (j == size || cached->buckets[j] != t.buckets[i]) continue;
          sink.AddSpan(static_cast<uint8_t>(i + 1), cached->values.data() + cached->begin[j],
                       cached->begin[j + 1] - cached->begin[j]);
        }
        return;
      }
    }
    const uint32_t* total = col->total.data();
    for (size_t i = lo; i < hi; ++i) {
      const uint32_t v = total[i];
      if (v < PhaseColumn::kWide) {
        if (const uint8_t tag = t.Tag(v); tag != 0) [[unlikely]]
          sink.Add(static_cast<int64_t>(v), tag);
      } else if (v == PhaseColumn::kWide) {
        const int64_t w = col->TotalAt(i);
        if (const uint8_t tag = t.Tag(w); tag != 0) sink.Add(w, tag);
      }
    }
  });
}

template <typename F>
void StepWindow::ForEachNewest(size_t n, F f) {
  n = std::min(n, size());
  for (uint64_t index = completed_ - n; index < completed_; ++index) {
    Chunk* c = WritableChunk(index);
    f(&c->records[static_cast<size_t>(index - c->first_index)]);
  }
}

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_STEP_WINDOW_H_
