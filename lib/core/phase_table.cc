#include "core/phase_table.h"

#include <bit>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/strings.h"

namespace gpuscope::internal {

PhaseTable::PhaseTable(int capacity, OnRegister on_register, uint16_t session_tag)
    : capacity_(capacity),
      session_tag_(session_tag),
      on_register_(std::move(on_register)),
      entries_(new Entry[static_cast<size_t>(capacity)]),
      index_mask_(std::bit_ceil(static_cast<size_t>(capacity) * 2) - 1),
      index_(new std::atomic<uint32_t>[index_mask_ + 1]) {
  for (size_t i = 0; i <= index_mask_; ++i) index_[i].store(0, std::memory_order_relaxed);
  for (int p = 0; p < kNumBuiltinPhases; ++p) {
    // Built-in names are valid and the capacity exceeds their number.
    (void)Register(PhaseName(static_cast<Phase>(p)));
  }
}

std::optional<PhaseId> PhaseTable::Find(std::string_view name) const noexcept {
  const size_t hash = std::hash<std::string_view>{}(name);
  for (size_t i = 0; i <= index_mask_; ++i) {
    const uint32_t v = index_[Slot(hash, i)].load(std::memory_order_acquire);
    if (v == 0) return std::nullopt;
    const Entry& e = entries_[v - 1];
    if (e.hash == hash && e.name == name) {
      return PhaseId::FromIndex(static_cast<uint16_t>(v - 1), session_tag_);
    }
  }
  return std::nullopt;
}

absl::StatusOr<PhaseId> PhaseTable::Register(std::string_view name) {
  if (std::optional<PhaseId> found = Find(name)) return *found;
  if (absl::Status valid = ValidatePhaseName(name); !valid.ok()) return valid;
  std::lock_guard<std::mutex> lock(mu_);
  if (std::optional<PhaseId> found = Find(name)) return *found;  // raced with another registrar
  const int id = size_.load(std::memory_order_relaxed);
  if (id >= capacity_) {
    full_.store(true, std::memory_order_relaxed);
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot register phase '", ToAbsl(name), "': the session's phase table holds ", capacity_,
        " names (Options::max_phases); raise max_phases or reuse phase names"));
  }
  Entry& e = entries_[static_cast<size_t>(id)];
  e.name.assign(name);
  e.hash = std::hash<std::string_view>{}(name);
  if (on_register_) on_register_(static_cast<uint16_t>(id), e.name);
  size_.store(id + 1, std::memory_order_release);
  for (size_t i = 0; i <= index_mask_; ++i) {
    std::atomic<uint32_t>& slot = index_[Slot(e.hash, i)];
    if (slot.load(std::memory_order_relaxed) == 0) {
      slot.store(static_cast<uint32_t>(id + 1), std::memory_order_release);
      break;
    }
  }
  if (id + 1 == capacity_) full_.store(true, std::memory_order_relaxed);
  return PhaseId::FromIndex(static_cast<uint16_t>(id), session_tag_);
}

}  // namespace gpuscope::internal
