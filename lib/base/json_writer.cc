// JsonWriter: JSON out, streamed.

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "base/json.h"
#include "base/text.h"

namespace gpuscope::internal {

// Streamed by hand, not built as a `JsonValue` and written with nlohmann's
// `dump()`:
// - The Chrome trace runs to tens of MB. Built as a tree first, it would
//   hold every slice as a node (several times the text's size) before
//   writing a byte, and take longer to write.
// - The bytes stay those of earlier gpuscope versions (golden files, Python
//   tests comparing output): nlohmann writes other shortest forms of doubles
//   than std::to_chars ("-0.0", "1.0", "0.0001" for "-0", "1", "1e-04"), and
//   replaces a truncated multi-byte sequence with one U+FFFD where we replace
//   each byte; it throws on invalid UTF-8 unless told to replace it.
// With the trace streamed, one writer for every output keeps one format.

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
  // The two-character escapes: the byte, and at the same index, the letter
  // after the backslash.
  static constexpr std::string_view kEscapedBytes = "\"\\\b\f\n\r\t";
  static constexpr std::string_view kEscapeLetters = "\"\\bfnrt";
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

}  // namespace gpuscope::internal
