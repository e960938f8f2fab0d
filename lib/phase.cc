#include "gpuscope/phase.h"

#include <array>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/strings.h"

namespace gpuscope {
namespace {

constexpr std::array<std::string_view, kNumBuiltinPhases> kBuiltinNames = {
    "data", "h2d", "forward", "backward", "optimizer", "comm", "sync", "eval", "checkpoint"};

}  // namespace

std::string_view PhaseName(Phase phase) {
  const auto index = static_cast<size_t>(phase);
  return index < kBuiltinNames.size() ? kBuiltinNames[index] : std::string_view("?");
}

absl::StatusOr<Phase> ParsePhase(std::string_view name) {
  for (size_t i = 0; i < kBuiltinNames.size(); ++i) {
    if (kBuiltinNames[i] == name) return static_cast<Phase>(i);
  }
  return absl::NotFoundError(
      absl::StrCat("'", internal::ToAbsl(name), "' is not a built-in phase"));
}

namespace internal {

const char* PhaseNameProblem(std::string_view name) noexcept {
  if (name.empty()) return "empty";
  if (name.size() > static_cast<size_t>(kMaxPhaseNameLength)) return "too long";
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return "control character";
  }
  if (name == kOtherPhaseName || name == kLaunchCauseName) return "reserved";
  return nullptr;
}

}  // namespace internal

absl::Status ValidatePhaseName(std::string_view name) {
  if (internal::PhaseNameProblem(name) == nullptr) return absl::OkStatus();
  if (name.empty()) {
    return absl::InvalidArgumentError("phase name is empty: give the phase a name, e.g. \"forward\"");
  }
  if (name.size() > static_cast<size_t>(kMaxPhaseNameLength)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "phase name '", internal::ToAbsl(name.substr(0, 24)), "...' is ", name.size(),
        " bytes long; the limit is ", kMaxPhaseNameLength, ": use a shorter name"));
  }
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError(
          "phase name contains a control character (newline, tab, ...): use printable text");
    }
  }
  if (name == kOtherPhaseName) {
    return absl::InvalidArgumentError(
        "'other' is reserved for step time outside every phase: choose another name");
  }
  if (name == kLaunchCauseName) {
    return absl::InvalidArgumentError(
        "'launch' is reserved for GPU idle in kernel-launch gaps: choose another name, e.g. "
        "\"launch_kernels\"");
  }
  return absl::OkStatus();
}

}  // namespace gpuscope
