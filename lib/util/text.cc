#include "util/text.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "util/strings.h"

namespace gpuscope::internal {

void AppendWrapped(std::string* out, std::string_view text, size_t indent) {
  AppendHanging(out, std::string(indent, ' '), text, indent);
}

void AppendHanging(std::string* out, std::string_view first, std::string_view text, size_t hang) {
  const std::string pad(hang, ' ');
  std::string line(first);
  size_t line_start = first.size();  // where words begin on this line
  for (absl::string_view word : absl::StrSplit(ToAbsl(text), ' ', absl::SkipEmpty())) {
    if (line.size() > line_start && line.size() + 1 + word.size() > 80) {
      absl::StrAppend(out, line, "\n");
      line = pad;
      line_start = pad.size();
    }
    absl::StrAppend(&line, line.size() > line_start ? " " : "", word);
  }
  if (line.size() > line_start) absl::StrAppend(out, line, "\n");
}

}  // namespace gpuscope::internal
