#include "base/json.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuscope::internal {
namespace {

// Returns the length of the well-formed UTF-8 sequence starting at
// `text[pos]` (1 to 4), or 0 if there is none (Unicode table 3-7).
size_t Utf8SequenceLength(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) -> unsigned {
    return pos + i < text.size() ? static_cast<unsigned char>(text[pos + i])
                                 : 0u;
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

void AppendUtf8(uint32_t code_point, std::string& out) {
  auto put = [&](uint32_t bits) { out.push_back(static_cast<char>(bits)); };
  if (code_point < 0x80) {
    put(code_point);
  } else if (code_point < 0x800) {
    put(0xC0 | (code_point >> 6));
    put(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    put(0xE0 | (code_point >> 12));
    put(0x80 | ((code_point >> 6) & 0x3F));
    put(0x80 | (code_point & 0x3F));
  } else {
    put(0xF0 | (code_point >> 18));
    put(0x80 | ((code_point >> 12) & 0x3F));
    put(0x80 | ((code_point >> 6) & 0x3F));
    put(0x80 | (code_point & 0x3F));
  }
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The two-character escapes: the letter after the backslash, and at the same
// index, the byte it stands for.
constexpr std::string_view kEscapeLetters = "\"\\/bfnrt";
constexpr std::string_view kEscapedBytes = "\"\\/\b\f\n\r\t";

// 2^53: every integer of at most this magnitude is exact in a double.
constexpr double kMaxExactDouble = 9007199254740992.0;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    if (text_.size() > kMaxJsonBytes) {
      Fail(absl::StrCat("input is ", text_.size(),
                        " bytes, more than the limit of ", kMaxJsonBytes));
      return error_;
    }
    JsonValue value;
    SkipWhitespace();
    if (!ParseValue(value, 0)) return error_;
    SkipWhitespace();
    if (pos_ < text_.size()) {
      Fail("unexpected content after the document");
      return error_;
    }
    return value;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  // Records an error at the current position; always returns false.
  bool Fail(std::string_view what) {
    size_t line = 1;
    size_t line_start = 0;
    const size_t end = pos_ < text_.size() ? pos_ : text_.size();
    for (size_t i = 0; i < end; ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    error_ = absl::InvalidArgumentError(absl::StrCat(
        "JSON parse error at line ", line, ", column ", end - line_start + 1,
        ": ", absl::string_view(what.data(), what.size())));
    return false;
  }

  // Fails with "unexpected end of input" or "unexpected <char>, <expected>".
  bool FailUnexpected(std::string_view expected) {
    const absl::string_view exp(expected.data(), expected.size());
    if (AtEnd()) return Fail(absl::StrCat("unexpected end of input, ", exp));
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    const std::string shown = c >= 0x21 && c < 0x7F
                                  ? absl::StrFormat("'%c'", c)
                                  : absl::StrFormat("byte 0x%02X", c);
    return Fail(absl::StrCat("unexpected ", shown, ", ", exp));
  }

  void SkipWhitespace() {
    while (!AtEnd()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
      ++pos_;
    }
  }

  bool ParseValue(JsonValue& out, int depth) {
    switch (Peek()) {
      case '{':
        return ParseObject(out, depth + 1);
      case '[':
        return ParseArray(out, depth + 1);
      case '"': {
        std::string s;
        if (!ParseString(s)) return false;
        out = JsonValue::String(std::move(s));
        return true;
      }
      case 't':
        return ParseLiteral("true", JsonValue::Bool(true), out);
      case 'f':
        return ParseLiteral("false", JsonValue::Bool(false), out);
      case 'n':
        return ParseLiteral("null", JsonValue(), out);
      default:
        if (Peek() == '-' || IsDigit(Peek())) return ParseNumber(out);
        return FailUnexpected("expected a value");
    }
  }

  bool ParseLiteral(std::string_view word, JsonValue value, JsonValue& out) {
    if (text_.substr(pos_, word.size()) != word) {
      return Fail("invalid literal (expected true, false or null)");
    }
    pos_ += word.size();
    out = std::move(value);
    return true;
  }

  bool EnterContainer(int depth) {
    if (depth > kMaxJsonDepth) {
      return Fail(
          absl::StrCat("nesting deeper than ", kMaxJsonDepth, " levels"));
    }
    ++pos_;  // '[' or '{'
    SkipWhitespace();
    return true;
  }

  bool ParseArray(JsonValue& out, int depth) {
    if (!EnterContainer(depth)) return false;
    JsonValue::Array elements;
    if (Peek() == ']') {
      ++pos_;
      out = JsonValue::MakeArray(std::move(elements));
      return true;
    }
    while (true) {
      elements.emplace_back();
      if (!ParseValue(elements.back(), depth)) return false;
      SkipWhitespace();
      if (Peek() == ',') {
        ++pos_;
        SkipWhitespace();
        if (Peek() == ']') return Fail("trailing comma in array");
      } else if (Peek() == ']') {
        ++pos_;
        out = JsonValue::MakeArray(std::move(elements));
        return true;
      } else {
        return FailUnexpected("expected ',' or ']' in array");
      }
    }
  }

  bool ParseObject(JsonValue& out, int depth) {
    if (!EnterContainer(depth)) return false;
    JsonValue::Object members;
    if (Peek() == '}') {
      ++pos_;
      out = JsonValue::MakeObject(std::move(members));
      return true;
    }
    while (true) {
      if (Peek() != '"') return FailUnexpected("expected a member name");
      members.emplace_back();
      if (!ParseString(members.back().first)) return false;
      SkipWhitespace();
      if (Peek() != ':') return FailUnexpected("expected ':' after name");
      ++pos_;
      SkipWhitespace();
      if (!ParseValue(members.back().second, depth)) return false;
      SkipWhitespace();
      if (Peek() == ',') {
        ++pos_;
        SkipWhitespace();
        if (Peek() == '}') return Fail("trailing comma in object");
      } else if (Peek() == '}') {
        ++pos_;
        out = JsonValue::MakeObject(std::move(members));
        return true;
      } else {
        return FailUnexpected("expected ',' or '}' in object");
      }
    }
  }

  // Reads the four hex digits of a \u escape at `pos_`.
  bool ParseHex4(uint32_t& out) {
    out = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      const char c = Peek();
      uint32_t digit;
      if (IsDigit(c)) {
        digit = static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return FailUnexpected("expected 4 hex digits after \\u");
      }
      out = out * 16 + digit;
    }
    return true;
  }

  // Reads a \u escape (and its low surrogate, if any); `pos_` is at 'u'.
  bool ParseUnicodeEscape(std::string& out) {
    const size_t start = pos_ - 1;
    ++pos_;
    uint32_t code;
    if (!ParseHex4(code)) return false;
    if (code >= 0xDC00 && code <= 0xDFFF) {
      pos_ = start;
      return Fail("unpaired low surrogate in \\u escape");
    }
    if (code >= 0xD800 && code <= 0xDBFF) {
      if (text_.substr(pos_, 2) != "\\u") {
        pos_ = start;
        return Fail("unpaired high surrogate in \\u escape");
      }
      pos_ += 2;
      uint32_t low;
      if (!ParseHex4(low)) return false;
      if (low < 0xDC00 || low > 0xDFFF) {
        pos_ = start;
        return Fail("unpaired high surrogate in \\u escape");
      }
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    AppendUtf8(code, out);
    return true;
  }

  bool ParseString(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      const size_t run_start = pos_;
      while (!AtEnd()) {
        const unsigned char c = static_cast<unsigned char>(text_[pos_]);
        if (c == '"' || c == '\\' || c < 0x20) break;
        if (c < 0x80) {
          ++pos_;
          continue;
        }
        const size_t length = Utf8SequenceLength(text_, pos_);
        if (length == 0) return Fail("invalid UTF-8 in string");
        pos_ += length;
      }
      out.append(text_.substr(run_start, pos_ - run_start));
      if (AtEnd()) return Fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) {
        return Fail(
            absl::StrFormat("unescaped control character U+%04X in string", c));
      }
      ++pos_;  // backslash
      if (Peek() == 'u') {
        if (!ParseUnicodeEscape(out)) return false;
        continue;
      }
      const size_t escape = kEscapeLetters.find(Peek());
      if (escape == std::string_view::npos) {
        return FailUnexpected("invalid escape in string");
      }
      out.push_back(kEscapedBytes[escape]);
      ++pos_;
    }
  }

  // Skips one or more digits; false if there are none.
  bool SkipDigits() {
    const size_t start = pos_;
    while (IsDigit(Peek())) ++pos_;
    return pos_ > start;
  }

  bool ParseNumber(JsonValue& out) {
    const size_t start = pos_;
    const bool negative = Peek() == '-';
    if (negative) ++pos_;
    const size_t int_start = pos_;
    if (Peek() == '0') {
      ++pos_;
      if (IsDigit(Peek())) return Fail("leading zero in number");
    } else if (!SkipDigits()) {
      return FailUnexpected("expected a digit");
    }
    const size_t int_end = pos_;
    bool integer = true;
    if (Peek() == '.') {
      ++pos_;
      integer = false;
      if (!SkipDigits()) return FailUnexpected("expected a digit after '.'");
    }
    const size_t frac_end = pos_;
    int64_t exponent = 0;
    if (Peek() == 'e' || Peek() == 'E') {
      ++pos_;
      integer = false;
      bool negative_exponent = false;
      if (Peek() == '+' || Peek() == '-') {
        negative_exponent = Peek() == '-';
        ++pos_;
      }
      if (!IsDigit(Peek())) return FailUnexpected("expected an exponent");
      for (; IsDigit(Peek()); ++pos_) {
        exponent = std::min<int64_t>(exponent * 10 + (Peek() - '0'), 1 << 30);
      }
      if (negative_exponent) exponent = -exponent;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integer) {
      int64_t exact;
      const auto [ptr, ec] = std::from_chars(first, last, exact);
      if (ec == std::errc() && ptr == last && !(negative && exact == 0)) {
        out = JsonValue::Int(exact);
        return true;
      }
    }
    double value;
    const auto [ptr, ec] = std::from_chars(first, last, value);
    if (ec == std::errc::result_out_of_range) {
      // Tell underflow from overflow by the decimal exponent of the first
      // significant digit (the literal is not all zeros, or it would fit).
      int64_t magnitude = exponent;
      if (text_[int_start] != '0') {
        magnitude += static_cast<int64_t>(int_end - int_start) - 1;
      } else {
        size_t i = int_end + 1;  // past the '.'
        while (i < frac_end && text_[i] == '0') ++i;
        magnitude -= static_cast<int64_t>(i - int_end);
      }
      if (magnitude >= 0) {
        pos_ = start;
        return Fail("number too large for a double");
      }
      value = negative ? -0.0 : 0.0;
    } else if (ec != std::errc() || ptr != last) {
      pos_ = start;
      return Fail("malformed number");  // not expected after the checks above
    }
    out = JsonValue::Number(value);
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
  absl::Status error_;
};

void WriteValue(const JsonValue& value, JsonWriter& writer) {
  switch (value.type()) {
    case JsonValue::Type::kNull:
      writer.Null();
      break;
    case JsonValue::Type::kBool:
      writer.Bool(value.as_bool());
      break;
    case JsonValue::Type::kNumber: {
      const double number = value.as_number();
      const std::optional<int64_t> exact = value.as_int64();
      if (exact.has_value() && !(number == 0 && std::signbit(number))) {
        writer.Int(*exact);  // exact even beyond 2^53
      } else {
        writer.Number(number);
      }
      break;
    }
    case JsonValue::Type::kString:
      writer.String(value.as_string());
      break;
    case JsonValue::Type::kArray:
      writer.BeginArray();
      for (const JsonValue& element : value.as_array()) {
        WriteValue(element, writer);
      }
      writer.EndArray();
      break;
    case JsonValue::Type::kObject:
      writer.BeginObject();
      for (const auto& [key, member] : value.as_object()) {
        writer.Key(key);
        WriteValue(member, writer);
      }
      writer.EndObject();
      break;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// JsonValue

JsonValue JsonValue::Bool(bool value) {
  JsonValue v;
  v.value_ = value;
  return v;
}

JsonValue JsonValue::Number(double value) {
  JsonValue v;
  v.value_ = NumberRep{value, 0, false};
  return v;
}

JsonValue JsonValue::Int(int64_t value) {
  JsonValue v;
  v.value_ = NumberRep{static_cast<double>(value), value, true};
  return v;
}

JsonValue JsonValue::String(std::string value) {
  JsonValue v;
  v.value_ = std::move(value);
  return v;
}

JsonValue JsonValue::MakeArray(Array elements) {
  JsonValue v;
  v.value_ = std::move(elements);
  return v;
}

JsonValue JsonValue::MakeObject(Object members) {
  JsonValue v;
  v.value_ = std::move(members);
  return v;
}

JsonValue::Type JsonValue::type() const {
  return static_cast<Type>(value_.index());
}

bool JsonValue::as_bool() const {
  assert(is_bool());
  const bool* b = std::get_if<bool>(&value_);
  return b != nullptr && *b;
}

double JsonValue::as_number() const {
  assert(is_number());
  const NumberRep* n = std::get_if<NumberRep>(&value_);
  return n != nullptr ? n->value : 0.0;
}

const std::string& JsonValue::as_string() const {
  assert(is_string());
  static const std::string& kEmpty = *new std::string();
  const std::string* s = std::get_if<std::string>(&value_);
  return s != nullptr ? *s : kEmpty;
}

const JsonValue::Array& JsonValue::as_array() const {
  assert(is_array());
  static const Array& kEmpty = *new Array();
  const Array* a = std::get_if<Array>(&value_);
  return a != nullptr ? *a : kEmpty;
}

const JsonValue::Object& JsonValue::as_object() const {
  assert(is_object());
  static const Object& kEmpty = *new Object();
  const Object* o = std::get_if<Object>(&value_);
  return o != nullptr ? *o : kEmpty;
}

std::optional<int64_t> JsonValue::as_int64() const {
  const NumberRep* n = std::get_if<NumberRep>(&value_);
  if (n == nullptr) return std::nullopt;
  if (n->has_exact) return n->exact;
  if (std::trunc(n->value) == n->value &&
      std::fabs(n->value) <= kMaxExactDouble) {
    return static_cast<int64_t>(n->value);
  }
  return std::nullopt;
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  const Object* o = std::get_if<Object>(&value_);
  if (o == nullptr) return nullptr;
  for (const auto& [name, value] : *o) {
    if (name == key) return &value;
  }
  return nullptr;
}

absl::StatusOr<JsonValue> ParseJson(std::string_view text) {
  return Parser(text).ParseDocument();
}

// ---------------------------------------------------------------------------
// JsonWriter

JsonWriter::JsonWriter(int indent) : indent_(indent > 0 ? indent : 0) {}

void JsonWriter::NewLine() {
  if (indent_ == 0) return;
  out_.push_back('\n');
  out_.append(stack_.size() * static_cast<size_t>(indent_), ' ');
}

void JsonWriter::BeforeValue() {
  if (stack_.empty()) {
    assert(out_.empty() && "JsonWriter: more than one top-level value");
    return;
  }
  Frame& frame = stack_.back();
  if (frame.is_object) {
    assert(frame.after_key && "JsonWriter: object value without Key()");
    frame.after_key = false;
    return;
  }
  if (!frame.empty) out_.push_back(',');
  frame.empty = false;
  NewLine();
}

void JsonWriter::Open(bool is_object, char bracket) {
  BeforeValue();
  out_.push_back(bracket);
  stack_.push_back(Frame{is_object, true, false});
}

void JsonWriter::Close(bool is_object, char bracket) {
  const bool matches = !stack_.empty() && stack_.back().is_object == is_object;
  assert(matches && "JsonWriter: unbalanced End*()");
  if (!matches) return;
  assert(!stack_.back().after_key && "JsonWriter: Key() without a value");
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) NewLine();
  out_.push_back(bracket);
}

void JsonWriter::BeginObject() { Open(true, '{'); }
void JsonWriter::EndObject() { Close(true, '}'); }
void JsonWriter::BeginArray() { Open(false, '['); }
void JsonWriter::EndArray() { Close(false, ']'); }

void JsonWriter::Key(std::string_view key) {
  const bool in_object = !stack_.empty() && stack_.back().is_object;
  assert(in_object && "JsonWriter: Key() outside an object");
  if (in_object) {
    Frame& frame = stack_.back();
    assert(!frame.after_key && "JsonWriter: two Key()s in a row");
    if (!frame.empty) out_.push_back(',');
    frame.empty = false;
    frame.after_key = true;
    NewLine();
  }
  AppendQuoted(key);
  out_.append(indent_ > 0 ? ": " : ":");
}

void JsonWriter::AppendQuoted(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out_.push_back('"');
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t length = Utf8SequenceLength(text, i);
      if (length == 0) {
        out_.append("\xEF\xBF\xBD");  // U+FFFD
        ++i;
      } else {
        out_.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    if (c >= 0x20 && c != '"' && c != '\\') {
      out_.push_back(static_cast<char>(c));
    } else if (const size_t escape = kEscapedBytes.find(static_cast<char>(c));
               escape != std::string_view::npos) {
      out_.push_back('\\');
      out_.push_back(kEscapeLetters[escape]);
    } else {
      out_.append("\\u00");
      out_.push_back(kHex[c >> 4]);
      out_.push_back(kHex[c & 0xF]);
    }
    ++i;
  }
  out_.push_back('"');
}

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  AppendQuoted(value);
}

void JsonWriter::Number(double value) {
  if (!std::isfinite(value)) {
    Null();
    return;
  }
  BeforeValue();
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out_.append(buffer, result.ptr);
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out_.append(buffer, result.ptr);
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_.append(value ? "true" : "false");
}

void JsonWriter::Null() {
  BeforeValue();
  out_.append("null");
}

std::string JsonWriter::Take() {
  assert(stack_.empty() && "JsonWriter: Take() with open containers");
  std::string document = std::move(out_);
  out_.clear();
  stack_.clear();
  return document;
}

std::string JsonValueToString(const JsonValue& value, int indent) {
  JsonWriter writer(indent);
  WriteValue(value, writer);
  return writer.Take();
}

}  // namespace gpuscope::internal
