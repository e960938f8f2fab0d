#include "core/step_series.h"

#include <algorithm>
#include <cmath>
#include <limits>
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
    p.worker_cores = opt(s.telemetry.worker_cores);
    p.memory_peak_bytes = opt(s.memory_peak);
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

namespace {

// What FillColumns keeps aside from its pass over the steps: the time
// outside phases and the idle time per cause, by step, and each step's
// share per device (1 / devices; 0: GPU idle not measured).
struct StepExtras {
  std::vector<double> other, idle_other, idle_launch;
  std::vector<double> per_device;
  bool any_idle_other = false, any_idle_launch = false;
};

// One pass over the steps: each step's columns in `*out`, the rest in `x`.
void FillStepColumns(const WindowView& window, SeriesColumns* out, StepExtras& x) {
  const size_t n = window.size();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (std::vector<double>* column :
       {&out->begin, &out->duration, &out->gpu_idle_pct, &out->gpu_utilization_pct,
        &out->sm_clock_ratio, &out->host_cpu_pct, &out->host_iowait_pct, &out->worker_cores,
        &out->memory_peak_bytes}) {
    column->reserve(n);
  }
  out->index.reserve(n);
  x.other.reserve(n);
  x.idle_other.assign(n, 0);
  x.idle_launch.assign(n, 0);
  x.per_device.reserve(n);
  const auto value = [&](float v) { return std::isnan(v) ? kNaN : static_cast<double>(v); };
  window.ForEachStep([&](const StepRecord& s, const StepDevices*) {
    const size_t at = out->index.size();
    out->index.push_back(s.index);
    out->begin.push_back(static_cast<double>(s.begin_ns) * kNsToSeconds);
    out->duration.push_back(static_cast<double>(s.duration_ns()) * kNsToSeconds);
    x.other.push_back(static_cast<double>(s.duration_ns() - s.top_level_ns) * kNsToSeconds);
    double idle_pct = kNaN, share = 0;
    if (s.device_busy_ns >= 0 && s.duration_ns() > 0) {
      const double device_ns =
          static_cast<double>(s.duration_ns()) * std::max<double>(1, s.num_devices);
      idle_pct = 100.0 * (device_ns - static_cast<double>(s.device_busy_ns)) / device_ns;
      share = 1.0 / std::max<double>(1, s.num_devices);
      if (s.idle_other_ns > 0) {
        x.idle_other[at] = static_cast<double>(s.idle_other_ns) * kNsToSeconds * share;
        x.any_idle_other = true;
      }
      if (s.idle_launch_ns > 0) {
        x.idle_launch[at] = static_cast<double>(s.idle_launch_ns) * kNsToSeconds * share;
        x.any_idle_launch = true;
      }
    }
    out->gpu_idle_pct.push_back(idle_pct);
    x.per_device.push_back(share);
    out->gpu_utilization_pct.push_back(value(s.telemetry.gpu_utilization_pct));
    out->sm_clock_ratio.push_back(value(s.telemetry.sm_clock_ratio));
    out->host_cpu_pct.push_back(value(s.telemetry.host_cpu_pct));
    out->host_iowait_pct.push_back(value(s.telemetry.host_iowait_pct));
    out->worker_cores.push_back(value(s.telemetry.worker_cores));
    out->memory_peak_bytes.push_back(value(s.memory_peak));
  });
}

// Each phase's columns, kept when some step has a value.
void FillPhaseColumns(const WindowView& window, const std::vector<std::string>& names,
                      const std::vector<double>& per_device, SeriesColumns* out) {
  const size_t n = window.size();
  const uint64_t first = window.first_index();
  const size_t phases = std::min(window.phase_totals().size(), names.size());
  std::vector<double> top, idle;
  for (size_t id = 0; id < phases; ++id) {
    if (window.phase_totals()[id].time.count() == 0) continue;
    top.assign(n, 0);
    idle.assign(n, 0);
    bool any_top = false, any_idle = false;
    window.ForEachSample(static_cast<uint16_t>(id), [&](uint64_t index, const PhaseSample& ps) {
      const auto at = static_cast<size_t>(index - first);
      if (ps.top_ns > 0) {
        top[at] = static_cast<double>(ps.top_ns) * kNsToSeconds;
        any_top = true;
      }
      if (ps.idle_ns > 0 && per_device[at] > 0) {
        idle[at] = static_cast<double>(ps.idle_ns) * kNsToSeconds * per_device[at];
        any_idle = true;
      }
    });
    if (any_top) {
      out->phase_names.push_back(names[id]);
      out->phases.push_back(top);
    }
    if (any_idle) {
      out->idle_causes.push_back(names[id]);
      out->idle_by_cause.push_back(idle);
    }
  }
}

}  // namespace

void FillColumns(const WindowView& window, const std::vector<std::string>& names,
                 SeriesColumns* out) {
  *out = SeriesColumns();
  StepExtras x;
  FillStepColumns(window, out, x);
  if (x.any_idle_other) {
    out->idle_causes.emplace_back(kOtherPhaseName);
    out->idle_by_cause.push_back(std::move(x.idle_other));
  }
  if (x.any_idle_launch) {
    out->idle_causes.emplace_back(kLaunchCauseName);
    out->idle_by_cause.push_back(std::move(x.idle_launch));
  }
  FillPhaseColumns(window, names, x.per_device, out);
  if (window.size() > 0) {
    out->phase_names.emplace_back(kOtherPhaseName);
    out->phases.push_back(std::move(x.other));
  }
}

}  // namespace gpuscope::internal
