// A session's phase names: the built-in ones, then custom names in the order
// they were registered. Append-only; an id, once published, never changes.
//
// Registration takes a lock and allocates. Lookup by name (the hot path of
// `PhaseScope(session, "name")`) takes no lock: an open-addressing index of
// atomics that registration publishes with release stores.

#ifndef GPUSCOPE_LIB_CORE_PHASE_TABLE_H_
#define GPUSCOPE_LIB_CORE_PHASE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "gpuscope/phase.h"

namespace gpuscope::internal {

// Why `name` cannot be a phase name ("empty", "too long", "control
// character", "reserved"), or nullptr if it can. Never allocates: the hot
// path uses it before trying to register a name.
const char* PhaseNameProblem(std::string_view name) noexcept;

class PhaseTable {
 public:
  // Called under the registration lock before a new id is published.
  using OnRegister = std::function<void(uint16_t id, std::string_view name)>;

  // `capacity` (> kNumBuiltinPhases) names; the built-in ones are registered
  // here, through `on_register`. Custom ids carry `session_tag`.
  PhaseTable(int capacity, OnRegister on_register, uint16_t session_tag = 1);

  PhaseTable(const PhaseTable&) = delete;
  PhaseTable& operator=(const PhaseTable&) = delete;

  // The id of `name`, registering it if new. Thread-safe.
  absl::StatusOr<PhaseId> Register(std::string_view name);

  // Lock-free lookup; nullopt if `name` is not registered. Thread-safe.
  std::optional<PhaseId> Find(std::string_view name) const noexcept;

  // The tag custom ids carry (tells this table's ids from others').
  uint16_t session_tag() const noexcept { return session_tag_; }

  // Whether every slot is taken (further registrations fail).
  bool full() const noexcept { return full_.load(std::memory_order_relaxed); }

  // Number of registered names; ids below it are valid. Thread-safe.
  int size() const noexcept { return size_.load(std::memory_order_acquire); }

  // The name of a valid id (< size()). Thread-safe; the view stays valid for
  // the table's lifetime.
  std::string_view Name(uint16_t id) const { return entries_[id].name; }

 private:
  struct Entry {
    std::string name;
    size_t hash = 0;
  };

  // The index slot for `hash` at probe step `i`.
  size_t Slot(size_t hash, size_t i) const { return (hash + i) & index_mask_; }

  const int capacity_;
  const uint16_t session_tag_;
  const OnRegister on_register_;
  const std::unique_ptr<Entry[]> entries_;
  const size_t index_mask_;
  // index_[slot] = id + 1, 0 = empty. Written only under mu_.
  const std::unique_ptr<std::atomic<uint32_t>[]> index_;
  std::atomic<int> size_{0};
  std::atomic<bool> full_{false};
  // Protects registration (entries_ beyond size_, index_ writes). Leaf lock,
  // except that on_register_ runs under it.
  std::mutex mu_;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_PHASE_TABLE_H_
