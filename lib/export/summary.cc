#include "gpuscope/summary.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/json.h"
#include "base/strings.h"
#include "base/text.h"
#include "core/phase_table.h"
#include "core/summarize.h"
#include "export/json_out.h"
#include "export/summary_fields.h"
#include "gpuscope/phase.h"
#include "gpuscope/ranks.h"
#include "gpuscope/report.h"

namespace gpuscope {

namespace {

using internal::JsonOut;
using internal::JsonValue;
using internal::JsonWriter;
using internal::kAnyInteger;
using internal::kCount;
using internal::Range;

// The fields and their ranges are declared once, in summary_fields.h:
// JsonOut (export/json_out.h) writes them, JsonIn below reads them.

// ---- Reading. The first failure wins and names its field as a path
// ("phases[0].time.p95").

class JsonIn {
 public:
  JsonIn(const JsonValue& obj, std::string path, absl::Status* status)
      : obj_(obj), path_(std::move(path)), status_(status) {}

  void Int(std::string_view key, int64_t& out, Range range, bool required = true) {
    if (const JsonValue* v = Get(key, required)) {
      std::optional<int64_t> i = internal::AsInt64(*v);
      if (!i.has_value()) return Fail(key, "must be an integer");
      if (!InRange(key, static_cast<double>(*i), range)) return;
      out = *i;
    }
  }
  void Int(std::string_view key, int& out, Range range, bool required = true) {
    int64_t wide = out;
    Int(key, wide, range, required);
    if (!status_->ok()) return;
    if (wide < INT32_MIN || wide > INT32_MAX) return Fail(key, "is out of range");
    out = static_cast<int>(wide);
  }
  void Number(std::string_view key, double& out, Range range, bool required = true) {
    if (const JsonValue* v = Get(key, required)) {
      if (!v->is_number()) return Fail(key, "must be a number");
      if (InRange(key, v->get<double>(), range)) out = v->get<double>();
    }
  }
  void Bool(std::string_view key, bool& out, bool required = true) {
    if (const JsonValue* v = Get(key, required)) {
      if (v->is_boolean()) {
        out = v->get<bool>();
      } else {
        Fail(key, "must be true or false");
      }
    }
  }
  void String(std::string_view key, std::string& out) {
    if (const JsonValue* v = Get(key)) {
      if (v->is_string()) {
        out = v->get_ref<const std::string&>();
      } else {
        Fail(key, "must be a string");
      }
    }
  }
  // A phase name as sessions accept them (ValidatePhaseName), or "other".
  void PhaseName(std::string_view key, std::string& out) {
    String(key, out);
    if (status_->ok() && out != kOtherPhaseName && internal::PhaseNameProblem(out) != nullptr) {
      Fail(key,
           absl::StrCat("is not a phase name a session accepts (", internal::PhaseNameProblem(out),
                        "): '", internal::TerminalSafe(out), "'"));
    }
  }
  void Source(std::string_view key, gpuscope::Source& out) {
    std::string name;
    String(key, name);
    if (!status_->ok()) return;
    for (gpuscope::Source s : {Source::kHost, Source::kEvents, Source::kCupti}) {
      if (SourceName(s) == name) {
        out = s;
        return;
      }
    }
    Fail(key, "must be \"host\", \"events\" or \"cupti\"");
  }
  void Optional(std::string_view key, std::optional<double>& out, Range range,
                bool required = true) {
    if (const JsonValue* v = Get(key, required)) {
      if (v->is_null()) {
        out.reset();
      } else if (!v->is_number()) {
        Fail(key, "must be a number or null");
      } else if (InRange(key, v->get<double>(), range)) {
        out = v->get<double>();
      }
    }
  }
  void NanNumber(std::string_view key, double& out, Range range, bool required = true) {
    if (const JsonValue* v = Get(key, required)) {
      if (v->is_null()) {
        out = std::numeric_limits<double>::quiet_NaN();
      } else if (!v->is_number()) {
        Fail(key, "must be a number or null");
      } else if (InRange(key, v->get<double>(), range)) {
        out = v->get<double>();
      }
    }
  }
  void Strings(std::string_view key, std::vector<std::string>& out) {
    const JsonValue* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(key, "must be an array of strings");
    out.clear();
    for (const JsonValue& x : *v) {
      if (!x.is_string()) return Fail(key, "must be an array of strings");
      out.push_back(x.get_ref<const std::string&>());
    }
  }
  void Ints(std::string_view key, std::vector<int>& out, Range range) {
    const JsonValue* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(key, "must be an array of integers");
    out.clear();
    for (const JsonValue& x : *v) {
      if (!x.is_number() || x.get<double>() != std::floor(x.get<double>())) {
        return Fail(key, "must be an array of integers");
      }
      if (!InRange(key, x.get<double>(), range) || x.get<double>() > 2147483647.0) return;
      out.push_back(static_cast<int>(x.get<double>()));
    }
  }
  // Keys: phase names, "other" or "launch".
  void NumberMap(std::string_view key, std::map<std::string, double>& out, Range range) {
    const JsonValue* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_object()) return Fail(key, "must be an object");
    for (const auto& [k, value] : v->items()) {
      const std::string field = absl::StrCat(internal::ToAbsl(key), ".", internal::TerminalSafe(k));
      if (!value.is_number()) return Fail(field, "must be a number");
      if (k != kOtherPhaseName && k != kLaunchCauseName &&
          internal::PhaseNameProblem(k) != nullptr) {
        return Fail(field, "is not a phase name a session accepts");
      }
      if (!InRange(field, value.get<double>(), range)) return;
      out[k] = value.get<double>();
    }
  }
  template <typename T, typename Fn>
  void Object(std::string_view key, T& value, Fn fields, bool required = true) {
    const JsonValue* v = Get(key, required);
    if (v == nullptr) return;
    if (!v->is_object()) return Fail(key, "must be an object");
    JsonIn sub(*v, absl::StrCat(path_, internal::ToAbsl(key), "."), status_);
    fields(sub, value);
  }
  // Optional on read; null or absent: nullopt.
  template <typename T, typename Fn>
  void OptionalObject(std::string_view key, std::optional<T>& value, Fn fields) {
    const JsonValue* v = Get(key, /*required=*/false);
    if (v == nullptr || v->is_null()) {
      value.reset();
      return;
    }
    if (!v->is_object()) return Fail(key, "must be an object or null");
    JsonIn sub(*v, absl::StrCat(path_, internal::ToAbsl(key), "."), status_);
    fields(sub, value.emplace());
  }
  template <typename T, typename Fn>
  void Array(std::string_view key, std::vector<T>& values, Fn fields, bool required = true) {
    const JsonValue* v = Get(key, required);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(key, "must be an array");
    values.clear();
    for (size_t i = 0; i < v->size() && status_->ok(); ++i) {
      const JsonValue& item = (*v)[i];
      const std::string item_path = absl::StrCat(path_, internal::ToAbsl(key), "[", i, "]");
      if (!item.is_object()) {
        *status_ = absl::InvalidArgumentError(
            absl::StrCat("gpuscope summary JSON: ", item_path, " must be an object"));
        return;
      }
      JsonIn sub(item, absl::StrCat(item_path, "."), status_);
      fields(sub, values.emplace_back());
    }
  }

 private:
  const JsonValue* Get(std::string_view key, bool required = true) {
    if (!status_->ok()) return nullptr;
    const JsonValue* v = internal::Find(obj_, key);
    if (v == nullptr && required) Fail(key, "is missing");
    return v;
  }
  bool InRange(std::string_view key, double v, Range range) {
    if (v >= range.lo && v <= range.hi) return true;  // false for NaN too
    Fail(key, absl::StrCat("is ", v, ", outside ", range.lo, " .. ", range.hi,
                           ": this is not a summary gpuscope wrote (edited or corrupt?)"));
    return false;
  }
  void Fail(std::string_view key, std::string_view what) {
    if (!status_->ok()) return;
    *status_ = absl::InvalidArgumentError(absl::StrCat("gpuscope summary JSON: field '", path_,
                                                       internal::ToAbsl(key), "' ",
                                                       internal::ToAbsl(what)));
  }

  const JsonValue& obj_;
  const std::string path_;
  absl::Status* const status_;
};

}  // namespace

std::string ToJson(const Summary& s) {
  JsonWriter w(/*indent=*/2);
  JsonOut out(w);
  w.BeginObject();
  out.Int("schema_version", kJsonSchemaVersion, kCount);
  internal::SummaryFields(out, s);
  w.EndObject();
  std::string text = w.Take();
  text.push_back('\n');
  return text;
}

absl::StatusOr<Summary> SummaryFromJson(std::string_view json) {
  absl::StatusOr<JsonValue> parsed = internal::ParseJson(json);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a gpuscope summary: ", parsed.status().message()));
  }
  return internal::SummaryFromJsonValue(*parsed);
}

template <typename T>
std::string internal::PartToJson(const T& part) {
  JsonWriter w;
  JsonOut out(w);
  w.BeginObject();
  internal::FieldsOf(out, part);
  w.EndObject();
  return w.Take();
}

template <typename T>
absl::StatusOr<T> internal::PartFromJson(std::string_view json) {
  absl::StatusOr<JsonValue> parsed = internal::ParseJson(json);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object())
    return absl::InvalidArgumentError("gpuscope summary JSON: a part is not an object");
  absl::Status status;
  JsonIn in(*parsed, "", &status);
  T part;
  internal::FieldsOf(in, part);
  if (!status.ok()) return status;
  return part;
}

// The parts the Python views pickle.
template std::string internal::PartToJson<Quantiles>(const Quantiles&);
template std::string internal::PartToJson<GpuMemory>(const GpuMemory&);
template absl::StatusOr<GpuMemory> internal::PartFromJson<GpuMemory>(std::string_view);
template std::string internal::PartToJson<Stall>(const Stall&);
template absl::StatusOr<Stall> internal::PartFromJson<Stall>(std::string_view);
template std::string internal::PartToJson<OomEvent>(const OomEvent&);
template absl::StatusOr<OomEvent> internal::PartFromJson<OomEvent>(std::string_view);
template std::string internal::PartToJson<MemoryStats>(const MemoryStats&);
template absl::StatusOr<MemoryStats> internal::PartFromJson<MemoryStats>(std::string_view);
template absl::StatusOr<Quantiles> internal::PartFromJson<Quantiles>(std::string_view);
template std::string internal::PartToJson<OverheadStats>(const OverheadStats&);
template absl::StatusOr<OverheadStats> internal::PartFromJson<OverheadStats>(std::string_view);
template std::string internal::PartToJson<WarmupStats>(const WarmupStats&);
template absl::StatusOr<WarmupStats> internal::PartFromJson<WarmupStats>(std::string_view);
template std::string internal::PartToJson<KernelStats>(const KernelStats&);
template absl::StatusOr<KernelStats> internal::PartFromJson<KernelStats>(std::string_view);
template std::string internal::PartToJson<PhaseStats>(const PhaseStats&);
template absl::StatusOr<PhaseStats> internal::PartFromJson<PhaseStats>(std::string_view);
template std::string internal::PartToJson<EfficiencyStats>(const EfficiencyStats&);
template absl::StatusOr<EfficiencyStats> internal::PartFromJson<EfficiencyStats>(std::string_view);
template std::string internal::PartToJson<DeviceStats>(const DeviceStats&);
template absl::StatusOr<DeviceStats> internal::PartFromJson<DeviceStats>(std::string_view);
template std::string internal::PartToJson<ActivityStats>(const ActivityStats&);
template absl::StatusOr<ActivityStats> internal::PartFromJson<ActivityStats>(std::string_view);
template std::string internal::PartToJson<GpuTelemetry>(const GpuTelemetry&);
template absl::StatusOr<GpuTelemetry> internal::PartFromJson<GpuTelemetry>(std::string_view);
template std::string internal::PartToJson<TelemetryStats>(const TelemetryStats&);
template absl::StatusOr<TelemetryStats> internal::PartFromJson<TelemetryStats>(std::string_view);
template std::string internal::PartToJson<PeriodicSpike>(const PeriodicSpike&);
template absl::StatusOr<PeriodicSpike> internal::PartFromJson<PeriodicSpike>(std::string_view);
template std::string internal::PartToJson<RankIdentity>(const RankIdentity&);
template absl::StatusOr<RankIdentity> internal::PartFromJson<RankIdentity>(std::string_view);
template std::string internal::PartToJson<RankPhase>(const RankPhase&);
template absl::StatusOr<RankPhase> internal::PartFromJson<RankPhase>(std::string_view);
template std::string internal::PartToJson<RankRecord>(const RankRecord&);
template absl::StatusOr<RankRecord> internal::PartFromJson<RankRecord>(std::string_view);
template std::string internal::PartToJson<Straggler>(const Straggler&);
template absl::StatusOr<Straggler> internal::PartFromJson<Straggler>(std::string_view);
template std::string internal::PartToJson<RanksStats>(const RanksStats&);
template absl::StatusOr<RanksStats> internal::PartFromJson<RanksStats>(std::string_view);

absl::StatusOr<Summary> internal::SummaryFromJsonValue(const JsonValue& doc) {
  if (!doc.is_object()) {
    return absl::InvalidArgumentError("not a gpuscope summary: the document is not a JSON object");
  }
  absl::Status status;
  JsonIn in(doc, "", &status);
  int64_t schema = 0;
  in.Int("schema_version", schema, kAnyInteger);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not a gpuscope summary: ", status.message()));
  }
  if (schema < 1 || schema > kJsonSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gpuscope summary JSON has schema_version ", schema, "; this gpuscope reads versions 1 to ",
        kJsonSchemaVersion, ": re-save it with a matching gpuscope version"));
  }
  Summary s;
  internal::SummaryFields(in, s);
  if (!status.ok()) return status;
  if (absl::Status consistent = internal::CheckConsistency(s); !consistent.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpuscope summary JSON: ", consistent.message(),
                     ": this is not a summary gpuscope wrote (edited or corrupt?)"));
  }
  return s;
}

}  // namespace gpuscope
