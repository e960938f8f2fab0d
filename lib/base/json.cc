// JsonValue and ParseJson(): parsing goes through nlohmann-json's SAX
// interface, which builds the `JsonValue` tree below. No nlohmann type leaves
// this file. Writing is in json_writer.cc.

#include "base/json.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/text.h"
#include "nlohmann/json.hpp"

namespace gpuscope::internal {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// 2^53: every integer of at most this magnitude is exact in a double.
constexpr double kMaxExactDouble = 9007199254740992.0;

// Reads the text like a `const char*` and counts the bytes nlohmann's lexer
// has taken, a position its SAX events do not carry.
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator(const char* at, size_t* taken) : at_(at), taken_(taken) {}
  reference operator*() const { return *at_; }
  CountingIterator& operator++() {
    ++at_;
    ++*taken_;
    return *this;
  }
  bool operator==(const CountingIterator& other) const { return at_ == other.at_; }

 private:
  const char* at_;
  size_t* taken_;
};

// A SAX handler for nlohmann's parser that builds the `JsonValue` tree, limits the depth,
// and turns nlohmann's errors into ours.
//
// Positions: when an event arrives, the lexer has taken the bytes of its token
// and, after a number, one byte more (it reads ahead to find the number's
// end); errors are placed from the end of the last event's token.
class TreeBuilder {
 public:
  explicit TreeBuilder(std::string_view text) : text_(text) {}

  // Parses the whole text; call once.
  absl::StatusOr<JsonValue> Build() {
    const CountingIterator first(text_.data(), &taken_);
    const CountingIterator last(text_.data() + text_.size(), &taken_);
    if (!nlohmann::json::sax_parse(first, last, this)) {
      assert(!error_.ok());
      return error_;
    }
    // The lexer takes a NUL byte for the end of the input.
    if (const size_t at = SkipWhitespace(last_end_); at < text_.size()) {
      Fail(at, "unexpected content after the document");
      return error_;
    }
    return std::move(root_);
  }

  // The SAX events (nlohmann's names and signatures).

  bool null() { return Add(JsonValue(), taken_); }
  bool boolean(bool value) { return Add(JsonValue::Bool(value), taken_); }
  bool number_integer(int64_t value) {
    if (value == 0) return Zero();
    return Add(JsonValue::Int(value), NumberEnd());
  }
  bool number_unsigned(uint64_t value) {
    if (value == 0) return Zero();
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Add(JsonValue::Number(static_cast<double>(value)), NumberEnd());
    }
    return Add(JsonValue::Int(static_cast<int64_t>(value)), NumberEnd());
  }
  // Underflow gives zero of the literal's sign; overflow never gets here
  // (nlohmann reports it as error 406).
  bool number_float(double value, const std::string& /*literal*/) {
    return Add(JsonValue::Number(value), NumberEnd());
  }
  bool string(std::string& value) { return Add(JsonValue::String(std::move(value)), taken_); }
  bool binary(nlohmann::json::binary_t& /*value*/) {
    return Fail(taken_, "binary value");  // JSON text has none
  }
  bool start_object(size_t /*elements*/) { return Open(/*is_object=*/true); }
  bool start_array(size_t /*elements*/) { return Open(/*is_object=*/false); }
  bool key(std::string& name) {
    stack_.back().key = std::move(name);
    last_ = Last::kKey;
    last_end_ = taken_;
    return true;
  }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool parse_error(size_t position, const std::string& /*last_token*/,
                   const nlohmann::json::exception& error);

 private:
  // What the last event was.
  enum class Last { kOpen, kKey, kValue };  // kOpen: '[', '{' or nothing yet

  struct Frame {
    bool is_object = false;
    JsonValue::Array elements;
    JsonValue::Object members;
    std::string key;  // objects: the name of the member whose value is next
  };

  // The byte at `pos`, or NUL past the end.
  char Byte(size_t pos) const { return pos < text_.size() ? text_[pos] : '\0'; }

  size_t SkipWhitespace(size_t pos) const {
    while (pos < text_.size() &&
           (text_[pos] == ' ' || text_[pos] == '\t' || text_[pos] == '\n' || text_[pos] == '\r')) {
      ++pos;
    }
    return pos;
  }

  // Where the number just reported ends: the lexer has read one byte past it
  // unless the input ended, and that byte is no digit (but see `Zero()`).
  size_t NumberEnd() const {
    return taken_ > 0 && IsDigit(text_[taken_ - 1]) ? taken_ : taken_ - 1;
  }

  // Records an error at byte `pos`; always returns false, which stops
  // nlohmann's parser.
  bool Fail(size_t pos, std::string_view what) {
    const std::string_view before = text_.substr(0, pos);
    const size_t newline = before.rfind('\n');
    error_ = absl::InvalidArgumentError(absl::StrCat(
        "JSON parse error at line ", 1 + std::count(before.begin(), before.end(), '\n'),
        ", column ", before.size() - (newline == std::string_view::npos ? 0 : newline + 1) + 1,
        ": ", absl::string_view(what.data(), what.size())));
    return false;
  }

  // Fails with "unexpected end of input" or "unexpected <char>, <expected>".
  bool FailUnexpected(size_t pos, std::string_view expected) {
    const absl::string_view exp(expected.data(), expected.size());
    if (pos >= text_.size()) {
      return Fail(pos, absl::StrCat("unexpected end of input, ", exp));
    }
    const unsigned char c = static_cast<unsigned char>(text_[pos]);
    const std::string shown =
        c >= 0x21 && c < 0x7F ? absl::StrFormat("'%c'", c) : absl::StrFormat("byte 0x%02X", c);
    return Fail(pos, absl::StrCat("unexpected ", shown, ", ", exp));
  }

  bool Add(JsonValue value, size_t end) {
    last_ = Last::kValue;
    last_end_ = end;
    if (stack_.empty()) {
      root_ = std::move(value);
      done_ = true;
    } else if (stack_.back().is_object) {
      Frame& top = stack_.back();
      top.members.emplace_back(std::move(top.key), std::move(value));
    } else {
      stack_.back().elements.push_back(std::move(value));
    }
    return true;
  }

  // nlohmann reports "0" and "-0" alike as the integer 0, and a leading zero
  // ("01") only as an unexpected next token; the text tells them apart.
  bool Zero() {
    const size_t end = NumberEnd();
    if (end >= 2 && IsDigit(text_[end - 2])) {
      return Fail(end - 1, "leading zero in number");
    }
    const bool negative = end >= 2 && text_[end - 2] == '-';
    return Add(negative ? JsonValue::Number(-0.0) : JsonValue::Int(0), end);
  }

  // The check runs before nlohmann's parser goes one level deeper, and that
  // parser keeps its own stack on the heap, so hostile depth cannot
  // overflow the call stack.
  bool Open(bool is_object) {
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      return Fail(taken_ - 1, absl::StrCat("nesting deeper than ", kMaxJsonDepth, " levels"));
    }
    stack_.push_back(Frame{is_object, {}, {}, {}});
    last_ = Last::kOpen;
    last_end_ = taken_;
    return true;
  }

  bool Close() {
    Frame frame = std::move(stack_.back());
    stack_.pop_back();
    return Add(frame.is_object ? JsonValue::MakeObject(std::move(frame.members))
                               : JsonValue::MakeArray(std::move(frame.elements)),
               taken_);
  }

  bool FailInString(size_t stop, const nlohmann::json::exception& error);
  size_t InvalidUtf8Start(size_t stop) const;

  std::string_view text_;
  size_t taken_ = 0;     // bytes the lexer has taken
  size_t last_end_ = 0;  // where the last event's token ends
  Last last_ = Last::kOpen;
  bool done_ = false;  // the top-level value is complete
  std::vector<Frame> stack_;
  JsonValue root_;
  absl::Status error_;
};

// nlohmann's messages and positions differ from ours, so the error is named
// anew: what was expected follows from the events so far, where the failing
// token starts from the end of the last one, and what went wrong inside a
// string, number or literal from the lexer's message and the bytes.
bool TreeBuilder::parse_error(size_t position, const std::string&,
                              const nlohmann::json::exception& error) {
  const size_t stop = position - 1;  // the byte the lexer failed on
  size_t at = SkipWhitespace(last_end_);
  if (done_) return Fail(at, "unexpected content after the document");
  bool want_key = last_ == Last::kOpen && !stack_.empty() && stack_.back().is_object;
  if (last_ == Last::kKey) {
    if (Byte(at) != ':') return FailUnexpected(at, "expected ':' after name");
    at = SkipWhitespace(at + 1);
  } else if (last_ == Last::kValue) {  // inside a container: not `done_`
    const bool in_object = stack_.back().is_object;
    if (Byte(at) != ',') {
      return FailUnexpected(
          at, in_object ? "expected ',' or '}' in object" : "expected ',' or ']' in array");
    }
    at = SkipWhitespace(at + 1);
    if (Byte(at) == (in_object ? '}' : ']')) {
      return Fail(at, in_object ? "trailing comma in object" : "trailing comma in array");
    }
    want_key = in_object;
  }
  const char first = Byte(at);
  if (first == '"') return FailInString(stop, error);
  if (want_key) return FailUnexpected(at, "expected a member name");
  if (first == 't' || first == 'f' || first == 'n') {
    return Fail(at, "invalid literal (expected true, false or null)");
  }
  if (first != '-' && !IsDigit(first)) {
    return FailUnexpected(at, "expected a value");
  }
  if (error.id == 406) return Fail(at, "number too large for a double");
  if (text_[stop - 1] == '.') {
    return FailUnexpected(stop, "expected a digit after '.'");
  }
  return FailUnexpected(stop, stop - 1 == at ? "expected a digit"  // after '-'
                                             : "expected an exponent");
}

bool TreeBuilder::FailInString(size_t stop, const nlohmann::json::exception& error) {
  // The lexer's message comes before the bytes it quotes, so the first match
  // is its own.
  const std::string_view what = error.what();
  const size_t found = what.find("invalid string: ");
  const std::string_view problem = found == std::string_view::npos ? "" : what.substr(found + 16);
  if (problem.starts_with("missing closing quote")) {
    return Fail(stop, "unterminated string");
  }
  if (problem.starts_with("control character")) {
    return Fail(stop, absl::StrFormat("unescaped control character U+%04X in "
                                      "string",
                                      static_cast<unsigned char>(Byte(stop))));
  }
  if (problem.starts_with("ill-formed UTF-8")) {
    return Fail(InvalidUtf8Start(stop), "invalid UTF-8 in string");
  }
  if (problem.starts_with("'\\u' must be followed by 4 hex digits")) {
    return FailUnexpected(stop, "expected 4 hex digits after \\u");
  }
  if (problem.starts_with("surrogate U+DC00..U+DFFF")) {
    // Stopped on the last hex digit of "\uDC00".
    return Fail(stop - 5, "unpaired low surrogate in \\u escape");
  }
  if (problem.starts_with("surrogate U+D800..U+DBFF")) {
    // Stopped after "\uD83D" on the byte that is no backslash, on the one
    // after a backslash that is no 'u', or on the last hex digit of a second
    // escape that is no low surrogate; the error names the first escape.
    const size_t start = text_[stop - 1] == '\\'   ? stop - 7
                         : text_[stop - 5] == '\\' ? stop - 11
                                                   : stop - 6;
    return Fail(start, "unpaired high surrogate in \\u escape");
  }
  return FailUnexpected(stop, "invalid escape in string");
}

// The lexer stops on the byte that breaks a UTF-8 sequence; the error names
// the sequence's first byte.
size_t TreeBuilder::InvalidUtf8Start(size_t stop) const {
  size_t lead = stop;
  while (lead > 0 && stop - lead < 3 &&
         (static_cast<unsigned char>(text_[lead - 1]) & 0xC0) == 0x80) {
    --lead;
  }
  if (lead > 0 && static_cast<unsigned char>(text_[lead - 1]) >= 0xC0 &&
      Utf8SequenceLength(text_, lead - 1) == 0) {
    return lead - 1;
  }
  return stop;
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

JsonValue::Type JsonValue::type() const { return static_cast<Type>(value_.index()); }

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
  if (std::trunc(n->value) == n->value && std::fabs(n->value) <= kMaxExactDouble) {
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
  if (text.size() > kMaxJsonBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON parse error at line 1, column 1: input is ", text.size(),
                     " bytes, more than the limit of ", kMaxJsonBytes));
  }
  if (text.starts_with('\xEF')) {
    // nlohmann would skip a UTF-8 byte order mark, which RFC 8259 lets a
    // parser reject; the files gpuscope reads never start with one.
    return absl::InvalidArgumentError(
        "JSON parse error at line 1, column 1: unexpected byte 0xEF, expected "
        "a value");
  }
  return TreeBuilder(text).Build();
}

}  // namespace gpuscope::internal
