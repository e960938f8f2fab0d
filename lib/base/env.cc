#include "base/env.h"

#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpuscope::internal {

std::optional<bool> ParseBool(std::string_view text) {
  const std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(ToAbsl(text)));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return std::nullopt;
}

bool EnvFlag(const char* name, bool default_value) {
  const char* env = std::getenv(name);
  if (env == nullptr || absl::StripAsciiWhitespace(env).empty()) return default_value;
  if (std::optional<bool> v = ParseBool(env); v.has_value()) return *v;
  LogOnce(absl::StrCat("env-", name), LogLevel::kWarning,
          absl::StrCat(name, "='", absl::CHexEscape(env),
                       "' is not a boolean: use 1, true, yes or on "
                       "(or 0, false, no, off); ignored, ",
                       name, " stays ", default_value ? "on" : "off"));
  return default_value;
}

}  // namespace gpuscope::internal
