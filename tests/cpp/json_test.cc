#include "base/json.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

// A document shaped like an encoded Summary.
constexpr std::string_view kRealisticDocument = R"({
  "format": "gpuscope.summary",
  "version": 1,
  "device": {"name": "NVIDIA H100 80GB HBM3", "index": 0, "uuid": null},
  "steps": 1200,
  "step_time_ms": {"p50": 12.5, "p90": 13.0625, "p99": 17.25, "max": 1e+300,
                   "min": 5e-324, "mean": 0.1},
  "phases": [
    {"name": "forward", "share": 0.4, "tags": ["gpu", "\u00e9t\u00e9"]},
    {"name": "backward \"bw\"", "share": 0.55, "tags": []},
    {"name": "optimizer\n", "share": -0.0, "tags": ["\ud83d\ude00"]}
  ],
  "dropped_records": 9007199254740993,
  "misuse": false,
  "trusted": true,
  "notes": {}
})";

std::string Compact(const JsonValue& value) { return JsonValueToString(value); }

JsonValue ParseOrDie(std::string_view text) {
  absl::StatusOr<JsonValue> value = ParseJson(text);
  EXPECT_TRUE(value.ok()) << value.status() << "\nwhile parsing: " << text;
  return value.ok() ? *std::move(value) : JsonValue();
}

std::string WriteNumber(double value) {
  JsonWriter writer;
  writer.Number(value);
  return writer.Take();
}

void ExpectNumberRoundTrips(double value) {
  const std::string text = WriteNumber(value);
  absl::StatusOr<JsonValue> parsed = ParseJson(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << " for " << text;
  ASSERT_TRUE(parsed->is_number()) << text;
  EXPECT_EQ(std::bit_cast<uint64_t>(parsed->as_number()), std::bit_cast<uint64_t>(value)) << text;
}

TEST(JsonTest, DoublesRoundTripBitIdentical) {
  const double kSpecial[] = {
      0.0,
      -0.0,
      0.1,
      -0.1,
      1.0 / 3.0,
      1e300,
      -1e300,
      1e-300,
      1e21,
      1e22,
      123456789.125,
      std::numeric_limits<double>::min(),
      std::numeric_limits<double>::max(),
      std::numeric_limits<double>::lowest(),
      std::numeric_limits<double>::denorm_min(),
      -std::numeric_limits<double>::denorm_min(),
      std::numeric_limits<double>::min() / 3,
      std::numeric_limits<double>::epsilon(),
      9007199254740992.0,   // 2^53
      -9007199254740992.0,  // -2^53
      9007199254740994.0,
      4503599627370497.5,
  };
  for (double value : kSpecial) ExpectNumberRoundTrips(value);

  std::mt19937_64 rng(20240601);
  for (int i = 0; i < 20000; ++i) {
    // Random bit patterns cover every exponent, subnormals included.
    const double bits = std::bit_cast<double>(rng());
    if (std::isfinite(bits)) ExpectNumberRoundTrips(bits);
    // Random subnormals.
    ExpectNumberRoundTrips(std::bit_cast<double>(rng() >> 12));
    // Random integers up to 2^53.
    const double integer = static_cast<double>(rng() >> 11);
    ExpectNumberRoundTrips(integer);
    ExpectNumberRoundTrips(-integer);
  }
  EXPECT_EQ(WriteNumber(-0.0), "-0");
  EXPECT_EQ(WriteNumber(0.1), "0.1");
  // std::to_chars's shortest form, fixed or scientific, as gpuscope has
  // always written it (nlohmann's would be "1.0", "0.0001", ...).
  EXPECT_EQ(WriteNumber(1.0), "1");
  EXPECT_EQ(WriteNumber(1e16), "1e+16");
  EXPECT_EQ(WriteNumber(0.0001), "1e-04");
  EXPECT_EQ(WriteNumber(-2.5e-5), "-2.5e-05");
  EXPECT_EQ(WriteNumber(1.2345678901234568e20), "123456789012345683968");
  EXPECT_EQ(WriteNumber(5e-324), "5e-324");
}

TEST(JsonTest, DoublesInsideDocumentsRoundTrip) {
  std::mt19937_64 rng(7);
  std::vector<double> values;
  JsonWriter writer(2);
  writer.BeginObject();
  writer.Key("values");
  writer.BeginArray();
  for (int i = 0; i < 1000; ++i) {
    double value = std::bit_cast<double>(rng());
    if (!std::isfinite(value)) value = -0.0;
    values.push_back(value);
    writer.Number(value);
  }
  writer.EndArray();
  writer.EndObject();
  const JsonValue parsed = ParseOrDie(writer.Take());
  const JsonValue* array = parsed.Find("values");
  ASSERT_NE(array, nullptr);
  ASSERT_EQ(array->as_array().size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint64_t>(array->as_array()[i].as_number()),
              std::bit_cast<uint64_t>(values[i]));
  }
}

TEST(JsonTest, NonFiniteNumbersAreWrittenAsNull) {
  EXPECT_EQ(WriteNumber(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(WriteNumber(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(WriteNumber(-std::numeric_limits<double>::infinity()), "null");
}

TEST(JsonTest, Int64ExtremesRoundTripExactly) {
  const int64_t kValues[] = {
      0,
      1,
      -1,
      std::numeric_limits<int64_t>::max(),
      std::numeric_limits<int64_t>::min(),
      std::numeric_limits<int64_t>::max() - 1,
      std::numeric_limits<int64_t>::min() + 1,
      (int64_t{1} << 53) + 1,
      -(int64_t{1} << 53) - 1,
  };
  for (int64_t value : kValues) {
    JsonWriter writer;
    writer.Int(value);
    const std::string text = writer.Take();
    EXPECT_EQ(text, std::to_string(value));
    const JsonValue parsed = ParseOrDie(text);
    ASSERT_TRUE(parsed.is_number());
    EXPECT_EQ(parsed.as_int64(), value);
    EXPECT_EQ(parsed.as_number(), static_cast<double>(value));
    // Writing the parsed value back keeps it exact.
    EXPECT_EQ(Compact(parsed), text);
    EXPECT_EQ(JsonValue::Int(value).as_int64(), value);
  }
}

TEST(JsonTest, AsInt64OnlyForExactIntegers) {
  EXPECT_EQ(ParseOrDie("1e3").as_int64(), 1000);
  EXPECT_EQ(ParseOrDie("2.0").as_int64(), 2);
  EXPECT_EQ(ParseOrDie("-0").as_int64(), 0);
  EXPECT_EQ(ParseOrDie("9007199254740992.0").as_int64(), int64_t{9007199254740992});
  EXPECT_EQ(ParseOrDie("1.5").as_int64(), std::nullopt);
  EXPECT_EQ(ParseOrDie("1e19").as_int64(), std::nullopt);
  EXPECT_EQ(ParseOrDie("9007199254740994.0").as_int64(), std::nullopt);
  EXPECT_EQ(ParseOrDie("9223372036854775808").as_int64(), std::nullopt);
  EXPECT_EQ(ParseOrDie("-9223372036854775809").as_int64(), std::nullopt);
  EXPECT_EQ(ParseOrDie("\"1\"").as_int64(), std::nullopt);
  EXPECT_EQ(ParseOrDie("null").as_int64(), std::nullopt);
  EXPECT_EQ(JsonValue::Number(1e300).as_int64(), std::nullopt);
  EXPECT_EQ(JsonValue::Number(-4096.0).as_int64(), -4096);
}

TEST(JsonTest, NegativeZeroKeepsItsSign) {
  const JsonValue parsed = ParseOrDie("-0");
  EXPECT_TRUE(std::signbit(parsed.as_number()));
  EXPECT_EQ(Compact(parsed), "-0");
  EXPECT_TRUE(std::signbit(ParseOrDie("-0.0e5").as_number()));
  EXPECT_FALSE(std::signbit(ParseOrDie("0").as_number()));
  // Inside containers and followed by other bytes.
  for (std::string_view text : {"[-0]", "[0, -0]", "[-0\n]", "-0 "}) {
    const JsonValue doc = ParseOrDie(text);
    EXPECT_TRUE(std::signbit((doc.is_array() ? doc.as_array().back() : doc).as_number())) << text;
  }
  EXPECT_EQ(Compact(ParseOrDie("[0,-0,0]")), "[0,-0,0]");
  EXPECT_EQ(Compact(ParseOrDie(R"({"a":-0,"b":0})")), R"({"a":-0,"b":0})");
}

TEST(JsonTest, IntegersBeyondInt64BecomeDoubles) {
  struct Case {
    std::string_view text;
    double value;
    std::string_view written;
  };
  const Case kCases[] = {
      {"9223372036854775808", 9223372036854775808.0, "9223372036854775808"},
      {"18446744073709551615", 18446744073709551616.0, "18446744073709551616"},
      {"18446744073709551616", 18446744073709551616.0, "18446744073709551616"},
      {"-9223372036854775809", -9223372036854775808.0, "-9223372036854775808"},
      {"123456789012345678901234567890", 1.2345678901234568e29, "1.2345678901234568e+29"},
  };
  for (const Case& c : kCases) {
    const JsonValue parsed = ParseOrDie(c.text);
    EXPECT_EQ(parsed.as_number(), c.value) << c.text;
    EXPECT_EQ(parsed.as_int64(), std::nullopt) << c.text;
    EXPECT_EQ(Compact(parsed), c.written);
  }
}

TEST(JsonTest, UnderflowBecomesSignedZeroAndOverflowIsRejected) {
  const JsonValue tiny = ParseOrDie("1e-400");
  EXPECT_EQ(tiny.as_number(), 0.0);
  EXPECT_FALSE(std::signbit(tiny.as_number()));
  const JsonValue negative_tiny = ParseOrDie("-0.00000123e-330");
  EXPECT_EQ(negative_tiny.as_number(), 0.0);
  EXPECT_TRUE(std::signbit(negative_tiny.as_number()));
  EXPECT_EQ(ParseOrDie("1e-99999999999999999999").as_number(), 0.0);

  for (std::string_view text :
       {"1e400", "-1e309", "1.8e308", "100000e99999999999999999", "[1e999]"}) {
    absl::StatusOr<JsonValue> parsed = ParseJson(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.status().message().find("too large"), std::string_view::npos)
        << parsed.status();
  }
  EXPECT_EQ(ParseOrDie("1.7976931348623157e308").as_number(), std::numeric_limits<double>::max());
}

TEST(JsonTest, StringEscapesRoundTrip) {
  std::string all_ascii;
  for (int c = 0; c < 0x80; ++c) all_ascii.push_back(static_cast<char>(c));
  const std::string kStrings[] = {
      "",
      "plain",
      "quote \" backslash \\ slash /",
      "\n\t\r\b\f",
      all_ascii,
      "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80",  // é € 😀
      std::string("nul\0inside", 10),
  };
  for (const std::string& s : kStrings) {
    JsonWriter writer;
    writer.String(s);
    const std::string text = writer.Take();
    const JsonValue parsed = ParseOrDie(text);
    ASSERT_TRUE(parsed.is_string());
    EXPECT_EQ(parsed.as_string(), s) << text;
  }

  JsonWriter writer;
  writer.String(std::string("\"\\\n\t\r\b\f\x01\x1f\x7f/\0", 12));
  EXPECT_EQ(writer.Take(), R"("\"\\\n\t\r\b\f\u0001\u001f)"
                           "\x7f"
                           R"(/\u0000")");
}

TEST(JsonTest, UnicodeEscapesDecodeToUtf8) {
  EXPECT_EQ(ParseOrDie(R"("\u00e9")").as_string(), "\xC3\xA9");
  EXPECT_EQ(ParseOrDie(R"("\u20AC")").as_string(), "\xE2\x82\xAC");
  EXPECT_EQ(ParseOrDie(R"("\ud83d\ude00")").as_string(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(ParseOrDie(R"("\uDBFF\uDFFF")").as_string(), "\xF4\x8F\xBF\xBF");
  EXPECT_EQ(ParseOrDie(R"("\u0041\u0000")").as_string(), std::string("A\0", 2));
  EXPECT_EQ(ParseOrDie(R"("\/\"\\\b\f\n\r\t")").as_string(), "/\"\\\b\f\n\r\t");
  // Decoded text is written back as raw UTF-8 and reads back the same.
  const JsonValue parsed = ParseOrDie(R"(["\ud83d\ude00 \u00e9"])");
  EXPECT_EQ(Compact(parsed), "[\"\xF0\x9F\x98\x80 \xC3\xA9\"]");
  EXPECT_EQ(Compact(ParseOrDie(Compact(parsed))), Compact(parsed));
}

TEST(JsonTest, WriterReplacesInvalidUtf8) {
  JsonWriter writer;
  writer.String(
      "a\xFF"
      "b\xC3");
  const std::string text = writer.Take();
  EXPECT_EQ(text,
            "\"a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\"");
  EXPECT_TRUE(ParseJson(text).ok());

  // One U+FFFD for each byte that starts no valid sequence, also inside a
  // truncated or invalid multi-byte sequence.
  const std::string kReplacement = "\xEF\xBF\xBD";
  const std::pair<std::string_view, int> kCases[] = {
      {"\xE2\x82", 2}, {"\xF0\x9F\x98", 3}, {"\xED\xA0\x80", 3},
      {"\xC0\xAF", 2}, {"\xF5", 1},         {"\x80\xBF", 2},
  };
  for (const auto& [bytes, count] : kCases) {
    writer.String(std::string(bytes) + "x");
    std::string expected = "\"";
    for (int i = 0; i < count; ++i) expected += kReplacement;
    EXPECT_EQ(writer.Take(), expected + "x\"");
  }
}

TEST(JsonTest, AcceptsValidEdgeCases) {
  EXPECT_TRUE(ParseOrDie(" \t\r\n null \n").is_null());
  EXPECT_TRUE(ParseOrDie("true").as_bool());
  EXPECT_FALSE(ParseOrDie("false").as_bool());
  EXPECT_EQ(ParseOrDie("\"s\"").as_string(), "s");
  EXPECT_EQ(ParseOrDie("1E+2").as_number(), 100.0);
  EXPECT_EQ(ParseOrDie("1e-07").as_number(), 1e-7);
  EXPECT_EQ(ParseOrDie("-12.5e0").as_number(), -12.5);
  EXPECT_TRUE(ParseOrDie("[]").as_array().empty());
  EXPECT_TRUE(ParseOrDie("{}").as_object().empty());
  EXPECT_EQ(ParseOrDie("[ 1 , [ ] , { } ]").as_array().size(), 3u);
  EXPECT_EQ(ParseOrDie("\"\x7f\xF4\x8F\xBF\xBF\"").as_string(), "\x7f\xF4\x8F\xBF\xBF");
}

// Exact messages and positions, those of the earlier hand-written parser:
// nlohmann-json's own differ, and it stops on other bytes.
TEST(JsonTest, RejectsInvalidDocumentsWithLineAndColumn) {
  struct Case {
    std::string_view text;
    int line;
    int column;  // 1-based, counting bytes
    std::string_view what;
  };
  const Case kCases[] = {
#include "json_test_errors.inc"  // NOLINT(build/include)
  };
  for (const Case& c : kCases) {
    absl::StatusOr<JsonValue> parsed = ParseJson(c.text);
    ASSERT_FALSE(parsed.ok()) << "accepted: " << c.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("JSON parse error at line ", c.line, ", column ", c.column, ": ",
                           std::string(c.what)))
        << "for " << c.text;
  }

  // Every control character, in a value and in a member name.
  for (char c = 0; c < 0x20; ++c) {
    const std::string expected = absl::StrFormat(
        "JSON parse error at line 1, column 4: unescaped control character "
        "U+%04X in string",
        c);
    const std::string control(1, c);
    EXPECT_EQ(ParseJson(absl::StrCat("\"ab", control, "\"")).status().message(), expected);
    EXPECT_EQ(ParseJson(absl::StrCat("{\"k", control, "\":1}")).status().message(), expected);
  }
}

TEST(JsonTest, DepthLimit) {
  const std::string kTooDeep = "nesting deeper than 64 levels";
  const auto nested_arrays = [](int depth) {
    return std::string(static_cast<size_t>(depth), '[') +
           std::string(static_cast<size_t>(depth), ']');
  };
  EXPECT_TRUE(ParseJson(nested_arrays(kMaxJsonDepth)).ok());
  EXPECT_EQ(ParseJson(nested_arrays(kMaxJsonDepth + 1)).status().message(),
            "JSON parse error at line 1, column 65: " + kTooDeep);

  // Objects count alike; the error is at the opening brace.
  const auto nested_objects = [](int depth) {
    std::string text;
    for (int i = 0; i < depth; ++i) text += "{\"k\":";
    return text + "0" + std::string(static_cast<size_t>(depth), '}');
  };
  EXPECT_TRUE(ParseJson(nested_objects(kMaxJsonDepth)).ok());
  EXPECT_EQ(ParseJson(nested_objects(kMaxJsonDepth + 1)).status().message(),
            "JSON parse error at line 1, column 321: " + kTooDeep);

  // And both mixed, over lines; the deepest document writes back.
  const auto nested_mixed = [](int depth) {
    std::string text;
    for (int i = 0; i < depth; ++i) text += i % 2 == 0 ? "{\"k\":" : "[\n";
    text += "0";
    for (int i = depth - 1; i >= 0; --i) text += i % 2 == 0 ? "}" : "]";
    return text;
  };
  const JsonValue deepest = ParseOrDie(nested_mixed(kMaxJsonDepth));
  EXPECT_EQ(Compact(ParseOrDie(JsonValueToString(deepest, 2))), Compact(deepest));
  EXPECT_EQ(ParseJson(nested_mixed(kMaxJsonDepth + 1)).status().message(),
            "JSON parse error at line 33, column 1: " + kTooDeep);

  // Hostile depth fails fast, without deep recursion.
  EXPECT_EQ(ParseJson(std::string(1'000'000, '[')).status().message(),
            "JSON parse error at line 1, column 65: " + kTooDeep);
  std::string objects;
  for (int i = 0; i < 200'000; ++i) objects += "{\"k\":";
  EXPECT_EQ(ParseJson(objects).status().message(),
            "JSON parse error at line 1, column 321: " + kTooDeep);
}

TEST(JsonTest, SizeLimit) {
  std::string text(kMaxJsonBytes - 1, ' ');
  text += "1";
  EXPECT_TRUE(ParseJson(text).ok());
  text += " ";
  absl::StatusOr<JsonValue> parsed = ParseJson(text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(),
            "JSON parse error at line 1, column 1: input is 67108865 bytes, "
            "more than the limit of 67108864");
}

TEST(JsonTest, TruncatedDocumentsAreRejected) {
  const JsonValue full = ParseOrDie(kRealisticDocument);
  ASSERT_TRUE(full.is_object());
  for (const std::string& document :
       {std::string(kRealisticDocument), Compact(full), JsonValueToString(full, 2)}) {
    for (size_t length = 0; length < document.size(); ++length) {
      absl::StatusOr<JsonValue> parsed = ParseJson(std::string_view(document).substr(0, length));
      ASSERT_FALSE(parsed.ok()) << "accepted a prefix of length " << length;
      EXPECT_NE(parsed.status().message().find("column"), std::string_view::npos);
    }
    EXPECT_TRUE(ParseJson(document).ok());
  }
}

TEST(JsonTest, PrettyOutputReparsesToSameValue) {
  const JsonValue full = ParseOrDie(kRealisticDocument);
  const std::string compact = Compact(full);
  for (int indent : {1, 2, 4}) {
    const std::string pretty = JsonValueToString(full, indent);
    EXPECT_NE(pretty, compact);
    EXPECT_EQ(Compact(ParseOrDie(pretty)), compact);
  }
  EXPECT_EQ(Compact(ParseOrDie(compact)), compact);

  JsonWriter writer(2);
  writer.BeginObject();
  writer.Key("a");
  writer.Int(1);
  writer.Key("b");
  writer.BeginArray();
  writer.Bool(true);
  writer.Null();
  writer.EndArray();
  writer.Key("c");
  writer.BeginObject();
  writer.EndObject();
  writer.Key("d");
  writer.BeginArray();
  writer.EndArray();
  writer.EndObject();
  EXPECT_EQ(writer.Take(),
            "{\n"
            "  \"a\": 1,\n"
            "  \"b\": [\n"
            "    true,\n"
            "    null\n"
            "  ],\n"
            "  \"c\": {},\n"
            "  \"d\": []\n"
            "}");
}

TEST(JsonTest, CompactWriterOutput) {
  JsonWriter writer;
  writer.BeginArray();
  writer.Int(-3);
  writer.Number(2.5);
  writer.String("x");
  writer.BeginObject();
  writer.Key("k\"");
  writer.Bool(false);
  writer.EndObject();
  writer.EndArray();
  EXPECT_EQ(writer.Take(), R"([-3,2.5,"x",{"k\"":false}])");

  // Reusable after Take().
  writer.BeginObject();
  writer.EndObject();
  EXPECT_EQ(writer.Take(), "{}");
  writer.Null();
  EXPECT_EQ(writer.Take(), "null");
}

TEST(JsonTest, FindOnObjects) {
  const JsonValue doc = ParseOrDie(R"({"a": 1, "b": {"c": "d"}, "a": 2})");
  ASSERT_NE(doc.Find("a"), nullptr);
  EXPECT_EQ(doc.Find("a")->as_int64(), 1);  // first match
  ASSERT_NE(doc.Find("b"), nullptr);
  ASSERT_NE(doc.Find("b")->Find("c"), nullptr);
  EXPECT_EQ(doc.Find("b")->Find("c")->as_string(), "d");
  EXPECT_EQ(doc.Find("missing"), nullptr);
  EXPECT_EQ(doc.Find(""), nullptr);
  EXPECT_EQ(doc.Find("a")->Find("a"), nullptr);  // not an object
  EXPECT_EQ(ParseOrDie("[\"a\"]").Find("a"), nullptr);

  // Duplicates are kept, in document order.
  ASSERT_EQ(doc.as_object().size(), 3u);
  EXPECT_EQ(doc.as_object()[0].first, "a");
  EXPECT_EQ(doc.as_object()[1].first, "b");
  EXPECT_EQ(doc.as_object()[2].first, "a");
  EXPECT_EQ(doc.as_object()[2].second.as_int64(), 2);
  EXPECT_EQ(Compact(doc), R"({"a":1,"b":{"c":"d"},"a":2})");

  // Names equal once unescaped are duplicates too, kept as they come.
  const JsonValue escaped = ParseOrDie(R"({"a":1,"\u0061":2,"a":[]})");
  ASSERT_EQ(escaped.as_object().size(), 3u);
  EXPECT_EQ(escaped.as_object()[1].first, "a");
  EXPECT_EQ(Compact(escaped), R"({"a":1,"a":2,"a":[]})");
}

TEST(JsonTest, ConstructedValues) {
  JsonValue::Object members;
  members.emplace_back("n", JsonValue());
  members.emplace_back("b", JsonValue::Bool(true));
  members.emplace_back("x", JsonValue::Number(0.5));
  members.emplace_back("i", JsonValue::Int(std::numeric_limits<int64_t>::min()));
  members.emplace_back("s", JsonValue::String("t"));
  members.emplace_back("a", JsonValue::MakeArray({JsonValue::Number(-0.0), JsonValue()}));
  const JsonValue value = JsonValue::MakeObject(std::move(members));
  EXPECT_EQ(value.type(), JsonValue::Type::kObject);
  EXPECT_TRUE(value.Find("n")->is_null());
  EXPECT_TRUE(value.Find("b")->is_bool());
  EXPECT_TRUE(value.Find("x")->is_number());
  EXPECT_TRUE(value.Find("s")->is_string());
  EXPECT_TRUE(value.Find("a")->is_array());
  EXPECT_EQ(Compact(value), R"({"n":null,"b":true,"x":0.5,"i":-9223372036854775808,)"
                            R"("s":"t","a":[-0,null]})");
  EXPECT_EQ(Compact(ParseOrDie(Compact(value))), Compact(value));
}

TEST(JsonTest, WrongTypeAccessorsDoNotCrash) {
  const JsonValue number = JsonValue::Number(1);
  EXPECT_DEBUG_DEATH(EXPECT_TRUE(number.as_string().empty()), "is_string");
  EXPECT_DEBUG_DEATH(EXPECT_TRUE(number.as_array().empty()), "is_array");
  EXPECT_DEBUG_DEATH(EXPECT_TRUE(number.as_object().empty()), "is_object");
  EXPECT_DEBUG_DEATH(EXPECT_FALSE(number.as_bool()), "is_bool");
  EXPECT_DEBUG_DEATH(EXPECT_EQ(JsonValue().as_number(), 0.0), "is_number");
}

TEST(JsonTest, WriterMisuseDoesNotCrash) {
  EXPECT_DEBUG_DEATH(
      {
        JsonWriter writer;
        writer.Key("k");
        writer.Int(1);
        writer.Take();
      },
      "outside an object");
  EXPECT_DEBUG_DEATH(
      {
        JsonWriter writer;
        writer.BeginArray();
        writer.EndObject();
        writer.EndArray();
        writer.EndArray();
        writer.Take();
      },
      "unbalanced");
  EXPECT_DEBUG_DEATH(
      {
        JsonWriter writer;
        writer.BeginObject();
        writer.Int(1);
        writer.EndObject();
        writer.Take();
      },
      "without Key");
}

TEST(JsonTest, RandomInputsDoNotCrash) {
  std::mt19937_64 rng(12345);
  const std::string kAlphabet = "{}[]:,\"\\ \n-+.0123456789eEtrufalsn/u\xC3\xA9";
  const std::string base(kRealisticDocument);
  auto check = [](std::string_view text) {
    absl::StatusOr<JsonValue> parsed = ParseJson(text);
    if (parsed.ok()) {
      // Whatever is accepted writes back to something that reads back the
      // same.
      const std::string compact = JsonValueToString(*parsed);
      absl::StatusOr<JsonValue> again = ParseJson(compact);
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_EQ(JsonValueToString(*again), compact);
    } else {
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    }
  };
  for (int i = 0; i < 20000; ++i) {
    // Random strings: raw bytes or JSON-ish characters.
    std::string text(rng() % 64, '\0');
    const bool raw = rng() % 2 == 0;
    for (char& c : text) {
      c = raw ? static_cast<char>(rng() & 0xFF) : kAlphabet[rng() % kAlphabet.size()];
    }
    check(text);

    // Mutations of a valid document.
    std::string mutated = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !mutated.empty(); ++e) {
      const size_t pos = rng() % mutated.size();
      const char c =
          rng() % 2 == 0 ? static_cast<char>(rng() & 0xFF) : kAlphabet[rng() % kAlphabet.size()];
      switch (rng() % 4) {
        case 0: mutated[pos] = c; break;
        case 1: mutated.insert(mutated.begin() + static_cast<std::ptrdiff_t>(pos), c); break;
        case 2: mutated.erase(pos, 1 + rng() % 8); break;
        default: mutated.insert(pos, mutated.substr(rng() % mutated.size(), 16)); break;
      }
    }
    check(mutated);
  }
}

}  // namespace
}  // namespace gpuscope::internal
