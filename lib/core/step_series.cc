#include "core/step_series.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "core/quantiles.h"
#include "gpuscope/phase.h"

namespace gpuscope::internal {

void FillSeries(const StepWindow& window, const PhaseTable& table, std::vector<StepPoint>* out) {
  const Ring<StepRecord>& steps = window.steps;
  out->clear();
  out->reserve(steps.size());
  const uint64_t first = window.first_index();
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord& s = steps[i];
    StepPoint p;
    p.index = s.index;
    p.begin = static_cast<double>(s.begin_ns) * kNsToSeconds;
    p.duration = static_cast<double>(s.duration_ns()) * kNsToSeconds;
    p.phases[std::string(kOtherPhaseName)] =
        static_cast<double>(s.duration_ns() - s.top_level_ns) * kNsToSeconds;
    if (s.device_busy_ns >= 0 && s.duration_ns() > 0) {
      const double device_ns =
          static_cast<double>(s.duration_ns()) * std::max<double>(1, s.num_devices);
      p.gpu_idle_pct = 100.0 * (device_ns - static_cast<double>(s.device_busy_ns)) / device_ns;
      // Idle seconds per cause, per device on average (as gpu_idle_pct).
      const double per_device = 1.0 / std::max<double>(1, s.num_devices);
      if (s.idle_other_ns > 0) {
        p.idle_by_cause[std::string(kOtherPhaseName)] =
            static_cast<double>(s.idle_other_ns) * kNsToSeconds * per_device;
      }
      if (s.idle_launch_ns > 0) {
        p.idle_by_cause[std::string(kLaunchCauseName)] =
            static_cast<double>(s.idle_launch_ns) * kNsToSeconds * per_device;
      }
    }
    const auto opt = [](float v) {
      return std::isnan(v) ? std::nullopt : std::optional<double>(v);
    };
    p.gpu_utilization_pct = opt(s.telemetry.gpu_utilization_pct);
    p.sm_clock_ratio = opt(s.telemetry.sm_clock_ratio);
    p.host_cpu_pct = opt(s.telemetry.host_cpu_pct);
    p.host_iowait_pct = opt(s.telemetry.host_iowait_pct);
    p.worker_cores = opt(s.telemetry.children_cores);
    out->push_back(std::move(p));
  }
  // Each phase's per-step samples, by step index.
  for (size_t id = 0; id < window.phases.size() && id < static_cast<size_t>(table.size()); ++id) {
    const PhaseHistory& h = window.phases[id];
    const std::string name(table.Name(static_cast<uint16_t>(id)));
    for (size_t k = 0; k < h.window.size(); ++k) {
      const PhaseSample& ps = h.window[k];
      if (ps.step_index < first || ps.step_index - first >= out->size()) continue;
      StepPoint& p = (*out)[static_cast<size_t>(ps.step_index - first)];
      if (ps.top_ns > 0) p.phases[name] = static_cast<double>(ps.top_ns) * kNsToSeconds;
      if (ps.idle_ns > 0 && p.gpu_idle_pct.has_value()) {
        const StepRecord& s = steps[static_cast<size_t>(ps.step_index - first)];
        p.idle_by_cause[name] =
            static_cast<double>(ps.idle_ns) * kNsToSeconds / std::max<double>(1, s.num_devices);
      }
    }
  }
}

}  // namespace gpuscope::internal
