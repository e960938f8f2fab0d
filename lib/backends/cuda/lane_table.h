// LaneTable: the places device markers are recorded on, one lane per
// (context, stream) pair, numbered in the order the recording thread first
// records on them. Lanes let the background side group a step's markers by
// stream and its streams by device (DeviceTimer::LaneOf, LaneDevice).
//
// Threads: Find() belongs to the recording thread and never locks or
// allocates; the other calls may run on any thread and see every lane that
// Find() published before.

#ifndef GPUSCOPE_LIB_BACKENDS_CUDA_LANE_TABLE_H_
#define GPUSCOPE_LIB_BACKENDS_CUDA_LANE_TABLE_H_

#include <array>
#include <atomic>
#include <cstdint>

namespace gpuscope::internal {

class LaneTable {
 public:
  static constexpr uint16_t kMaxLanes = 64;
  static constexpr uint16_t kNoLane = 0xffff;

  // Recording thread: the lane of (context, stream), added when new;
  // kNoLane once kMaxLanes lanes exist (the caller records no marker).
  uint16_t Find(uint64_t context, uint64_t stream) noexcept {
    if (last_ < count_ && keys_[last_].context == context && keys_[last_].stream == stream)
      return last_;
    for (uint16_t i = 0; i < count_; ++i) {
      if (keys_[i].context == context && keys_[i].stream == stream) return last_ = i;
    }
    if (count_ == kMaxLanes) return kNoLane;
    keys_[count_] = {context, stream};
    published_[count_].context.store(context, std::memory_order_relaxed);
    published_[count_].stream.store(stream, std::memory_order_relaxed);
    size_.store(static_cast<uint16_t>(count_ + 1), std::memory_order_release);
    return last_ = count_++;
  }

  // Any thread: lanes published so far, and their keys.
  uint16_t size() const noexcept { return size_.load(std::memory_order_acquire); }
  uint64_t context(uint16_t lane) const noexcept {
    return published_[lane].context.load(std::memory_order_relaxed);
  }
  uint64_t stream(uint16_t lane) const noexcept {
    return published_[lane].stream.load(std::memory_order_relaxed);
  }

 private:
  struct Key {
    uint64_t context = 0;
    uint64_t stream = 0;
  };
  struct PublishedKey {
    std::atomic<uint64_t> context{0};
    std::atomic<uint64_t> stream{0};
  };
  // Recording thread's own copy (plain reads on the hot path).
  std::array<Key, kMaxLanes> keys_{};
  uint16_t count_ = 0;
  uint16_t last_ = 0;
  // What other threads read.
  std::array<PublishedKey, kMaxLanes> published_{};
  std::atomic<uint16_t> size_{0};
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_CUDA_LANE_TABLE_H_
