#include "core/step_series.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "core/quantiles.h"
#include "gpuscope/phase.h"

namespace gpuscope::internal {

void FillSeries(const WindowView& window, const std::vector<std::string>& names,
                std::vector<StepPoint>* out) {
  out->clear();
  out->reserve(window.size());
  const uint64_t first = window.first_index();
  std::vector<uint8_t> num_devices;  // by step, oldest first
  num_devices.reserve(window.size());
  window.ForEachStep([&](const StepRecord& s, const StepDevices*) {
    num_devices.push_back(s.num_devices);
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
  });
  // Each phase's per-step samples, by step index.
  const size_t phases = std::min(window.phase_totals().size(), names.size());
  for (size_t id = 0; id < phases; ++id) {
    if (window.phase_totals()[id].time.count() == 0) continue;
    const std::string& name = names[id];
    window.ForEachSample(static_cast<uint16_t>(id), [&](uint64_t index, const PhaseSample& ps) {
      const auto at = static_cast<size_t>(index - first);
      StepPoint& p = (*out)[at];
      if (ps.top_ns > 0) p.phases[name] = static_cast<double>(ps.top_ns) * kNsToSeconds;
      if (ps.idle_ns > 0 && p.gpu_idle_pct.has_value()) {
        p.idle_by_cause[name] =
            static_cast<double>(ps.idle_ns) * kNsToSeconds / std::max<double>(1, num_devices[at]);
      }
    });
  }
}

}  // namespace gpuscope::internal
