#include "gpuscope/phase.h"

#include <array>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/strings.h"
#include "base/text.h"

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
  size_t pos = 0;
  while (pos < name.size()) {
    const int32_t c = NextCodePoint(name, &pos);
    if (c < 0) return "invalid UTF-8";
    if (IsControlOrInvisible(c)) return "control or invisible character";
    if (IsOtherSpace(c)) return "space other than U+0020";
  }
  if (name.front() == ' ' || name.back() == ' ') return "leading or trailing space";
  if (name == kOtherPhaseName || name == kLaunchCauseName) return "reserved";
  return nullptr;
}

}  // namespace internal

absl::Status ValidatePhaseName(std::string_view name) {
  if (internal::PhaseNameProblem(name) == nullptr) return absl::OkStatus();
  const std::string shown = internal::TerminalSafe(name.substr(0, 48));
  if (name.empty()) {
    return absl::InvalidArgumentError(
        "phase name is empty: give the phase a name, e.g. \"forward\"");
  }
  if (name.size() > static_cast<size_t>(kMaxPhaseNameLength)) {
    return absl::InvalidArgumentError(absl::StrCat("phase name '", shown, "...' is ", name.size(),
                                                   " bytes long; the limit is ",
                                                   kMaxPhaseNameLength, ": use a shorter name"));
  }
  size_t pos = 0;
  while (pos < name.size()) {
    const int32_t c = internal::NextCodePoint(name, &pos);
    if (c < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("phase name '", shown, "' is not valid UTF-8: use printable text"));
    }
    if (internal::IsControlOrInvisible(c) || internal::IsOtherSpace(c)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "phase name '%s' contains U+%04X, a %s character: phase names are printed in reports and "
          "must read as they are; use visible characters and plain spaces",
          shown, c, internal::IsOtherSpace(c) ? "look-alike space" : "control or invisible"));
    }
  }
  if (name.front() == ' ' || name.back() == ' ') {
    return absl::InvalidArgumentError(
        absl::StrCat("phase name '", shown,
                     "' is blank or begins or ends with a space: phase names are "
                     "compared and printed as given; trim the spaces"));
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
