// A pool of device markers (CUDA events, simulated markers): a fixed array of
// slots that the background side fills and grows, and a lock-free free list
// through which the recording thread takes slots without locking or
// allocating.
//
// Threads: Acquire() is the recording thread's; Grow(), Release() and slot
// creation belong to whoever holds the session's aggregator lock (one at a
// time), which is the free list's single producer.

#ifndef GPUSCOPE_LIB_BACKENDS_CUDA_MARKER_POOL_H_
#define GPUSCOPE_LIB_BACKENDS_CUDA_MARKER_POOL_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "backends/device_timer.h"
#include "base/spsc_queue.h"

namespace gpuscope::internal {

template <typename Slot>
class MarkerPool {
 public:
  // Room for `max_slots` slots; none is created until Grow().
  explicit MarkerPool(uint32_t max_slots)
      : max_(max_slots), slots_(new Slot[max_slots]()), free_(max_slots) {}

  MarkerPool(const MarkerPool&) = delete;
  MarkerPool& operator=(const MarkerPool&) = delete;

  // Recording thread: a free slot, or kNoEvent when none is free (the
  // background side grows the pool; this scope goes without a marker).
  uint32_t Acquire() noexcept {
    uint32_t id = kNoEvent;
    return free_.TryPop(&id) ? id : kNoEvent;
  }

  // Background: returns a slot taken with Acquire().
  void Release(uint32_t id) { free_.TryPush(id); }

  // Background: creates up to `n` more slots with `create(Slot&) -> bool`
  // (stopping at the first failure or at max_slots) and frees them. Returns
  // how many were created.
  template <typename Create>
  uint32_t Grow(uint32_t n, Create&& create) {
    uint32_t made = 0;
    uint32_t created = created_.load(std::memory_order_relaxed);
    while (made < n && created < max_) {
      if (!create(slots_[created])) break;
      free_.TryPush(created);
      ++created;
      ++made;
    }
    created_.store(created, std::memory_order_relaxed);
    return made;
  }

  // Background: visits every created slot (to destroy them).
  template <typename Fn>
  void ForEachCreated(Fn&& fn) {
    const uint32_t created = created_.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < created; ++i) fn(slots_[i]);
  }

  Slot& operator[](uint32_t id) { return slots_[id]; }
  const Slot& operator[](uint32_t id) const { return slots_[id]; }

  uint32_t created() const { return created_.load(std::memory_order_relaxed); }
  uint32_t free_approx() const { return static_cast<uint32_t>(free_.SizeApprox()); }

 private:
  const uint32_t max_;
  const std::unique_ptr<Slot[]> slots_;
  SpscQueue<uint32_t> free_;          // producer: background; consumer: recording thread
  std::atomic<uint32_t> created_{0};  // written by the background side only
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_CUDA_MARKER_POOL_H_
