// Allocator samples on their way to the background worker: what
// Session::RecordMemory() and the simulated device's allocator hand in, from
// any thread, for the pump to take into the memory window
// (core/memory_window.h).

#ifndef GPUSCOPE_LIB_BACKENDS_MEMORY_INBOX_H_
#define GPUSCOPE_LIB_BACKENDS_MEMORY_INBOX_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuscope/session.h"

namespace gpuscope::internal {

// One allocator sample, at `host_ns` on the session's clock (nanoseconds,
// the clock records are converted to).
struct MemorySample {
  int64_t host_ns = 0;
  AllocatorStats stats;
};

// MemoryInbox
//
// Thread-safe: Push() from any thread, Drain() from the pump. Bounded: at
// kCapacity samples waiting, the oldest half is dropped (and counted). Each
// sample carries the allocator's counters and high-water marks, so what is
// lost is only the shape between them.
class MemoryInbox {
 public:
  static constexpr size_t kCapacity = 65536;

  explicit MemoryInbox(std::string source = {}) : source_(std::move(source)) {}

  void Push(const MemorySample& sample, std::string_view source = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    if (source_.empty() && !source.empty()) source_ = std::string(source);
    if (samples_.size() >= kCapacity) {  // the worker is far behind
      samples_.erase(samples_.begin(),
                     samples_.begin() + static_cast<std::ptrdiff_t>(kCapacity / 2));
      dropped_ += static_cast<int64_t>(kCapacity / 2);
    }
    samples_.push_back(sample);
    used_.store(true, std::memory_order_relaxed);
  }

  // Appends what came since the last call (in the order pushed).
  void Drain(std::vector<MemorySample>* out) {
    std::lock_guard<std::mutex> lock(mu_);
    out->insert(out->end(), samples_.begin(), samples_.end());
    samples_.clear();
  }

  // The allocator's name ("torch.cuda", "simulated", "application"); empty
  // before the first sample named one.
  std::string source() const {
    std::lock_guard<std::mutex> lock(mu_);
    return source_;
  }

  // Whether any sample ever came (no lock: the pump asks at every step).
  bool used() const { return used_.load(std::memory_order_relaxed); }
  int64_t dropped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_;
  }

 private:
  mutable std::mutex mu_;
  std::string source_;
  std::vector<MemorySample> samples_;
  std::atomic<bool> used_{false};
  int64_t dropped_ = 0;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_MEMORY_INBOX_H_
