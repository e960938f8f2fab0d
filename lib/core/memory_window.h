// The memory window: allocator samples (backends/memory_inbox.h) laid over
// the steps they fell in. Each step gets, per GPU, its peak allocation and
// the innermost phase open when it was reached, the lowest allocation
// sampled in it, and the allocation retries and out-of-memory errors the
// allocator's counters gained since the step before; a summary gets the
// window's (MemoryStats, docs/definitions.md "Memory").
//
// The peak of a step is the highest allocation sampled in it, or, where the
// allocator's own high-water mark rose since the previous sample, that mark
// (exact), charged to the phase open midway between the two samples (for an
// allocator that reports every change, the instant itself). The allocator's
// statistics are only read, never reset.
//
// Samples wait until the step they fall in has been assembled (they arrive
// from other threads, steps from the queue); a sample that comes after its
// step was assembled counts toward the next step's counters only.
//
// Not thread-safe: used under the session's aggregator lock (Snapshot()
// copies what a summary needs, flat).

#ifndef GPUSCOPE_LIB_CORE_MEMORY_WINDOW_H_
#define GPUSCOPE_LIB_CORE_MEMORY_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/memory_inbox.h"
#include "core/record.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

// One GPU in one step, bytes (doubles: exact to the byte on any GPU).
struct MemoryStepEntry {
  uint64_t index = 0;  // completed-step number
  int64_t duration_ns = 0;
  double peak_allocated = 0;
  double peak_reserved = 0;
  double min_allocated = 0;
  uint16_t peak_phase = kNoMemoryPhase;  // phase id; kNoMemoryPhase: none open
  uint8_t device = 0;
  bool exact = false;    // peak_allocated is the allocator's high-water mark
  bool sampled = false;  // a sample fell inside the step (else counters only)
  uint16_t samples = 0;  // samples inside the step
  uint32_t retries = 0;  // allocation retries gained since the step before
  uint32_t ooms = 0;

  static constexpr uint16_t kNoMemoryPhase = 0xFFFF;
};

// One phase's peak in one step, on one GPU.
struct MemoryPhasePeak {
  uint64_t index = 0;
  uint16_t phase = 0;
  uint8_t device = 0;
  double peak = 0;
};

// What a summary reads, copied out of the window under its lock.
struct MemorySnapshot {
  std::string source;
  std::vector<MemoryStepEntry> steps;        // oldest first
  std::vector<MemoryPhasePeak> phase_peaks;  // oldest first
  std::vector<AllocatorStats> last;          // each GPU's latest sample, by device
  std::optional<OomEvent> oom;
};

class MemoryWindow {
 public:
  // Keeps the entries of the last `window` steps.
  explicit MemoryWindow(int window) : capacity_(static_cast<size_t>(window < 1 ? 1 : window)) {}

  // What the samples come from (MemoryStats::source); empty: memory is not
  // reported.
  void SetSource(std::string source) { source_ = std::move(source); }
  bool active() const { return !source_.empty(); }

  // Takes one sample. Samples of one GPU in time order; a sample older than
  // the last one taken for its GPU is placed in order among those waiting.
  void Add(const MemorySample& sample);

  // Step `index` [begin_ns, end_ns) was assembled, with `phases` its phase
  // records: takes the samples before its end. Returns its peak allocation
  // over its GPUs (NaN: none sampled in it).
  float OnStep(uint64_t index, int64_t begin_ns, int64_t end_ns, std::span<const Record> phases);

  // Measurement restarted (Session::Reset()): the steps' entries go; the
  // OOM and each GPU's latest sample stay.
  void OnReset();

  void SetOom(const OomEvent& oom) { oom_ = oom; }
  void SetOomStep(int64_t step) {
    if (oom_.has_value()) oom_->step = step;
  }

  // Nullopt when memory is not reported.
  std::optional<MemorySnapshot> Snapshot() const;

 private:
  struct Gpu {
    AllocatorStats last;
    bool seen = false;
    int64_t last_ns = 0;
  };
  Gpu& GpuOf(int device);
  // Folds one sample into its GPU's state; within the step (when `entry`),
  // into the step's entry too.
  void Take(const MemorySample& s, int64_t begin_ns, std::span<const Record> phases,
            MemoryStepEntry* entry, std::vector<MemoryPhasePeak>* peaks);
  void Push(const MemoryStepEntry& entry);

  size_t capacity_;
  std::string source_;
  std::deque<MemorySample> pending_;  // not taken yet, in time order
  std::vector<Gpu> gpus_;             // by device
  std::deque<MemoryStepEntry> steps_;
  std::deque<MemoryPhasePeak> phase_peaks_;
  std::optional<OomEvent> oom_;
};

// MemoryStatsOf()
//
// The window's MemoryStats from `snapshot`: its entries of steps
// [first_index, end_index), each step's time over `median_step_s` counted
// as a retry's cost, `phase_names` by id.
MemoryStats MemoryStatsOf(const MemorySnapshot& snapshot, uint64_t first_index, uint64_t end_index,
                          double median_step_s, const std::vector<std::string>& phase_names);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_MEMORY_WINDOW_H_
