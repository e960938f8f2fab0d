#include "gpuscope/timeline.h"

#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "gpuscope/report.h"

namespace gpuscope {
namespace {

void OptionalNumber(internal::JsonWriter& w, std::string_view key, const std::optional<double>& v) {
  w.Key(key);
  if (v.has_value()) {
    w.Number(*v);
  } else {
    w.Null();
  }
}

void NumberMap(internal::JsonWriter& w, std::string_view key,
               const std::map<std::string, double>& m) {
  w.Key(key);
  w.BeginObject();
  for (const auto& [name, value] : m) {
    w.Key(name);
    w.Number(value);
  }
  w.EndObject();
}

}  // namespace

std::string ToJson(const std::vector<StepPoint>& series) {
  internal::JsonWriter w(/*indent=*/0);
  w.BeginObject();
  w.Key("schema");
  w.String("gpuscope.step_series");
  w.Key("schema_version");
  w.Int(1);
  w.Key("steps");
  w.BeginArray();
  for (const StepPoint& p : series) {
    w.BeginObject();
    w.Key("index");
    w.Int(static_cast<int64_t>(p.index));
    w.Key("begin");
    w.Number(p.begin);
    w.Key("duration");
    w.Number(p.duration);
    NumberMap(w, "phases", p.phases);
    OptionalNumber(w, "gpu_idle_pct", p.gpu_idle_pct);
    NumberMap(w, "idle_by_cause", p.idle_by_cause);
    OptionalNumber(w, "gpu_utilization_pct", p.gpu_utilization_pct);
    OptionalNumber(w, "sm_clock_ratio", p.sm_clock_ratio);
    OptionalNumber(w, "host_cpu_pct", p.host_cpu_pct);
    OptionalNumber(w, "host_iowait_pct", p.host_iowait_pct);
    OptionalNumber(w, "worker_cores", p.worker_cores);
    OptionalNumber(w, "memory_peak_bytes", p.memory_peak_bytes);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Take();
}

}  // namespace gpuscope
