#include "base/text.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/strings.h"

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

int32_t NextCodePoint(std::string_view text, size_t* pos) {
  const size_t i = *pos;
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  *pos = i + 1;
  if (b0 < 0x80) return b0;
  int len = 0;
  int32_t c = 0;
  int32_t min = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, c = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, c = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, c = b0 & 0x07, min = 0x10000;
  } else {
    return -1;
  }
  if (i + static_cast<size_t>(len) > text.size()) return -1;
  for (int k = 1; k < len; ++k) {
    const unsigned char b = byte(i + static_cast<size_t>(k));
    if ((b & 0xC0) != 0x80) return -1;
    c = (c << 6) | (b & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return -1;
  *pos = i + static_cast<size_t>(len);
  return c;
}

bool IsControlOrInvisible(int32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0x9F)) return true;  // C0, DEL, C1 (NEL is U+0085)
  struct Range {
    int32_t lo, hi;
  };
  // Unicode general category Cf (format), Zl and Zp (line and paragraph
  // separators), and characters that render as nothing at all.
  static constexpr Range kInvisible[] = {
      {0x00AD, 0x00AD},    // soft hyphen
      {0x034F, 0x034F},    // combining grapheme joiner
      {0x061C, 0x061C},    // Arabic letter mark
      {0x115F, 0x1160},    // Hangul fillers
      {0x17B4, 0x17B5},    // Khmer inherent vowels
      {0x180B, 0x180F},    // Mongolian free variation selectors, vowel separator
      {0x200B, 0x200F},    // zero-width space, joiners, LRM, RLM
      {0x2028, 0x202E},    // line/paragraph separators, bidi embeddings and overrides
      {0x2060, 0x206F},    // word joiner, invisible operators, bidi isolates
      {0x3164, 0x3164},    // Hangul filler
      {0xFE00, 0xFE0F},    // variation selectors
      {0xFEFF, 0xFEFF},    // BOM, zero-width no-break space
      {0xFFA0, 0xFFA0},    // halfwidth Hangul filler
      {0xFFF9, 0xFFFB},    // interlinear annotation
      {0x1D173, 0x1D17A},  // musical formatting
      {0xE0000, 0xE0FFF},  // tags, variation selectors supplement
  };
  for (const Range& r : kInvisible) {
    if (c >= r.lo && c <= r.hi) return true;
  }
  return (c & 0xFFFE) == 0xFFFE || (c >= 0xFDD0 && c <= 0xFDEF);  // noncharacters
}

bool IsOtherSpace(int32_t c) {
  return c == 0x00A0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::string TerminalSafe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const int32_t c = NextCodePoint(text, &pos);
    if (c < 0) {
      absl::StrAppendFormat(&out, "\\x%02X", static_cast<unsigned char>(text[start]));
    } else if (!IsControlOrInvisible(c)) {
      out.append(text.substr(start, pos - start));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == 0x1B) {
      out += "\\e";
    } else {
      absl::StrAppendFormat(&out, "\\u{%04X}", c);
    }
  }
  return out;
}

// Utf8SequenceLength(): see text.h.
size_t Utf8SequenceLength(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) -> unsigned {
    return pos + i < text.size() ? static_cast<unsigned char>(text[pos + i]) : 0u;
  };
  auto cont = [&](size_t i, unsigned lo = 0x80, unsigned hi = 0xBF) {
    const unsigned b = byte(i);
    return b >= lo && b <= hi;
  };
  if (pos >= text.size()) return 0;
  const unsigned lead = byte(0);
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return cont(1) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    const bool second = lead == 0xE0   ? cont(1, 0xA0, 0xBF)
                        : lead == 0xED ? cont(1, 0x80, 0x9F)
                                       : cont(1);
    return second && cont(2) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    const bool second = lead == 0xF0   ? cont(1, 0x90, 0xBF)
                        : lead == 0xF4 ? cont(1, 0x80, 0x8F)
                                       : cont(1);
    return second && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace gpuscope::internal
