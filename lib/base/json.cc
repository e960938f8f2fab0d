// ParseJson(), Find() and AsInt64(). Parsing goes through nlohmann-json's SAX
// interface rather than `nlohmann::ordered_json::parse()` for the depth limit,
// our error messages and positions, "-0" and first-wins duplicate keys.
// Writing is in json_writer.cc.

#include "base/json.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
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

// A SAX handler for nlohmann's parser that builds the `JsonValue` tree,
// limits the depth, and turns nlohmann's errors into ours.
//
// Positions: when an event arrives, the lexer has taken the bytes of its token
// and, after a number, one byte more (it reads ahead to find the number's
// end); errors are placed from the end of the last event's token.
class TreeBuilder {
 public:
  explicit TreeBuilder(std::string_view text) : text_(text) {
    stack_.reserve(static_cast<size_t>(kMaxJsonDepth));
  }

  // Parses the whole text; call once.
  absl::StatusOr<JsonValue> Build() {
    const CountingIterator first(text_.data(), &taken_);
    const CountingIterator last(text_.data() + text_.size(), &taken_);
    if (!JsonValue::sax_parse(first, last, this)) {
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

  bool null() { return Add(JsonValue(nullptr), taken_); }
  bool boolean(bool value) { return Add(JsonValue(value), taken_); }
  bool number_integer(int64_t value) {
    if (value == 0) return Zero();
    return Add(JsonValue(value), NumberEnd());
  }
  // Kept signed (number_integer) when it fits, so that every exact integer
  // reads alike; beyond int64_t a double, as gpuscope has always read it.
  bool number_unsigned(uint64_t value) {
    if (value == 0) return Zero();
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Add(JsonValue(static_cast<double>(value)), NumberEnd());
    }
    return Add(JsonValue(static_cast<int64_t>(value)), NumberEnd());
  }
  // Underflow gives zero of the literal's sign; overflow never gets here
  // (nlohmann reports it as error 406).
  bool number_float(double value, const std::string& /*literal*/) {
    return Add(JsonValue(value), NumberEnd());
  }
  bool string(std::string& value) { return Add(JsonValue(std::move(value)), taken_); }
  bool binary(JsonValue::binary_t& /*value*/) {
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
                   const JsonValue::exception& error);

 private:
  // What the last event was.
  enum class Last { kOpen, kKey, kValue };  // kOpen: '[', '{' or nothing yet

  // The names of an object's members, as indexes into its members, so that a
  // duplicate is found without the linear search of nlohmann's ordered_map
  // (quadratic on a hostile object of millions of members). The members
  // vector stays put while its `JsonValue` moves.
  struct NameHash {
    const JsonValue::object_t* members;
    size_t operator()(size_t i) const {
      return std::hash<std::string_view>()(members->data()[i].first);
    }
  };
  struct NameEq {
    const JsonValue::object_t* members;
    bool operator()(size_t a, size_t b) const {
      return members->data()[a].first == members->data()[b].first;
    }
  };

  // Never copied: a copy's `names` would index the original's members.
  struct Frame {
    explicit Frame(bool object)
        : is_object(object),
          value(object ? JsonValue::object() : JsonValue::array()),
          names(0, NameHash{Members()}, NameEq{Members()}) {}
    Frame(const Frame&) = delete;
    Frame(Frame&&) = default;
    Frame& operator=(const Frame&) = delete;
    Frame& operator=(Frame&&) = default;
    JsonValue::object_t* Members() {
      return is_object ? &value.get_ref<JsonValue::object_t&>() : nullptr;
    }

    bool is_object;
    JsonValue value;  // the array or object being read
    std::string key;  // objects: the name of the member whose value is next
    std::unordered_set<size_t, NameHash, NameEq> names;  // objects
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
    } else if (Frame& top = stack_.back(); top.is_object) {
      // Appended directly (nlohmann's emplace() would search linearly); of
      // duplicate names the first stays.
      JsonValue::object_t& members = *top.Members();
      members.emplace_back(std::move(top.key), std::move(value));
      if (!top.names.insert(members.size() - 1).second) members.pop_back();
    } else {
      top.value.get_ref<JsonValue::array_t&>().push_back(std::move(value));
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
    return Add(negative ? JsonValue(-0.0) : JsonValue(int64_t{0}), end);
  }

  // The check runs before nlohmann's parser goes one level deeper, and that
  // parser keeps its own stack on the heap, so hostile depth cannot
  // overflow the call stack.
  bool Open(bool is_object) {
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      return Fail(taken_ - 1, absl::StrCat("nesting deeper than ", kMaxJsonDepth, " levels"));
    }
    stack_.emplace_back(is_object);
    last_ = Last::kOpen;
    last_end_ = taken_;
    return true;
  }

  bool Close() {
    JsonValue value = std::move(stack_.back().value);
    stack_.pop_back();
    return Add(std::move(value), taken_);
  }

  bool FailInString(size_t stop, const JsonValue::exception& error);
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
                              const JsonValue::exception& error) {
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

bool TreeBuilder::FailInString(size_t stop, const JsonValue::exception& error) {
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

const JsonValue* Find(const JsonValue& value, std::string_view key) {
  if (!value.is_object()) return nullptr;
  for (const auto& [name, member] : value.get_ref<const JsonValue::object_t&>()) {
    if (name == key) return &member;
  }
  return nullptr;
}

std::optional<int64_t> AsInt64(const JsonValue& value) {
  switch (value.type()) {
    case JsonValue::value_t::number_integer: return value.get<int64_t>();
    case JsonValue::value_t::number_unsigned: {
      const uint64_t u = value.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(u);
    }
    case JsonValue::value_t::number_float: {
      const double d = value.get<double>();
      if (std::trunc(d) == d && std::fabs(d) <= kMaxExactDouble) return static_cast<int64_t>(d);
      return std::nullopt;
    }
    default: return std::nullopt;
  }
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
