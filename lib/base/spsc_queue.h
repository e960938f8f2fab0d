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
    T* slot = Claim();
    if (slot == nullptr) return false;
    *slot = value;
    Commit();
    return true;
  }

  // Producer only: TryPush() in two steps, for an element written in place
  // (field by field, no copy through the stack). Claim() returns the slot
  // the next push fills, or nullptr when the ring is full; Commit() hands
  // the filled slot to the consumer, which sees nothing of it before.
  T* Claim() noexcept {
    if (head_local_ - cached_tail_ >= capacity_) [[unlikely]] {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head_local_ - cached_tail_ >= capacity_) return nullptr;
    }
    return &slots_[head_local_ & mask_];
  }
  void Commit() noexcept {
    const uint64_t head = ++head_local_;
    head_.store(head, std::memory_order_release);
    // The ring is larger than the cache, so the slots ahead are usually
    // cold: fetch them for writing now, off the pushes' critical path (a
    // store to a line not yet in the cache holds up the stores behind it).
    __builtin_prefetch(&slots_[(head + kPrefetchAhead) & mask_], /*rw=*/1, /*locality=*/3);
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
  // How far ahead of the next push Commit() prefetches: a few hundred bytes,
  // so that a line's fetch has a few pushes' time to complete.
  static constexpr uint64_t kPrefetchAhead = sizeof(T) >= 64 ? 4 : 256 / sizeof(T);

  const size_t capacity_;
  const size_t mask_;
  const std::unique_ptr<T[]> slots_;
  alignas(kLine) std::atomic<uint64_t> head_{0};  // written by the producer
  uint64_t head_local_ = 0;   // the producer's copy of head_: no atomic to re-read
  uint64_t cached_tail_ = 0;  // producer's last view of tail_
  alignas(kLine) std::atomic<uint64_t> tail_{0};  // written by the consumer
  uint64_t cached_head_ = 0;                      // consumer's last view of head_ (TryPop)
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BASE_SPSC_QUEUE_H_
