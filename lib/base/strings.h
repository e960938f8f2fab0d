// Conversions between std::string_view and absl::string_view.
//
// Debian's Abseil (20220623) is built with its own absl::string_view, distinct
// from std::string_view. gpuscope's public API speaks std::string_view; these
// are the only place the two meet.

#ifndef GPUSCOPE_LIB_BASE_STRINGS_H_
#define GPUSCOPE_LIB_BASE_STRINGS_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace gpuscope::internal {

inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
inline std::string_view ToStd(absl::string_view s) { return std::string_view(s.data(), s.size()); }

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BASE_STRINGS_H_
