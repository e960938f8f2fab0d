#include "backends/vendor_status.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpuscope::internal {

absl::Status VendorCallError(absl::StatusCode code, absl::string_view call, absl::string_view error,
                             absl::string_view hint, absl::string_view file, int line) {
  // __FILE__ is the build machine's path; the name is enough to find it.
  if (const size_t slash = file.rfind('/'); slash != absl::string_view::npos)
    file.remove_prefix(slash + 1);
  return absl::Status(code, absl::StrCat(call, " failed: ", error, hint.empty() ? "" : " (", hint,
                                         hint.empty() ? "" : ")", " at ", file, ":", line));
}

std::string UnnamedVendorError(absl::string_view vendor, int64_t code) {
  return absl::StrCat(vendor, " error ", code);
}

}  // namespace gpuscope::internal
