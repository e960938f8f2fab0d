// Text for gpuscope's terminal output (reports, doctor): word wrapping at 80
// columns, and escaping of whatever came from outside (phase names, saved
// files) so that it cannot move the cursor, recolour, rewrite or hide lines.

#ifndef GPUSCOPE_LIB_BASE_TEXT_H_
#define GPUSCOPE_LIB_BASE_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpuscope::internal {

// Appends `text` word-wrapped at 80 columns, every line indented by `indent`.
void AppendWrapped(std::string* out, std::string_view text, size_t indent);

// Appends `first` followed by `text` word-wrapped at 80 columns, lines after
// the first indented by `hang` (a table row whose last column wraps).
void AppendHanging(std::string* out, std::string_view first, std::string_view text, size_t hang);

// Decodes the UTF-8 code point at `text[*pos]` and advances `*pos` past it.
// Returns -1 (and advances one byte) for a byte that does not start a valid,
// shortest-form UTF-8 sequence of a code point other than a surrogate.
int32_t NextCodePoint(std::string_view text, size_t* pos);

// Utf8SequenceLength()
//
// The length of the well-formed UTF-8 sequence starting at `text[pos]` (1
// to 4), or 0 if there is none (Unicode table 3-7).
size_t Utf8SequenceLength(std::string_view text, size_t pos);

// Whether code point `c` is a control character or one that is invisible or
// changes how the text around it is shown: C0 and C1 controls (NEL
// included), DEL, Unicode format characters (zero-width spaces and joiners,
// bidirectional marks, embeddings, overrides and isolates, the BOM, soft
// hyphen, invisible operators, tags, variation selectors), line and
// paragraph separators, fillers that render as blank, and noncharacters.
bool IsControlOrInvisible(int32_t c);

// Whether `c` is a space other than U+0020 (no-break, en, em, ideographic
// and the other Unicode space separators), which looks like U+0020.
bool IsOtherSpace(int32_t c);

// TerminalSafe()
//
// `text` safe to print on a terminal: valid UTF-8 without control or
// invisible characters passes unchanged; every such code point is written
// as \u{XXXX} (\t, \n, \r, \e for the common ones), and every byte of
// invalid UTF-8 as \xNN.
std::string TerminalSafe(std::string_view text);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BASE_TEXT_H_
