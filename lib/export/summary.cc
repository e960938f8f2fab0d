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
#include "gpuscope/phase.h"
#include "base/json.h"
#include "base/strings.h"
#include "base/text.h"
#include "core/phase_table.h"

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
//
// Every number carries the range it must lie in, and the reader refuses a
// file with a value outside it (a p95 of -1 s, a share of 50, GPU idle of
// 200 %): numbers that no session can produce must not reach a comparison or
// a diagnosis. Relations between fields are checked by CheckConsistency().

constexpr bool kOptional = false;

struct Range {
  double lo;
  double hi;
};
constexpr double kHuge = 1e15;                  // beyond any count or size gpuscope writes
constexpr Range kCount{0, kHuge};               // counts and integers >= 0
constexpr Range kSeconds{0, 1e9};               // durations: 0 .. ~30 years
constexpr Range kSignedSeconds{-1e9, 1e9};      // lags, which may be negative
constexpr Range kFraction{0, 1 + 1e-9};         // shares, ratios of a whole
constexpr Range kPercent{0, 100 + 1e-6};
constexpr Range kRate{0, kHuge};                // per second, per step, bytes
constexpr Range kRatio{0, 100};                 // clocks over their maximum
constexpr Range kState{-1, kHuge};              // NVML state, -1: not available
constexpr Range kCelsius{-273.15, 1000};
constexpr Range kAnyInteger{-kHuge, kHuge};  // checked by the caller

template <typename V, typename Q>
void Fields(V& v, Q& q) {  // Quantiles
  v.Int("count", q.count, kCount);
  v.Number("mean", q.mean, kSeconds);
  v.Number("stddev", q.stddev, kSeconds);
  v.Number("min", q.min, kSeconds);
  v.Number("max", q.max, kSeconds);
  v.Number("p50", q.p50, kSeconds);
  v.Number("p90", q.p90, kSeconds);
  v.Number("p95", q.p95, kSeconds);
  v.Number("p99", q.p99, kSeconds);
}

template <typename V, typename M>
void MisuseFields(V& v, M& m) {
  v.Int("out_of_order_end", m.out_of_order_end, kCount);
  v.Int("stale_end", m.stale_end, kCount);
  v.Int("nested_step", m.nested_step, kCount);
  v.Int("wrong_thread", m.wrong_thread, kCount);
  v.Int("too_deep", m.too_deep, kCount);
  v.Int("invalid_phase", m.invalid_phase, kCount);
  v.Int("dropped_records", m.dropped_records, kCount);
  v.Int("incomplete_steps", m.incomplete_steps, kCount);
}

template <typename V, typename P>
void PhaseFields(V& v, P& p) {
  v.PhaseName("name", p.name);
  v.Bool("builtin", p.builtin);
  v.Bool("top_level", p.top_level);
  v.Int("steps", p.steps, kCount);
  v.Int("count", p.count, kCount);
  v.Number("total", p.total, kSeconds);
  v.Number("share", p.share, kFraction);
  v.Number("inclusive_share", p.inclusive_share, kFraction);
  v.Object("time", p.time, [](auto& sub, auto& q) { Fields(sub, q); });
  v.Int("outside_steps_count", p.outside_steps_count, kCount);
  v.Number("outside_steps_total", p.outside_steps_total, kSeconds);
  v.Object("device", p.device, [](auto& sub, auto& q) { Fields(sub, q); }, kOptional);
  v.Number("backlog_p50", p.backlog_p50, kSignedSeconds, kOptional);
}

template <typename V, typename D>
void DeviceFields(V& v, D& d) {
  v.Int("device", d.device, kCount);
  v.Int("gpu_steps", d.gpu_steps, kCount);
  v.Optional("gpu_idle_pct", d.gpu_idle_pct, kPercent);
}

template <typename V, typename A>
void ActivityFields(V& v, A& a) {
  v.Number("kernels_per_step", a.kernels_per_step, kRate);
  v.Number("kernel_time_p50", a.kernel_time_p50, kSeconds);
  v.Number("h2d_bytes_per_step", a.h2d_bytes_per_step, kRate);
  v.Number("d2h_bytes_per_step", a.d2h_bytes_per_step, kRate);
  v.Number("copies_per_step", a.copies_per_step, kRate);
  v.Number("pageable_copies_per_step", a.pageable_copies_per_step, kRate);
  v.Number("syncs_per_step", a.syncs_per_step, kRate);
  v.Number("sync_time_per_step", a.sync_time_per_step, kSeconds);
  v.Number("host_wait_gaps_per_step", a.host_wait_gaps_per_step, kRate);
  v.Number("host_wait_time_per_step", a.host_wait_time_per_step, kSeconds);
  v.Number("kernel_time_per_step", a.kernel_time_per_step, kSeconds, kOptional);
  v.Number("gemm_time_per_step", a.gemm_time_per_step, kSeconds, kOptional);
  v.Number("fp32_gemm_time_per_step", a.fp32_gemm_time_per_step, kSeconds, kOptional);
  v.Number("collective_time_per_step", a.collective_time_per_step, kSeconds, kOptional);
  v.Number("exposed_collective_time_per_step", a.exposed_collective_time_per_step, kSeconds, kOptional);
  v.Number("pageable_h2d_copies_per_step", a.pageable_h2d_copies_per_step, kRate, kOptional);
  v.Int("dropped_records", a.dropped_records, kCount);
}

// Optional numbers (NaN or nullopt) are written as null.
template <typename V, typename G>
void GpuTelemetryFields(V& v, G& g) {
  v.Int("index", g.index, kCount);
  v.NanNumber("utilization_pct", g.utilization_pct, kPercent);
  v.NanNumber("sm_clock_mhz", g.sm_clock_mhz, kRate);
  v.NanNumber("sm_clock_max_mhz", g.sm_clock_max_mhz, kRate);
  v.NanNumber("mem_clock_mhz", g.mem_clock_mhz, kRate);
  v.NanNumber("mem_clock_max_mhz", g.mem_clock_max_mhz, kRate);
  v.NanNumber("power_w", g.power_w, kRate);
  v.NanNumber("power_limit_w", g.power_limit_w, kRate);
  v.NanNumber("temperature_c", g.temperature_c, kCelsius);
  v.NanNumber("memory_used_bytes", g.memory_used_bytes, kRate);
  v.NanNumber("memory_total_bytes", g.memory_total_bytes, kRate);
  v.NanNumber("pcie_rx_bytes_per_s", g.pcie_rx_bytes_per_s, kRate);
  v.NanNumber("pcie_tx_bytes_per_s", g.pcie_tx_bytes_per_s, kRate);
  v.Strings("clocks_event_reasons", g.clocks_event_reasons);
  v.Int("pcie_gen", g.pcie_gen, kState);
  v.Int("pcie_gen_max", g.pcie_gen_max, kState);
  v.Int("pcie_width", g.pcie_width, kState);
  v.Int("pcie_width_max", g.pcie_width_max, kState);
  v.Int("ecc_corrected", g.ecc_corrected, kState);
  v.Int("ecc_uncorrected", g.ecc_uncorrected, kState);
  v.Int("persistence_mode", g.persistence_mode, kState);
  v.Int("compute_mode", g.compute_mode, kState);
  v.Int("mig_mode", g.mig_mode, kState);
}

template <typename V, typename T>
void TelemetryFields(V& v, T& t) {
  v.String("source", t.source);
  v.Int("steps", t.steps, kCount);
  v.Optional("gpu_utilization_pct", t.gpu_utilization_pct, kPercent);
  v.Optional("sm_clock_ratio", t.sm_clock_ratio, kRatio);
  v.Number("throttled_steps", t.throttled_steps, kFraction);
  v.Strings("clocks_event_reasons", t.clocks_event_reasons);
  v.Optional("host_cpu_pct", t.host_cpu_pct, kPercent);
  v.Optional("host_iowait_pct", t.host_iowait_pct, kPercent);
  v.Optional("process_cores", t.process_cores, kRate);
  v.Optional("worker_cores", t.worker_cores, kRate);
  v.Optional("memory_available_bytes", t.memory_available_bytes, kRate);
  v.Optional("memory_pressure_pct", t.memory_pressure_pct, kPercent);
  v.Optional("swap_pages_per_s", t.swap_pages_per_s, kRate);
  v.Optional("load1", t.load1, kRate);
  v.Optional("cpus_available", t.cpus_available, kRate, kOptional);
  v.Optional("throttled_sm_clock_ratio", t.throttled_sm_clock_ratio, kRatio, kOptional);
  v.Array("gpus", t.gpus, [](auto& sub, auto& g) { GpuTelemetryFields(sub, g); });
}

template <typename V, typename S>
void SummaryFields(V& v, S& s) {
  v.String("version", s.version);
  v.Source("source", s.source);
  v.String("source_reason", s.source_reason);
  v.Bool("simulated", s.simulated, kOptional);
  v.Int("window", s.window, kCount);
  v.Int("steps", s.steps, kCount);
  v.Int("total_steps", s.total_steps, kCount);
  v.Int("pending_steps", s.pending_steps, kCount);
  v.Number("window_time", s.window_time, kSeconds);
  v.Object("step_time", s.step_time, [](auto& sub, auto& q) { Fields(sub, q); });
  v.Object("lifetime_step_time", s.lifetime_step_time, [](auto& sub, auto& q) { Fields(sub, q); });
  v.Int("gpu_steps", s.gpu_steps, kCount, kOptional);
  v.Object("device_step_time", s.device_step_time, [](auto& sub, auto& q) { Fields(sub, q); }, kOptional);
  v.Number("gpu_clock_error", s.gpu_clock_error, kSeconds, kOptional);
  v.Array("phases", s.phases, [](auto& sub, auto& p) { PhaseFields(sub, p); });
  v.Optional("samples_per_second", s.samples_per_second, kRate);
  v.Optional("tokens_per_second", s.tokens_per_second, kRate);
  v.Optional("gpu_idle_pct", s.gpu_idle_pct, kPercent);
  v.NumberMap("idle_by_cause", s.idle_by_cause, kPercent);
  v.Array("devices", s.devices, [](auto& sub, auto& d) { DeviceFields(sub, d); }, kOptional);
  v.OptionalObject("activity", s.activity, [](auto& sub, auto& a) { ActivityFields(sub, a); });
  v.OptionalObject("telemetry", s.telemetry, [](auto& sub, auto& t) { TelemetryFields(sub, t); });
  v.Object("misuse", s.misuse, [](auto& sub, auto& m) { MisuseFields(sub, m); });
}

// ---- Writing.

class JsonOut {
 public:
  explicit JsonOut(JsonWriter& w) : w_(w) {}

  void Int(std::string_view key, int64_t v, Range, bool = true) { w_.Key(key); w_.Int(v); }
  void Number(std::string_view key, double v, Range, bool = true) { w_.Key(key); w_.Number(v); }
  void Bool(std::string_view key, bool v, bool = true) { w_.Key(key); w_.Bool(v); }
  void String(std::string_view key, const std::string& v) { w_.Key(key); w_.String(v); }
  void PhaseName(std::string_view key, const std::string& v) { String(key, v); }
  void Source(std::string_view key, gpuscope::Source v) { w_.Key(key); w_.String(SourceName(v)); }
  void Optional(std::string_view key, const std::optional<double>& v, Range, bool /*required*/ = true) {
    w_.Key(key);
    if (v.has_value()) {
      w_.Number(*v);
    } else {
      w_.Null();
    }
  }
  void NanNumber(std::string_view key, double v, Range) {
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
  void NumberMap(std::string_view key, const std::map<std::string, double>& m, Range range) {
    w_.Key(key);
    w_.BeginObject();
    for (const auto& [k, v] : m) Number(k, v, range);
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

  void Int(std::string_view key, int64_t& out, Range range, bool required = true) {
    if (const JsonValue* v = Get(key, required)) {
      std::optional<int64_t> i = v->is_number() ? v->as_int64() : std::nullopt;
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
      if (InRange(key, v->as_number(), range)) out = v->as_number();
    }
  }
  void Bool(std::string_view key, bool& out, bool required = true) {
    if (const JsonValue* v = Get(key, required)) {
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
  // A phase name as sessions accept them (ValidatePhaseName), or "other".
  void PhaseName(std::string_view key, std::string& out) {
    String(key, out);
    if (status_->ok() && out != kOtherPhaseName && internal::PhaseNameProblem(out) != nullptr) {
      Fail(key, absl::StrCat("is not a phase name a session accepts (",
                             internal::PhaseNameProblem(out), "): '", internal::TerminalSafe(out),
                             "'"));
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
  void Optional(std::string_view key, std::optional<double>& out, Range range, bool required = true) {
    if (const JsonValue* v = Get(key, required)) {
      if (v->is_null()) {
        out.reset();
      } else if (!v->is_number()) {
        Fail(key, "must be a number or null");
      } else if (InRange(key, v->as_number(), range)) {
        out = v->as_number();
      }
    }
  }
  void NanNumber(std::string_view key, double& out, Range range) {
    if (const JsonValue* v = Get(key)) {
      if (v->is_null()) {
        out = std::numeric_limits<double>::quiet_NaN();
      } else if (!v->is_number()) {
        Fail(key, "must be a number or null");
      } else if (InRange(key, v->as_number(), range)) {
        out = v->as_number();
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
  // Keys: phase names, "other" or "launch".
  void NumberMap(std::string_view key, std::map<std::string, double>& out, Range range) {
    const JsonValue* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_object()) return Fail(key, "must be an object");
    for (const auto& [k, value] : v->as_object()) {
      const std::string field = absl::StrCat(internal::ToAbsl(key), ".", internal::TerminalSafe(k));
      if (!value.is_number()) return Fail(field, "must be a number");
      if (k != kOtherPhaseName && k != kLaunchCauseName && internal::PhaseNameProblem(k) != nullptr) {
        return Fail(field, "is not a phase name a session accepts");
      }
      if (!InRange(field, value.as_number(), range)) return;
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
  bool InRange(std::string_view key, double v, Range range) {
    if (v >= range.lo && v <= range.hi) return true;  // false for NaN too
    Fail(key, absl::StrCat("is ", v, ", outside ", range.lo, " .. ", range.hi,
                           ": this is not a summary gpuscope wrote (edited or corrupt?)"));
    return false;
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

// Relations between fields that no session breaks; the first broken one,
// named. Tolerances cover rounding, and the lifetime histogram's 1 % error.
absl::Status CheckConsistency(const Summary& s) {
  const auto fail = [](std::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gpuscope summary JSON: ", internal::ToAbsl(what),
        ": this is not a summary gpuscope wrote (edited or corrupt?)"));
  };
  const auto at_most = [](double a, double b) { return a <= b * (1 + 0.02) + 1e-12; };
  const auto ordered = [&](const Quantiles& q) {
    if (q.count == 0) return true;
    return at_most(q.min, q.p50) && at_most(q.p50, q.p90) && at_most(q.p90, q.p95) &&
           at_most(q.p95, q.p99) && at_most(q.p99, q.max) && at_most(q.min, q.mean) &&
           at_most(q.mean, q.max);
  };
  if (!ordered(s.step_time)) return fail("step_time quantiles are not ordered (min <= p50 <= ... <= max)");
  if (!ordered(s.lifetime_step_time)) return fail("lifetime_step_time quantiles are not ordered");
  if (!ordered(s.device_step_time)) return fail("device_step_time quantiles are not ordered");
  if (s.window > 0 && s.steps > s.window) return fail("steps exceeds window");
  if (s.total_steps < s.steps) return fail("total_steps is less than steps");
  if (s.step_time.count != s.steps) return fail("step_time.count differs from steps");
  if (s.lifetime_step_time.count != s.total_steps) {
    return fail("lifetime_step_time.count differs from total_steps");
  }
  if (s.gpu_steps > s.steps) return fail("gpu_steps exceeds steps");
  double shares = 0;
  for (const PhaseStats& p : s.phases) {
    if (!ordered(p.time) || !ordered(p.device)) {
      return fail(absl::StrCat("phase '", internal::TerminalSafe(p.name), "' quantiles are not ordered"));
    }
    if (p.share > p.inclusive_share + 1e-9) {
      return fail(absl::StrCat("phase '", internal::TerminalSafe(p.name), "' share exceeds its inclusive_share"));
    }
    shares += p.share;
  }
  if (shares > 1 + 1e-6) return fail(absl::StrCat("phase shares sum to ", shares, ", more than 1"));
  double idle = 0;
  for (const auto& [cause, pct] : s.idle_by_cause) idle += pct;
  if (!s.gpu_idle_pct.has_value() && !s.idle_by_cause.empty()) {
    return fail("idle_by_cause without gpu_idle_pct");
  }
  if (s.gpu_idle_pct.has_value() && idle > *s.gpu_idle_pct + 0.01) {
    return fail(absl::StrCat("idle_by_cause sums to ", idle, " %, more than gpu_idle_pct"));
  }
  if (s.activity.has_value()) {
    const ActivityStats& a = *s.activity;
    const auto within = [](double part, double whole) { return part <= whole * (1 + 1e-6) + 1e-12; };
    if (!within(a.fp32_gemm_time_per_step, a.gemm_time_per_step) ||
        !within(a.gemm_time_per_step, a.kernel_time_per_step) ||
        !within(a.collective_time_per_step, a.kernel_time_per_step) ||
        !within(a.exposed_collective_time_per_step, a.collective_time_per_step)) {
      return fail("activity kernel times are inconsistent (fp32 GEMM <= GEMM <= kernel time, "
                  "exposed collective <= collective <= kernel time)");
    }
    if (!within(a.pageable_h2d_copies_per_step, a.pageable_copies_per_step) ||
        !within(a.pageable_copies_per_step, a.copies_per_step)) {
      return fail("activity copy counts are inconsistent (pageable H2D <= pageable <= copies)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string ToJson(const Summary& s) {
  JsonWriter w(/*indent=*/2);
  JsonOut out(w);
  w.BeginObject();
  out.Int("schema_version", kJsonSchemaVersion, kCount);
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
  SummaryFields(in, s);
  if (!status.ok()) return status;
  if (absl::Status consistent = CheckConsistency(s); !consistent.ok()) return consistent;
  return s;
}

}  // namespace gpuscope
