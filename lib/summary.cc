#include "gpuscope/summary.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/json.h"
#include "util/strings.h"

namespace gpuscope {

std::string_view SourceName(Source source) {
  switch (source) {
    case Source::kHost: return "host";
    case Source::kEvents: return "events";
    case Source::kCupti: return "cupti";
  }
  return "host";
}

const PhaseStats* Summary::FindPhase(std::string_view name) const {
  for (const PhaseStats& p : phases) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

namespace {

using internal::JsonValue;
using internal::JsonWriter;

// ---- Writing.

void WriteQuantiles(JsonWriter& w, const Quantiles& q) {
  w.BeginObject();
  w.Key("count"); w.Int(q.count);
  w.Key("mean"); w.Number(q.mean);
  w.Key("stddev"); w.Number(q.stddev);
  w.Key("min"); w.Number(q.min);
  w.Key("max"); w.Number(q.max);
  w.Key("p50"); w.Number(q.p50);
  w.Key("p90"); w.Number(q.p90);
  w.Key("p95"); w.Number(q.p95);
  w.Key("p99"); w.Number(q.p99);
  w.EndObject();
}

void WriteOptional(JsonWriter& w, const std::optional<double>& v) {
  if (v.has_value()) {
    w.Number(*v);
  } else {
    w.Null();
  }
}

// ---- Reading. Each reader names the field it failed on, as a path.

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  absl::Status status() const { return status_; }

  const JsonValue* Field(const JsonValue& obj, std::string_view key) {
    if (!status_.ok()) return nullptr;
    const JsonValue* v = obj.Find(key);
    if (v == nullptr) Fail(key, "is missing");
    return v;
  }
  void Number(const JsonValue& obj, std::string_view key, double* out) {
    const JsonValue* v = Field(obj, key);
    if (v == nullptr) return;
    if (!v->is_number()) return Fail(key, "must be a number");
    *out = v->as_number();
  }
  void Int(const JsonValue& obj, std::string_view key, int64_t* out) {
    const JsonValue* v = Field(obj, key);
    if (v == nullptr) return;
    std::optional<int64_t> i = v->is_number() ? v->as_int64() : std::nullopt;
    if (!i.has_value()) return Fail(key, "must be an integer");
    *out = *i;
  }
  void Bool(const JsonValue& obj, std::string_view key, bool* out) {
    const JsonValue* v = Field(obj, key);
    if (v == nullptr) return;
    if (!v->is_bool()) return Fail(key, "must be true or false");
    *out = v->as_bool();
  }
  void String(const JsonValue& obj, std::string_view key, std::string* out) {
    const JsonValue* v = Field(obj, key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(key, "must be a string");
    *out = v->as_string();
  }
  void Optional(const JsonValue& obj, std::string_view key, std::optional<double>* out) {
    const JsonValue* v = Field(obj, key);
    if (v == nullptr) return;
    if (v->is_null()) {
      out->reset();
    } else if (v->is_number()) {
      *out = v->as_number();
    } else {
      Fail(key, "must be a number or null");
    }
  }
  const JsonValue* Object(const JsonValue& obj, std::string_view key) {
    const JsonValue* v = Field(obj, key);
    if (v != nullptr && !v->is_object()) {
      Fail(key, "must be an object");
      return nullptr;
    }
    return v;
  }
  const JsonValue* Array(const JsonValue& obj, std::string_view key) {
    const JsonValue* v = Field(obj, key);
    if (v != nullptr && !v->is_array()) {
      Fail(key, "must be an array");
      return nullptr;
    }
    return v;
  }
  void Quantiles(const JsonValue& obj, std::string_view key, gpuscope::Quantiles* q) {
    const JsonValue* v = Object(obj, key);
    if (v == nullptr) return;
    Reader sub(absl::StrCat(path_, ToAbsl(key), "."));
    sub.Int(*v, "count", &q->count);
    sub.Number(*v, "mean", &q->mean);
    sub.Number(*v, "stddev", &q->stddev);
    sub.Number(*v, "min", &q->min);
    sub.Number(*v, "max", &q->max);
    sub.Number(*v, "p50", &q->p50);
    sub.Number(*v, "p90", &q->p90);
    sub.Number(*v, "p95", &q->p95);
    sub.Number(*v, "p99", &q->p99);
    Merge(sub);
  }
  void Merge(const Reader& sub) {
    if (status_.ok() && !sub.status_.ok()) status_ = sub.status_;
  }
  void Fail(std::string_view key, std::string_view what) {
    if (!status_.ok()) return;
    status_ = absl::InvalidArgumentError(absl::StrCat("gpuscope summary JSON: field '", path_,
                                                      ToAbsl(key), "' ", ToAbsl(what)));
  }
  const std::string& path() const { return path_; }

 private:
  static absl::string_view ToAbsl(std::string_view s) { return internal::ToAbsl(s); }

  std::string path_;
  absl::Status status_;
};

}  // namespace

std::string ToJson(const Summary& s) {
  JsonWriter w(/*indent=*/2);
  w.BeginObject();
  w.Key("schema_version"); w.Int(kJsonSchemaVersion);
  w.Key("version"); w.String(s.version);
  w.Key("source"); w.String(SourceName(s.source));
  w.Key("source_reason"); w.String(s.source_reason);
  w.Key("window"); w.Int(s.window);
  w.Key("steps"); w.Int(s.steps);
  w.Key("total_steps"); w.Int(s.total_steps);
  w.Key("pending_steps"); w.Int(s.pending_steps);
  w.Key("window_time"); w.Number(s.window_time);
  w.Key("step_time"); WriteQuantiles(w, s.step_time);
  w.Key("lifetime_step_time"); WriteQuantiles(w, s.lifetime_step_time);
  w.Key("phases");
  w.BeginArray();
  for (const PhaseStats& p : s.phases) {
    w.BeginObject();
    w.Key("name"); w.String(p.name);
    w.Key("builtin"); w.Bool(p.builtin);
    w.Key("top_level"); w.Bool(p.top_level);
    w.Key("steps"); w.Int(p.steps);
    w.Key("count"); w.Int(p.count);
    w.Key("total"); w.Number(p.total);
    w.Key("share"); w.Number(p.share);
    w.Key("breakdown_share"); w.Number(p.breakdown_share);
    w.Key("time"); WriteQuantiles(w, p.time);
    w.Key("outside_steps_count"); w.Int(p.outside_steps_count);
    w.Key("outside_steps_total"); w.Number(p.outside_steps_total);
    w.EndObject();
  }
  w.EndArray();
  w.Key("samples_per_second"); WriteOptional(w, s.samples_per_second);
  w.Key("tokens_per_second"); WriteOptional(w, s.tokens_per_second);
  w.Key("gpu_idle_pct"); WriteOptional(w, s.gpu_idle_pct);
  w.Key("idle_by_cause");
  w.BeginObject();
  for (const auto& [cause, pct] : s.idle_by_cause) {
    w.Key(cause);
    w.Number(pct);
  }
  w.EndObject();
  w.Key("misuse");
  w.BeginObject();
  w.Key("out_of_order_end"); w.Int(s.misuse.out_of_order_end);
  w.Key("stale_end"); w.Int(s.misuse.stale_end);
  w.Key("nested_step"); w.Int(s.misuse.nested_step);
  w.Key("wrong_thread"); w.Int(s.misuse.wrong_thread);
  w.Key("too_deep"); w.Int(s.misuse.too_deep);
  w.Key("invalid_phase"); w.Int(s.misuse.invalid_phase);
  w.Key("dropped_records"); w.Int(s.misuse.dropped_records);
  w.Key("incomplete_steps"); w.Int(s.misuse.incomplete_steps);
  w.EndObject();
  w.EndObject();
  std::string out = w.Take();
  out.push_back('\n');
  return out;
}

absl::StatusOr<Summary> SummaryFromJson(std::string_view json) {
  absl::StatusOr<JsonValue> parsed = internal::ParseJson(json);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a gpuscope summary: ", parsed.status().message()));
  }
  const JsonValue& root = *parsed;
  if (!root.is_object()) {
    return absl::InvalidArgumentError("not a gpuscope summary: the document is not a JSON object");
  }
  Reader r("");
  int64_t schema = 0;
  r.Int(root, "schema_version", &schema);
  if (!r.status().ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a gpuscope summary: ", r.status().message()));
  }
  if (schema != kJsonSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gpuscope summary JSON has schema_version ", schema, "; this gpuscope reads version ",
        kJsonSchemaVersion, ": re-save it with a matching gpuscope version"));
  }
  Summary s;
  std::string source;
  r.String(root, "version", &s.version);
  r.String(root, "source", &source);
  if (r.status().ok()) {
    if (source == "host") {
      s.source = Source::kHost;
    } else if (source == "events") {
      s.source = Source::kEvents;
    } else if (source == "cupti") {
      s.source = Source::kCupti;
    } else {
      r.Fail("source", "must be \"host\", \"events\" or \"cupti\"");
    }
  }
  r.String(root, "source_reason", &s.source_reason);
  r.Int(root, "window", &s.window);
  r.Int(root, "steps", &s.steps);
  r.Int(root, "total_steps", &s.total_steps);
  r.Int(root, "pending_steps", &s.pending_steps);
  r.Number(root, "window_time", &s.window_time);
  r.Quantiles(root, "step_time", &s.step_time);
  r.Quantiles(root, "lifetime_step_time", &s.lifetime_step_time);
  if (const JsonValue* phases = r.Array(root, "phases")) {
    int index = 0;
    for (const JsonValue& v : phases->as_array()) {
      Reader p(absl::StrCat("phases[", index++, "]."));
      if (!v.is_object()) {
        p.Fail("", "must be an object");
      } else {
        PhaseStats ps;
        p.String(v, "name", &ps.name);
        p.Bool(v, "builtin", &ps.builtin);
        p.Bool(v, "top_level", &ps.top_level);
        p.Int(v, "steps", &ps.steps);
        p.Int(v, "count", &ps.count);
        p.Number(v, "total", &ps.total);
        p.Number(v, "share", &ps.share);
        p.Number(v, "breakdown_share", &ps.breakdown_share);
        p.Quantiles(v, "time", &ps.time);
        p.Int(v, "outside_steps_count", &ps.outside_steps_count);
        p.Number(v, "outside_steps_total", &ps.outside_steps_total);
        s.phases.push_back(std::move(ps));
      }
      r.Merge(p);
    }
  }
  r.Optional(root, "samples_per_second", &s.samples_per_second);
  r.Optional(root, "tokens_per_second", &s.tokens_per_second);
  r.Optional(root, "gpu_idle_pct", &s.gpu_idle_pct);
  if (const JsonValue* idle = r.Object(root, "idle_by_cause")) {
    for (const auto& [cause, v] : idle->as_object()) {
      if (!v.is_number()) {
        r.Fail(absl::StrCat("idle_by_cause.", cause), "must be a number");
        break;
      }
      s.idle_by_cause[cause] = v.as_number();
    }
  }
  if (const JsonValue* m = r.Object(root, "misuse")) {
    Reader mr("misuse.");
    mr.Int(*m, "out_of_order_end", &s.misuse.out_of_order_end);
    mr.Int(*m, "stale_end", &s.misuse.stale_end);
    mr.Int(*m, "nested_step", &s.misuse.nested_step);
    mr.Int(*m, "wrong_thread", &s.misuse.wrong_thread);
    mr.Int(*m, "too_deep", &s.misuse.too_deep);
    mr.Int(*m, "invalid_phase", &s.misuse.invalid_phase);
    mr.Int(*m, "dropped_records", &s.misuse.dropped_records);
    mr.Int(*m, "incomplete_steps", &s.misuse.incomplete_steps);
    r.Merge(mr);
  }
  if (!r.status().ok()) return r.status();
  return s;
}

}  // namespace gpuscope
