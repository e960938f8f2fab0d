// A fixed-capacity ring that keeps the newest `capacity` elements.

#ifndef GPUSCOPE_LIB_BASE_RING_H_
#define GPUSCOPE_LIB_BASE_RING_H_

#include <cstddef>
#include <vector>

namespace gpuscope::internal {

template <typename T>
class Ring {
 public:
  explicit Ring(size_t capacity = 0) { Reset(capacity); }

  // Empties the ring and sets its capacity (allocates once).
  void Reset(size_t capacity) {
    slots_.assign(capacity, T{});
    next_ = 0;
    size_ = 0;
  }

  size_t capacity() const { return slots_.size(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Appends, overwriting the oldest element when full. No allocation.
  void Push(const T& value) {
    if (slots_.empty()) return;
    Append() = value;
  }

  // Appends a slot and returns it for the caller to fill in place (it holds
  // whatever was there). Requires capacity() > 0.
  T& Append() {
    T& slot = slots_[next_];
    next_ = next_ + 1 == slots_.size() ? 0 : next_ + 1;
    if (size_ < slots_.size()) ++size_;
    return slot;
  }

  // i = 0 is the oldest element kept, size() - 1 the newest.
  const T& operator[](size_t i) const { return slots_[Index(i)]; }
  T& operator[](size_t i) { return slots_[Index(i)]; }

 private:
  size_t Index(size_t i) const {
    size_t idx = next_ + slots_.size() - size_ + i;
    if (idx >= slots_.size()) idx -= slots_.size();
    return idx;
  }

 public:
 private:
  std::vector<T> slots_;
  size_t next_ = 0;
  size_t size_ = 0;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BASE_RING_H_
