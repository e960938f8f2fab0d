// File: base/json.h
// -----------------------------------------------------------------------------
//
// A small, strict JSON (RFC 8259) reader and writer, enough for gpuscope to
// encode its `Summary` as versioned JSON and to read it back, including from
// user-supplied baseline files that may be corrupt, truncated or hostile.
//
// `ParseJson()` builds a `JsonValue` tree and rejects anything that is not
// valid JSON, with an error that names the line and column. `JsonWriter`
// streams a document out. Doubles written by `JsonWriter::Number()` read back
// bit-identical, and integers written by `JsonWriter::Int()` read back exactly
// through `JsonValue::as_int64()`.
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
//   const JsonValue* version = doc->Find("version");

#ifndef GPUSCOPE_LIB_BASE_JSON_H_
#define GPUSCOPE_LIB_BASE_JSON_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuscope::internal {

// The most deeply nested arrays and objects `ParseJson()` accepts.
inline constexpr int kMaxJsonDepth = 64;

// The largest input, in bytes, `ParseJson()` accepts.
inline constexpr size_t kMaxJsonBytes = size_t{64} << 20;

// JsonValue
//
// One JSON value: null, a boolean, a number, a string, an array or an object.
// Objects keep their members in document order, duplicates included.
class JsonValue {
 public:
  // The kind of value held.
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  // The elements of an array.
  using Array = std::vector<JsonValue>;

  // The members of an object, in document order.
  using Object = std::vector<std::pair<std::string, JsonValue>>;

  // Constructs null.
  JsonValue() = default;

  // Returns a boolean value.
  static JsonValue Bool(bool value);

  // Returns a number.
  static JsonValue Number(double value);

  // Returns a number that `as_int64()` reports exactly, even beyond 2^53.
  static JsonValue Int(int64_t value);

  // Returns a string; `value` should be UTF-8.
  static JsonValue String(std::string value);

  // Returns an array.
  static JsonValue MakeArray(Array elements);

  // Returns an object.
  static JsonValue MakeObject(Object members);

  // The kind of value held.
  Type type() const;

  // Whether the value is null.
  bool is_null() const { return type() == Type::kNull; }

  // Whether the value is a boolean.
  bool is_bool() const { return type() == Type::kBool; }

  // Whether the value is a number.
  bool is_number() const { return type() == Type::kNumber; }

  // Whether the value is a string.
  bool is_string() const { return type() == Type::kString; }

  // Whether the value is an array.
  bool is_array() const { return type() == Type::kArray; }

  // Whether the value is an object.
  bool is_object() const { return type() == Type::kObject; }

  // The accessors below require the matching type. They assert in debug
  // builds; otherwise they return false, 0, or an empty string, array or
  // object.

  // The boolean held.
  bool as_bool() const;

  // The number held.
  double as_number() const;

  // The string held.
  const std::string& as_string() const;

  // The elements of the array held.
  const Array& as_array() const;

  // The members of the object held.
  const Object& as_object() const;

  // The exact integer value of a number: set when the number literal was an
  // integer that fits an int64_t (or the value came from `Int()`), or when the
  // double is integral and within +-2^53. Empty otherwise, and for
  // non-numbers.
  std::optional<int64_t> as_int64() const;

  // The value of the first member named `key`; nullptr if this is not an
  // object or has no such member.
  const JsonValue* Find(std::string_view key) const;

 private:
  struct NumberRep {
    double value = 0;
    int64_t exact = 0;       // meaningful only when `has_exact`
    bool has_exact = false;  // the value is the integer `exact`
  };

  // Alternatives are in `Type` order.
  std::variant<std::monostate, bool, NumberRep, std::string, Array, Object> value_;
};

// ParseJson()
//
// Parses one JSON document (RFC 8259), surrounded by optional whitespace.
// Strict: rejects trailing content, trailing commas, comments, NaN and
// Infinity, leading zeros, unescaped control characters in strings, invalid
// or unpaired \u escapes, invalid UTF-8, numbers too large for a double,
// nesting deeper than `kMaxJsonDepth` and inputs over `kMaxJsonBytes`.
// Numbers too small for a double become zero of the same sign. Duplicate
// object keys are kept, in order. "\u0000" is decoded into a NUL byte.
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

// JsonValueToString()
//
// Writes `value` with a `JsonWriter` of the given indent. Numbers for which
// `as_int64()` is set are written as that integer (except -0.0); the result
// parses back to an equal value, numbers bit-identical.
std::string JsonValueToString(const JsonValue& value, int indent = 0);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BASE_JSON_H_
