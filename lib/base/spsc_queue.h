// A bounded, lock-free, single-producer/single-consumer ring.
//
// The producer is a session's recording thread; the consumer is whoever
// holds the session's aggregator lock (the background worker or a reader in
// Summarize()), so there is exactly one consumer at a time. The producer never
// waits: when the ring is full, TryPush() fails and the caller counts a drop.

#ifndef GPUSCOPE_LIB_BASE_SPSC_QUEUE_H_
#define GPUSCOPE_LIB_BASE_SPSC_QUEUE_H_

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

namespace gpuscope::internal {

template <typename T>
class SpscQueue {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  // `capacity` is rounded up to a power of two (at least 2).
  explicit SpscQueue(size_t capacity)
      : capacity_(std::bit_ceil(capacity < 2 ? size_t{2} : capacity)),
        mask_(capacity_ - 1),
        slots_(new T[capacity_]) {}

  SpscQueue(const SpscQueue&) = delete;
  SpscQueue& operator=(const SpscQueue&) = delete;

  size_t capacity() const { return capacity_; }

  // Producer only. False when full; never blocks, never allocates.
  bool TryPush(const T& value) noexcept {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - cached_tail_ >= capacity_) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head - cached_tail_ >= capacity_) return false;
    }
    slots_[head & mask_] = value;
    head_.store(head + 1, std::memory_order_release);
    // The ring is larger than the cache, so the next slot is usually cold:
    // fetch it for writing now, off the next push's critical path.
    __builtin_prefetch(&slots_[(head + 1) & mask_], /*rw=*/1, /*locality=*/3);
    return true;
  }

  // Consumer only. Calls `fn(const T&)` for every available element, oldest
  // first, and returns how many.
  template <typename Fn>
  size_t Drain(Fn&& fn) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    const uint64_t head = head_.load(std::memory_order_acquire);
    for (uint64_t i = tail; i != head; ++i) fn(slots_[i & mask_]);
    tail_.store(head, std::memory_order_release);
    return static_cast<size_t>(head - tail);
  }

  // Consumer only. Takes the oldest element into `*out`; false when empty.
  bool TryPop(T* out) noexcept {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == cached_head_) {
      cached_head_ = head_.load(std::memory_order_acquire);
      if (tail == cached_head_) return false;
    }
    *out = slots_[tail & mask_];
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  // Either side; a snapshot.
  size_t SizeApprox() const {
    return static_cast<size_t>(head_.load(std::memory_order_acquire) -
                               tail_.load(std::memory_order_acquire));
  }

 private:
  static constexpr size_t kLine = 64;

  const size_t capacity_;
  const size_t mask_;
  const std::unique_ptr<T[]> slots_;
  alignas(kLine) std::atomic<uint64_t> head_{0};  // written by the producer
  uint64_t cached_tail_ = 0;                      // producer's last view of tail_
  alignas(kLine) std::atomic<uint64_t> tail_{0};  // written by the consumer
  uint64_t cached_head_ = 0;                      // consumer's last view of head_ (TryPop)
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BASE_SPSC_QUEUE_H_
