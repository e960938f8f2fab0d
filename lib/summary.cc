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

// Each struct's fields are listed once, in a Fields() function that a
// visitor walks: JsonOut writes them, JsonIn reads them back. Adding a field
// to the encoding is one line here. Fields added after schema version 1 was
// first written are kOptional: readers accept documents without them.

constexpr bool kOptional = false;

template <typename V, typename Q>
void Fields(V& v, Q& q) {  // Quantiles
  v.Int("count", q.count);
  v.Number("mean", q.mean);
  v.Number("stddev", q.stddev);
  v.Number("min", q.min);
  v.Number("max", q.max);
  v.Number("p50", q.p50);
  v.Number("p90", q.p90);
  v.Number("p95", q.p95);
  v.Number("p99", q.p99);
}

template <typename V, typename M>
void MisuseFields(V& v, M& m) {
  v.Int("out_of_order_end", m.out_of_order_end);
  v.Int("stale_end", m.stale_end);
  v.Int("nested_step", m.nested_step);
  v.Int("wrong_thread", m.wrong_thread);
  v.Int("too_deep", m.too_deep);
  v.Int("invalid_phase", m.invalid_phase);
  v.Int("dropped_records", m.dropped_records);
  v.Int("incomplete_steps", m.incomplete_steps);
}

template <typename V, typename P>
void PhaseFields(V& v, P& p) {
  v.String("name", p.name);
  v.Bool("builtin", p.builtin);
  v.Bool("top_level", p.top_level);
  v.Int("steps", p.steps);
  v.Int("count", p.count);
  v.Number("total", p.total);
  v.Number("share", p.share);
  v.Number("inclusive_share", p.inclusive_share);
  v.Object("time", p.time, [](auto& sub, auto& q) { Fields(sub, q); });
  v.Int("outside_steps_count", p.outside_steps_count);
  v.Number("outside_steps_total", p.outside_steps_total);
  v.Object("device", p.device, [](auto& sub, auto& q) { Fields(sub, q); }, kOptional);
  v.Number("backlog_p50", p.backlog_p50, kOptional);
}

template <typename V, typename D>
void DeviceFields(V& v, D& d) {
  v.Int("device", d.device);
  v.Int("gpu_steps", d.gpu_steps);
  v.Optional("gpu_idle_pct", d.gpu_idle_pct);
}

template <typename V, typename A>
void ActivityFields(V& v, A& a) {
  v.Number("kernels_per_step", a.kernels_per_step);
  v.Number("kernel_time_p50", a.kernel_time_p50);
  v.Number("h2d_bytes_per_step", a.h2d_bytes_per_step);
  v.Number("d2h_bytes_per_step", a.d2h_bytes_per_step);
  v.Number("copies_per_step", a.copies_per_step);
  v.Number("pageable_copies_per_step", a.pageable_copies_per_step);
  v.Number("syncs_per_step", a.syncs_per_step);
  v.Number("sync_time_per_step", a.sync_time_per_step);
  v.Number("host_wait_gaps_per_step", a.host_wait_gaps_per_step);
  v.Number("host_wait_time_per_step", a.host_wait_time_per_step);
  v.Number("kernel_time_per_step", a.kernel_time_per_step, kOptional);
  v.Number("gemm_time_per_step", a.gemm_time_per_step, kOptional);
  v.Number("fp32_gemm_time_per_step", a.fp32_gemm_time_per_step, kOptional);
  v.Number("collective_time_per_step", a.collective_time_per_step, kOptional);
  v.Number("exposed_collective_time_per_step", a.exposed_collective_time_per_step, kOptional);
  v.Number("pageable_h2d_copies_per_step", a.pageable_h2d_copies_per_step, kOptional);
  v.Int("dropped_records", a.dropped_records);
}

// Optional numbers (NaN or nullopt) are written as null.
template <typename V, typename G>
void GpuTelemetryFields(V& v, G& g) {
  v.Int("index", g.index);
  v.NanNumber("utilization_pct", g.utilization_pct);
  v.NanNumber("sm_clock_mhz", g.sm_clock_mhz);
  v.NanNumber("sm_clock_max_mhz", g.sm_clock_max_mhz);
  v.NanNumber("mem_clock_mhz", g.mem_clock_mhz);
  v.NanNumber("mem_clock_max_mhz", g.mem_clock_max_mhz);
  v.NanNumber("power_w", g.power_w);
  v.NanNumber("power_limit_w", g.power_limit_w);
  v.NanNumber("temperature_c", g.temperature_c);
  v.NanNumber("memory_used_bytes", g.memory_used_bytes);
  v.NanNumber("memory_total_bytes", g.memory_total_bytes);
  v.NanNumber("pcie_rx_bytes_per_s", g.pcie_rx_bytes_per_s);
  v.NanNumber("pcie_tx_bytes_per_s", g.pcie_tx_bytes_per_s);
  v.Strings("clocks_event_reasons", g.clocks_event_reasons);
  v.Int("pcie_gen", g.pcie_gen);
  v.Int("pcie_gen_max", g.pcie_gen_max);
  v.Int("pcie_width", g.pcie_width);
  v.Int("pcie_width_max", g.pcie_width_max);
  v.Int("ecc_corrected", g.ecc_corrected);
  v.Int("ecc_uncorrected", g.ecc_uncorrected);
  v.Int("persistence_mode", g.persistence_mode);
  v.Int("compute_mode", g.compute_mode);
  v.Int("mig_mode", g.mig_mode);
}

template <typename V, typename T>
void TelemetryFields(V& v, T& t) {
  v.String("source", t.source);
  v.Int("steps", t.steps);
  v.Optional("gpu_utilization_pct", t.gpu_utilization_pct);
  v.Optional("sm_clock_ratio", t.sm_clock_ratio);
  v.Number("throttled_steps", t.throttled_steps);
  v.Strings("clocks_event_reasons", t.clocks_event_reasons);
  v.Optional("host_cpu_pct", t.host_cpu_pct);
  v.Optional("host_iowait_pct", t.host_iowait_pct);
  v.Optional("process_cores", t.process_cores);
  v.Optional("worker_cores", t.worker_cores);
  v.Optional("memory_available_bytes", t.memory_available_bytes);
  v.Optional("memory_pressure_pct", t.memory_pressure_pct);
  v.Optional("swap_pages_per_s", t.swap_pages_per_s);
  v.Optional("load1", t.load1);
  v.Optional("cpus_available", t.cpus_available, kOptional);
  v.Optional("throttled_sm_clock_ratio", t.throttled_sm_clock_ratio, kOptional);
  v.Array("gpus", t.gpus, [](auto& sub, auto& g) { GpuTelemetryFields(sub, g); });
}

template <typename V, typename S>
void SummaryFields(V& v, S& s) {
  v.String("version", s.version);
  v.Source("source", s.source);
  v.String("source_reason", s.source_reason);
  v.Int("window", s.window);
  v.Int("steps", s.steps);
  v.Int("total_steps", s.total_steps);
  v.Int("pending_steps", s.pending_steps);
  v.Number("window_time", s.window_time);
  v.Object("step_time", s.step_time, [](auto& sub, auto& q) { Fields(sub, q); });
  v.Object("lifetime_step_time", s.lifetime_step_time, [](auto& sub, auto& q) { Fields(sub, q); });
  v.Int("gpu_steps", s.gpu_steps, kOptional);
  v.Object("device_step_time", s.device_step_time, [](auto& sub, auto& q) { Fields(sub, q); }, kOptional);
  v.Number("gpu_clock_error", s.gpu_clock_error, kOptional);
  v.Array("phases", s.phases, [](auto& sub, auto& p) { PhaseFields(sub, p); });
  v.Optional("samples_per_second", s.samples_per_second);
  v.Optional("tokens_per_second", s.tokens_per_second);
  v.Optional("gpu_idle_pct", s.gpu_idle_pct);
  v.NumberMap("idle_by_cause", s.idle_by_cause);
  v.Array("devices", s.devices, [](auto& sub, auto& d) { DeviceFields(sub, d); }, kOptional);
  v.OptionalObject("activity", s.activity, [](auto& sub, auto& a) { ActivityFields(sub, a); });
  v.OptionalObject("telemetry", s.telemetry, [](auto& sub, auto& t) { TelemetryFields(sub, t); });
  v.Object("misuse", s.misuse, [](auto& sub, auto& m) { MisuseFields(sub, m); });
}

// ---- Writing.

class JsonOut {
 public:
  explicit JsonOut(JsonWriter& w) : w_(w) {}

  void Int(std::string_view key, int64_t v, bool = true) { w_.Key(key); w_.Int(v); }
  void Number(std::string_view key, double v, bool = true) { w_.Key(key); w_.Number(v); }
  void Bool(std::string_view key, bool v) { w_.Key(key); w_.Bool(v); }
  void String(std::string_view key, const std::string& v) { w_.Key(key); w_.String(v); }
  void Source(std::string_view key, gpuscope::Source v) { w_.Key(key); w_.String(SourceName(v)); }
  void Optional(std::string_view key, const std::optional<double>& v, bool /*required*/ = true) {
    w_.Key(key);
    if (v.has_value()) {
      w_.Number(*v);
    } else {
      w_.Null();
    }
  }
  void NanNumber(std::string_view key, double v) {
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
  void NumberMap(std::string_view key, const std::map<std::string, double>& m) {
    w_.Key(key);
    w_.BeginObject();
    for (const auto& [k, v] : m) Number(k, v);
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

// ---- Reading. The first failure wins and names its field as a path
// ("phases[0].time.p95").

class JsonIn {
 public:
  JsonIn(const JsonValue& obj, std::string path, absl::Status* status)
      : obj_(obj), path_(std::move(path)), status_(status) {}

  void Int(std::string_view key, int64_t& out, bool required = true) {
    if (const JsonValue* v = Get(key, required)) {
      std::optional<int64_t> i = v->is_number() ? v->as_int64() : std::nullopt;
      if (i.has_value()) {
        out = *i;
      } else {
        Fail(key, "must be an integer");
      }
    }
  }
  void Int(std::string_view key, int& out, bool required = true) {
    int64_t wide = out;
    Int(key, wide, required);
    if (!status_->ok()) return;
    if (wide < INT32_MIN || wide > INT32_MAX) return Fail(key, "is out of range");
    out = static_cast<int>(wide);
  }
  void Number(std::string_view key, double& out, bool required = true) {
    if (const JsonValue* v = Get(key, required)) {
      if (v->is_number()) {
        out = v->as_number();
      } else {
        Fail(key, "must be a number");
      }
    }
  }
  void Bool(std::string_view key, bool& out) {
    if (const JsonValue* v = Get(key)) {
      if (v->is_bool()) {
        out = v->as_bool();
      } else {
        Fail(key, "must be true or false");
      }
    }
  }
  void String(std::string_view key, std::string& out) {
    if (const JsonValue* v = Get(key)) {
      if (v->is_string()) {
        out = v->as_string();
      } else {
        Fail(key, "must be a string");
      }
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
  void Optional(std::string_view key, std::optional<double>& out, bool required = true) {
    if (const JsonValue* v = Get(key, required)) {
      if (v->is_null()) {
        out.reset();
      } else if (v->is_number()) {
        out = v->as_number();
      } else {
        Fail(key, "must be a number or null");
      }
    }
  }
  void NanNumber(std::string_view key, double& out) {
    if (const JsonValue* v = Get(key)) {
      if (v->is_null()) {
        out = std::numeric_limits<double>::quiet_NaN();
      } else if (v->is_number()) {
        out = v->as_number();
      } else {
        Fail(key, "must be a number or null");
      }
    }
  }
  void Strings(std::string_view key, std::vector<std::string>& out) {
    const JsonValue* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(key, "must be an array of strings");
    out.clear();
    for (const JsonValue& x : v->as_array()) {
      if (!x.is_string()) return Fail(key, "must be an array of strings");
      out.push_back(x.as_string());
    }
  }
  void NumberMap(std::string_view key, std::map<std::string, double>& out) {
    const JsonValue* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_object()) return Fail(key, "must be an object");
    for (const auto& [k, value] : v->as_object()) {
      if (!value.is_number()) {
        return Fail(absl::StrCat(internal::ToAbsl(key), ".", k), "must be a number");
      }
      out[k] = value.as_number();
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
    for (size_t i = 0; i < v->as_array().size() && status_->ok(); ++i) {
      const JsonValue& item = v->as_array()[i];
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
    const JsonValue* v = obj_.Find(key);
    if (v == nullptr && required) Fail(key, "is missing");
    return v;
  }
  void Fail(std::string_view key, std::string_view what) {
    if (!status_->ok()) return;
    *status_ = absl::InvalidArgumentError(
        absl::StrCat("gpuscope summary JSON: field '", path_, internal::ToAbsl(key), "' ",
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
  out.Int("schema_version", kJsonSchemaVersion);
  SummaryFields(out, s);
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
  if (!parsed->is_object()) {
    return absl::InvalidArgumentError("not a gpuscope summary: the document is not a JSON object");
  }
  absl::Status status;
  JsonIn in(*parsed, "", &status);
  int64_t schema = 0;
  in.Int("schema_version", schema);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not a gpuscope summary: ", status.message()));
  }
  if (schema < 1 || schema > kJsonSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gpuscope summary JSON has schema_version ", schema, "; this gpuscope reads versions 1 to ",
        kJsonSchemaVersion, ": re-save it with a matching gpuscope version"));
  }
  Summary s;
  SummaryFields(in, s);
  if (!status.ok()) return status;
  return s;
}

}  // namespace gpuscope
