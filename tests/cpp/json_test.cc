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

std::string Compact(const JsonValue& value) { return value.dump(); }

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
  EXPECT_EQ(std::bit_cast<uint64_t>(parsed->get<double>()), std::bit_cast<uint64_t>(value)) << text;
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
  const JsonValue* array = Find(parsed, "values");
  ASSERT_NE(array, nullptr);
  ASSERT_EQ(array->size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint64_t>((*array)[i].get<double>()),
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
    EXPECT_TRUE(parsed.is_number_integer()) << text;
    EXPECT_EQ(AsInt64(parsed), value);
    EXPECT_EQ(parsed.get<double>(), static_cast<double>(value));
    // Writing the parsed value back keeps it exact.
    EXPECT_EQ(Compact(parsed), text);
    EXPECT_EQ(AsInt64(JsonValue(value)), value);
  }
}

TEST(JsonTest, AsInt64OnlyForExactIntegers) {
  EXPECT_EQ(AsInt64(ParseOrDie("1e3")), 1000);
  EXPECT_EQ(AsInt64(ParseOrDie("2.0")), 2);
  EXPECT_EQ(AsInt64(ParseOrDie("-0")), 0);
  EXPECT_EQ(AsInt64(ParseOrDie("9007199254740992.0")), int64_t{9007199254740992});
  EXPECT_EQ(AsInt64(ParseOrDie("1.5")), std::nullopt);
  EXPECT_EQ(AsInt64(ParseOrDie("1e19")), std::nullopt);
  EXPECT_EQ(AsInt64(ParseOrDie("9007199254740994.0")), std::nullopt);
  EXPECT_EQ(AsInt64(ParseOrDie("9223372036854775808")), std::nullopt);
  EXPECT_EQ(AsInt64(ParseOrDie("-9223372036854775809")), std::nullopt);
  EXPECT_EQ(AsInt64(ParseOrDie("\"1\"")), std::nullopt);
  EXPECT_EQ(AsInt64(ParseOrDie("null")), std::nullopt);
  EXPECT_EQ(AsInt64(JsonValue(1e300)), std::nullopt);
  EXPECT_EQ(AsInt64(JsonValue(-4096.0)), -4096);
  // Unsigned values built in code: exact while they fit an int64_t.
  EXPECT_EQ(AsInt64(JsonValue(uint64_t{5})), 5);
  EXPECT_EQ(AsInt64(JsonValue(std::numeric_limits<uint64_t>::max())), std::nullopt);
  EXPECT_EQ(AsInt64(JsonValue::array()), std::nullopt);
}

TEST(JsonTest, NegativeZeroKeepsItsSign) {
  // nlohmann's own parse reads "-0" as the integer 0.
  const JsonValue parsed = ParseOrDie("-0");
  EXPECT_TRUE(parsed.is_number_float());
  EXPECT_TRUE(std::signbit(parsed.get<double>()));
  EXPECT_TRUE(std::signbit(ParseOrDie(Compact(parsed)).get<double>()));
  EXPECT_TRUE(std::signbit(ParseOrDie("-0.0e5").get<double>()));
  EXPECT_TRUE(ParseOrDie("0").is_number_integer());
  EXPECT_FALSE(std::signbit(ParseOrDie("0").get<double>()));
  // Inside containers and followed by other bytes.
  for (std::string_view text : {"[-0]", "[0, -0]", "[-0\n]", "-0 "}) {
    const JsonValue doc = ParseOrDie(text);
    EXPECT_TRUE(std::signbit((doc.is_array() ? doc.back() : doc).get<double>())) << text;
  }
  const JsonValue mixed = ParseOrDie("[0,-0,0]");
  EXPECT_FALSE(std::signbit(mixed[0].get<double>()));
  EXPECT_TRUE(std::signbit(mixed[1].get<double>()));
  EXPECT_FALSE(std::signbit(mixed[2].get<double>()));
  EXPECT_TRUE(std::signbit(Find(ParseOrDie(R"({"a":-0,"b":0})"), "a")->get<double>()));
}

TEST(JsonTest, IntegersBeyondInt64BecomeDoubles) {
  struct Case {
    std::string_view text;
    double value;
  };
  const Case kCases[] = {
      {"9223372036854775808", 9223372036854775808.0},
      {"18446744073709551615", 18446744073709551616.0},
      {"18446744073709551616", 18446744073709551616.0},
      {"-9223372036854775809", -9223372036854775808.0},
      {"123456789012345678901234567890", 1.2345678901234568e29},
  };
  for (const Case& c : kCases) {
    const JsonValue parsed = ParseOrDie(c.text);
    EXPECT_TRUE(parsed.is_number_float()) << c.text;
    EXPECT_EQ(parsed.get<double>(), c.value) << c.text;
    EXPECT_EQ(AsInt64(parsed), std::nullopt) << c.text;
    EXPECT_EQ(ParseOrDie(Compact(parsed)), parsed) << c.text;
  }
}

TEST(JsonTest, UnderflowBecomesSignedZeroAndOverflowIsRejected) {
  const JsonValue tiny = ParseOrDie("1e-400");
  EXPECT_EQ(tiny.get<double>(), 0.0);
  EXPECT_FALSE(std::signbit(tiny.get<double>()));
  const JsonValue negative_tiny = ParseOrDie("-0.00000123e-330");
  EXPECT_EQ(negative_tiny.get<double>(), 0.0);
  EXPECT_TRUE(std::signbit(negative_tiny.get<double>()));
  EXPECT_EQ(ParseOrDie("1e-99999999999999999999").get<double>(), 0.0);

  for (std::string_view text :
       {"1e400", "-1e309", "1.8e308", "100000e99999999999999999", "[1e999]"}) {
    absl::StatusOr<JsonValue> parsed = ParseJson(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.status().message().find("too large"), std::string_view::npos)
        << parsed.status();
  }
  EXPECT_EQ(ParseOrDie("1.7976931348623157e308").get<double>(), std::numeric_limits<double>::max());
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
    EXPECT_EQ(parsed.get<std::string>(), s) << text;
  }

  JsonWriter writer;
  writer.String(std::string("\"\\\n\t\r\b\f\x01\x1f\x7f/\0", 12));
  EXPECT_EQ(writer.Take(), R"("\"\\\n\t\r\b\f\u0001\u001f)"
                           "\x7f"
                           R"(/\u0000")");
}

TEST(JsonTest, UnicodeEscapesDecodeToUtf8) {
  EXPECT_EQ(ParseOrDie(R"("\u00e9")").get<std::string>(), "\xC3\xA9");
  EXPECT_EQ(ParseOrDie(R"("\u20AC")").get<std::string>(), "\xE2\x82\xAC");
  EXPECT_EQ(ParseOrDie(R"("\ud83d\ude00")").get<std::string>(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(ParseOrDie(R"("\uDBFF\uDFFF")").get<std::string>(), "\xF4\x8F\xBF\xBF");
  EXPECT_EQ(ParseOrDie(R"("\u0041\u0000")").get<std::string>(), std::string("A\0", 2));
  EXPECT_EQ(ParseOrDie(R"("\/\"\\\b\f\n\r\t")").get<std::string>(), "/\"\\\b\f\n\r\t");
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
  EXPECT_TRUE(ParseOrDie("true").get<bool>());
  EXPECT_FALSE(ParseOrDie("false").get<bool>());
  EXPECT_EQ(ParseOrDie("\"s\"").get<std::string>(), "s");
  EXPECT_EQ(ParseOrDie("1E+2").get<double>(), 100.0);
  EXPECT_EQ(ParseOrDie("1e-07").get<double>(), 1e-7);
  EXPECT_EQ(ParseOrDie("-12.5e0").get<double>(), -12.5);
  EXPECT_TRUE(ParseOrDie("[]").empty());
  EXPECT_TRUE(ParseOrDie("[]").is_array());
  EXPECT_TRUE(ParseOrDie("{}").empty());
  EXPECT_TRUE(ParseOrDie("{}").is_object());
  EXPECT_EQ(ParseOrDie("[ 1 , [ ] , { } ]").size(), 3u);
  EXPECT_EQ(ParseOrDie("\"\x7f\xF4\x8F\xBF\xBF\"").get<std::string>(), "\x7f\xF4\x8F\xBF\xBF");
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
  EXPECT_EQ(ParseOrDie(deepest.dump(2)), deepest);
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
       {std::string(kRealisticDocument), Compact(full), full.dump(2)}) {
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
    const std::string pretty = full.dump(indent);
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
  ASSERT_NE(Find(doc, "a"), nullptr);
  EXPECT_EQ(AsInt64(*Find(doc, "a")), 1);  // the first
  ASSERT_NE(Find(doc, "b"), nullptr);
  ASSERT_NE(Find(*Find(doc, "b"), "c"), nullptr);
  EXPECT_EQ(Find(*Find(doc, "b"), "c")->get<std::string>(), "d");
  EXPECT_EQ(Find(doc, "missing"), nullptr);
  EXPECT_EQ(Find(doc, ""), nullptr);
  EXPECT_EQ(Find(*Find(doc, "a"), "a"), nullptr);  // not an object
  EXPECT_EQ(Find(ParseOrDie("[\"a\"]"), "a"), nullptr);

  // Of duplicates the first stays; members keep document order.
  ASSERT_EQ(doc.size(), 2u);
  EXPECT_EQ(doc.begin().key(), "a");
  EXPECT_EQ(Compact(doc), R"({"a":1,"b":{"c":"d"}})");

  // Names equal once unescaped are duplicates too.
  const JsonValue escaped = ParseOrDie(R"({"a":1,"\u0061":2,"a":[]})");
  EXPECT_EQ(Compact(escaped), R"({"a":1})");
  EXPECT_EQ(Compact(ParseOrDie(R"({"z":{"y":1,"y":2},"x":[{"w":3,"w":4}],"z":5})")),
            R"({"z":{"y":1},"x":[{"w":3}]})");
}

// nlohmann's ordered_json looks members up one by one; the parser keeps its
// own index of names so that a hostile object of many members, distinct or
// all the same, reads in linear time (quadratic would run for minutes here).
TEST(JsonTest, ObjectsOfManyMembers) {
  constexpr int kMembers = 300'000;
  std::string distinct = "{";
  std::string same = "{";
  for (int i = 0; i < kMembers; ++i) {
    absl::StrAppend(&distinct, i == 0 ? "" : ",", "\"k", i, "\":", i);
    absl::StrAppend(&same, i == 0 ? "" : ",", "\"k\":", i);
  }
  distinct += "}";
  same += "}";
  const JsonValue many = ParseOrDie(distinct);
  ASSERT_EQ(many.size(), static_cast<size_t>(kMembers));
  EXPECT_EQ(AsInt64(*Find(many, "k0")), 0);
  EXPECT_EQ(AsInt64(*Find(many, absl::StrCat("k", kMembers - 1))), kMembers - 1);
  const JsonValue one = ParseOrDie(same);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(AsInt64(*Find(one, "k")), 0);
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
      const std::string compact = parsed->dump();
      absl::StatusOr<JsonValue> again = ParseJson(compact);
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_EQ(again->dump(), compact);
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
