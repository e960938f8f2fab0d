// Word wrapping for gpuscope's terminal output (reports, doctor), which
// stays within 80 columns.

#ifndef GPUSCOPE_LIB_UTIL_TEXT_H_
#define GPUSCOPE_LIB_UTIL_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace gpuscope::internal {

// Appends `text` word-wrapped at 80 columns, every line indented by `indent`.
void AppendWrapped(std::string* out, std::string_view text, size_t indent);

// Appends `first` followed by `text` word-wrapped at 80 columns, lines after
// the first indented by `hang` (a table row whose last column wraps).
void AppendHanging(std::string* out, std::string_view first, std::string_view text, size_t hang);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_UTIL_TEXT_H_
