// File: gpuscope/phase.h
// -----------------------------------------------------------------------------
//
// A phase is a named interval inside a training step: `data`, `h2d`,
// `forward`, ... Nine kinds are built in (they are what the diagnosis rules
// understand); any other name is a custom phase, registered once per session
// with `Session::RegisterPhase()`.
//
// `PhaseId` is the handle a scope records. Built-in phases convert to it
// implicitly, so `PhaseScope(session, Phase::kData)` and
// `PhaseScope(session, attention_id)` look alike at the call site.
//
// Example:
//
//   absl::StatusOr<gpuscope::PhaseId> attention = session.RegisterPhase("attention");
//   if (!attention.ok()) { /* empty, too long, reserved or table full */ }
//   {
//     gpuscope::PhaseScope p(session, *attention);
//     RunAttention();
//   }

#ifndef GPUSCOPE_PHASE_H_
#define GPUSCOPE_PHASE_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpuscope {

// The built-in phase kinds (docs/definitions.md).
enum class Phase : uint8_t {
  kData = 0,  // waiting for / producing the next batch (DataLoader, storage)
  kH2D = 1,   // host-to-device copies
  kForward = 2,
  kBackward = 3,
  kOptimizer = 4,
  kComm = 5,  // collectives, all-reduce, all-gather
  kSync = 6,  // explicit synchronization, .item(), device-to-host reads
  kEval = 7,
  kCheckpoint = 8,
};

inline constexpr int kNumBuiltinPhases = 9;

// Longest accepted phase name, in bytes.
inline constexpr int kMaxPhaseNameLength = 64;

// The name reserved for step time outside every top-level phase; it cannot be
// registered as a phase name.
inline constexpr std::string_view kOtherPhaseName = "other";

// The idle cause for launch gaps (Summary::idle_by_cause); reserved too, so
// that a phase cannot share its entry.
inline constexpr std::string_view kLaunchCauseName = "launch";

// PhaseName()
//
// The lower-case name of a built-in phase: "data", "h2d", "forward", ...
std::string_view PhaseName(Phase phase);

// ParsePhase()
//
// The built-in phase called `name`, or NotFoundError for any other name
// (which may still be registered as a custom phase).
absl::StatusOr<Phase> ParsePhase(std::string_view name);

// ValidatePhaseName()
//
// OkStatus() if `name` may be registered as a phase name: 1 to
// `kMaxPhaseNameLength` bytes of valid UTF-8; no control or invisible
// characters (C0/C1 controls such as newline, ESC and NEL, zero-width
// characters, bidirectional overrides, ...) and no space other than U+0020;
// not blank, no leading or trailing space; not "other" or "launch". Names are
// printed in reports and compared across runs: they must read as they are.
// Otherwise an InvalidArgumentError that says which rule the name breaks.
absl::Status ValidatePhaseName(std::string_view name);

namespace internal {
class PhaseTable;
}  // namespace internal

// PhaseId
//
// A phase name's index in a session's phase table. Built-in phases have the
// same id in every session (their enum value); a custom name's id carries the
// tag of the session that registered it, and any other session rejects it.
// Cheap to copy (4 bytes).
class PhaseId {
 public:
  // Implicit by design: a built-in phase is a PhaseId.
  constexpr PhaseId(Phase phase)  // NOLINT(google-explicit-constructor)
      : value_(static_cast<uint16_t>(phase)), session_tag_(0) {}

  constexpr uint16_t value() const { return value_; }
  constexpr bool builtin() const { return value_ < kNumBuiltinPhases; }
  // 0 for built-in phases; else the registering session's tag.
  constexpr uint16_t session_tag() const { return session_tag_; }

  friend constexpr bool operator==(PhaseId a, PhaseId b) {
    return a.value_ == b.value_ && a.session_tag_ == b.session_tag_;
  }
  friend constexpr bool operator!=(PhaseId a, PhaseId b) { return !(a == b); }

 private:
  // Only a session's phase table makes ids for custom names; users get them
  // from Session::RegisterPhase().
  friend class internal::PhaseTable;
  static constexpr PhaseId FromIndex(uint16_t value, uint16_t session_tag) {
    return PhaseId(value, value < kNumBuiltinPhases ? uint16_t{0} : session_tag);
  }

  constexpr PhaseId(uint16_t value, uint16_t session_tag)
      : value_(value), session_tag_(session_tag) {}
  uint16_t value_;
  uint16_t session_tag_;
};

}  // namespace gpuscope

#endif  // GPUSCOPE_PHASE_H_
