// JsonOut: the visitor that writes a declaration of fields (summary_fields.h,
// report_fields.h) as JSON, through a JsonWriter. One writer for every value
// gpuscope encodes, so that the summary, the findings and the doctor's report
// spell numbers, strings and nulls alike.

#ifndef GPUSCOPE_LIB_EXPORT_JSON_OUT_H_
#define GPUSCOPE_LIB_EXPORT_JSON_OUT_H_

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/json.h"
#include "export/summary_fields.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/doctor.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

class JsonOut {
 public:
  explicit JsonOut(JsonWriter& w) : w_(w) {}

  void Int(std::string_view key, int64_t v, Range, bool = true) {
    w_.Key(key);
    w_.Int(v);
  }
  void Number(std::string_view key, double v, Range, bool = true) {
    w_.Key(key);
    w_.Number(v);
  }
  void Bool(std::string_view key, bool v, bool = true) {
    w_.Key(key);
    w_.Bool(v);
  }
  void String(std::string_view key, const std::string& v) {
    w_.Key(key);
    w_.String(v);
  }
  void PhaseName(std::string_view key, const std::string& v) { String(key, v); }
  void Source(std::string_view key, gpuscope::Source v) {
    w_.Key(key);
    w_.String(SourceName(v));
  }
  void Severity(std::string_view key, gpuscope::Severity v) {
    w_.Key(key);
    w_.String(SeverityName(v));
  }
  void CheckStatus(std::string_view key, gpuscope::CheckStatus v) {
    w_.Key(key);
    w_.String(CheckStatusName(v));
  }
  void Optional(std::string_view key, const std::optional<double>& v, Range,
                bool /*required*/ = true) {
    w_.Key(key);
    if (v.has_value()) {
      w_.Number(*v);
    } else {
      w_.Null();
    }
  }
  void NanNumber(std::string_view key, double v, Range, bool /*required*/ = true) {
    w_.Key(key);
    if (std::isnan(v)) {
      w_.Null();
    } else {
      w_.Number(v);
    }
  }
  void Strings(std::string_view key, const std::vector<std::string>& v) {
    w_.Key(key);
    w_.BeginArray();
    for (const std::string& x : v) w_.String(x);
    w_.EndArray();
  }
  void Ints(std::string_view key, const std::vector<int>& v, Range) {
    w_.Key(key);
    w_.BeginArray();
    for (int x : v) w_.Int(x);
    w_.EndArray();
  }
  void NumberMap(std::string_view key, const std::map<std::string, double>& m, Range range) {
    w_.Key(key);
    w_.BeginObject();
    for (const auto& [k, v] : m) Number(k, v, range);
    w_.EndObject();
  }
  void NamedNumbers(std::string_view key, const std::vector<std::pair<std::string, double>>& v,
                    Range range) {
    w_.Key(key);
    w_.BeginObject();
    for (const auto& [k, x] : v) Number(k, x, range);
    w_.EndObject();
  }
  void StringMap(std::string_view key, const std::map<std::string, std::string>& m) {
    w_.Key(key);
    w_.BeginObject();
    for (const auto& [k, v] : m) String(k, v);
    w_.EndObject();
  }
  template <typename T, typename Fn>
  void Object(std::string_view key, const T& value, Fn fields, bool = true) {
    w_.Key(key);
    w_.BeginObject();
    fields(*this, value);
    w_.EndObject();
  }
  template <typename T, typename Fn>
  void OptionalObject(std::string_view key, const std::optional<T>& value, Fn fields) {
    if (!value.has_value()) {
      w_.Key(key);
      w_.Null();
      return;
    }
    Object(key, *value, fields);
  }
  template <typename T, typename Fn>
  void Array(std::string_view key, const std::vector<T>& values, Fn fields, bool = true) {
    w_.Key(key);
    w_.BeginArray();
    for (const T& value : values) {
      w_.BeginObject();
      fields(*this, value);
      w_.EndObject();
    }
    w_.EndArray();
  }

 private:
  JsonWriter& w_;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_EXPORT_JSON_OUT_H_
