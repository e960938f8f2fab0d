// File: base/json.h
// -----------------------------------------------------------------------------
//
// JSON for gpuscope: its `Summary` encoded as versioned JSON and read back,
// including from user-supplied baseline files that may be corrupt, truncated
// or hostile.
//
// A parsed document is nlohmann-json's own value, `nlohmann::ordered_json`
// (members in document order). `ParseJson()` builds one within depth and
// size limits and rejects anything that is not valid JSON, with an error that
// names the line and column. `JsonWriter` streams a document out. Doubles
// written by `JsonWriter::Number()` read back bit-identical, and integers
// written by `JsonWriter::Int()` read back exactly through `AsInt64()`.
//
// Example:
//
//   JsonWriter writer;
//   writer.BeginObject();
//   writer.Key("version");
//   writer.Int(1);
//   writer.EndObject();
//   std::string text = writer.Take();  // {"version":1}
//
//   absl::StatusOr<JsonValue> doc = ParseJson(text);
//   if (!doc.ok()) return doc.status();
//   const JsonValue* version = Find(*doc, "version");

#ifndef GPUSCOPE_LIB_BASE_JSON_H_
#define GPUSCOPE_LIB_BASE_JSON_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gpuscope::internal {

// The most deeply nested arrays and objects `ParseJson()` accepts.
inline constexpr int kMaxJsonDepth = 64;

// The largest input, in bytes, `ParseJson()` accepts.
inline constexpr size_t kMaxJsonBytes = size_t{64} << 20;

// JsonValue
//
// One JSON value: nlohmann-json's, objects keeping their members in document
// order. Use nlohmann's own API (`is_object()`, `get<double>()`,
// `get_ref<const std::string&>()`, iteration, `items()`) and the two helpers
// below.
using JsonValue = nlohmann::ordered_json;

// Find()
//
// The value of the member named `key`; nullptr if `value` is not an object or
// has no such member. (nlohmann-json before 3.11, which gpuscope still builds
// with, has no lookup by std::string_view.)
const JsonValue* Find(const JsonValue& value, std::string_view key);

// AsInt64()
//
// The exact integer value of a number: set when it is an integer that fits an
// int64_t (`ParseJson()` keeps integer literals exact, even beyond 2^53), or
// a double that is integral and within +-2^53. Empty otherwise, and for
// non-numbers.
std::optional<int64_t> AsInt64(const JsonValue& value);

// ParseJson()
//
// Parses one JSON document (RFC 8259), surrounded by optional whitespace.
// Strict: rejects trailing content, trailing commas, comments, NaN and
// Infinity, leading zeros, unescaped control characters in strings, invalid
// or unpaired \u escapes, invalid UTF-8, numbers too large for a double,
// nesting deeper than `kMaxJsonDepth` and inputs over `kMaxJsonBytes`.
// Integer literals that fit an int64_t are kept as integers (nlohmann's
// number_integer; "-0" is the double -0.0), larger ones become doubles.
// Numbers too small for a double become zero of the same sign. Of duplicate
// object keys the first is kept (what a lookup saw when every member was
// kept). "\u0000" is decoded into a NUL byte.
//
// Errors are `absl::InvalidArgumentError`s reading
// "JSON parse error at line L, column C: <what>", 1-based, columns counting
// bytes. Never throws on bad input.
absl::StatusOr<JsonValue> ParseJson(std::string_view text);

// JsonWriter
//
// Writes a JSON document piece by piece. Compact by default; with `indent`
// greater than zero, one array element or object member per line, indented
// by `indent` spaces per level, members written as "key": value.
//
// Inside an object call `Key()` before each value. Misuse (a value without a
// key, `Key()` outside an object, unbalanced `End*()`) asserts in debug builds
// and in release builds writes something, possibly invalid, without crashing.
class JsonWriter {
 public:
  // Starts an empty document.
  explicit JsonWriter(int indent = 0);

  // Opens an object.
  void BeginObject();

  // Closes the innermost object.
  void EndObject();

  // Opens an array.
  void BeginArray();

  // Closes the innermost array.
  void EndArray();

  // Writes the name of the next object member.
  void Key(std::string_view key);

  // Writes a string. Escapes '"', '\\' and control characters (\n, \t, \r,
  // \b, \f; others as \u00XX); passes valid UTF-8 through and replaces each
  // byte of invalid UTF-8 with U+FFFD, so the output always parses.
  void String(std::string_view value);

  // Writes the shortest representation that reads back as the same double
  // (so -0.0 stays "-0"); NaN and infinities are written as null.
  void Number(double value);

  // Writes an integer exactly.
  void Int(int64_t value);

  // Writes true or false.
  void Bool(bool value);

  // Writes null.
  void Null();

  // Returns the document and resets the writer for a new one.
  std::string Take();

 private:
  struct Frame {
    bool is_object = false;
    bool empty = true;       // nothing written in this container yet
    bool after_key = false;  // objects only: a key awaits its value
  };

  void BeforeValue();
  void Open(bool is_object, char bracket);
  void Close(bool is_object, char bracket);
  void NewLine();
  void AppendQuoted(std::string_view text);

  int indent_;
  std::string out_;
  std::vector<Frame> stack_;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BASE_JSON_H_
