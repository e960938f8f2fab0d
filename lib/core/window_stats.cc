#include "core/window_stats.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/activity_timeline.h"
#include "core/quantiles.h"
#include "gpuscope/phase.h"

namespace gpuscope::internal {

StepTotals FillStepStats(const StepWindow& window, Summary* out) {
  const Ring<StepRecord>& steps = window.steps;
  out->steps = static_cast<int64_t>(steps.size());
  out->total_steps = static_cast<int64_t>(window.completed);
  out->lifetime_step_time = window.lifetime.Summarize();

  StepTotals totals;
  std::vector<int64_t> durations;
  durations.reserve(steps.size());
  totals.other.reserve(steps.size());
  int64_t samples = 0, samples_ns = 0, tokens = 0, tokens_ns = 0;
  bool have_samples = false, have_tokens = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord& s = steps[i];
    const int64_t d = s.duration_ns();
    durations.push_back(d);
    totals.other.push_back(d - s.top_level_ns);
    totals.window_ns += d;
    totals.other_ns += d - s.top_level_ns;
    if (s.samples >= 0) {
      have_samples = true;
      samples += s.samples;
      samples_ns += d;
    }
    if (s.tokens >= 0) {
      have_tokens = true;
      tokens += s.tokens;
      tokens_ns += d;
    }
  }
  out->window_time = static_cast<double>(totals.window_ns) * kNsToSeconds;
  out->step_time = ExactQuantiles(durations);
  out->samples_per_second.reset();
  out->tokens_per_second.reset();
  if (have_samples && samples_ns > 0) {
    out->samples_per_second =
        static_cast<double>(samples) / (static_cast<double>(samples_ns) * kNsToSeconds);
  }
  if (have_tokens && tokens_ns > 0) {
    out->tokens_per_second =
        static_cast<double>(tokens) / (static_cast<double>(tokens_ns) * kNsToSeconds);
  }
  return totals;
}

int64_t FillDeviceStats(const StepWindow& window, std::optional<int64_t> activity_dropped,
                        Summary* out) {
  const Ring<StepRecord>& steps = window.steps;
  const bool with_activity = activity_dropped.has_value();
  // Over the window's steps whose device data is in. Time is counted once
  // per device timed in a step.
  std::vector<int64_t> device_spans;
  int64_t gpu_steps = 0;
  int64_t gpu_window_ns = 0, gpu_idle_ns = 0, idle_other_ns = 0, idle_launch_ns = 0;
  ActivityCounts act;  // sums over the timed steps (cupti)
  std::vector<int64_t> kernel_medians;
  struct PerDevice {
    int64_t steps = 0, window_ns = 0, busy_ns = 0;
  };
  double kernel_ns_sum = 0, gemm_ns_sum = 0, gemm_fp32_ns_sum = 0, collective_ns_sum = 0,
         collective_exposed_ns_sum = 0;
  std::map<int, PerDevice> per_device;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord& s = steps[i];
    if (s.device_busy_ns < 0) continue;
    ++gpu_steps;
    if (s.device_span_ns >= 0) device_spans.push_back(s.device_span_ns);
    idle_launch_ns += std::max<int64_t>(0, s.idle_launch_ns);
    if (with_activity) {
      const ActivityCounts& c = s.activity;
      act.kernels += c.kernels;
      if (c.kernels > 0) kernel_medians.push_back(c.kernel_median_ns);
      act.h2d_bytes += c.h2d_bytes;
      act.d2h_bytes += c.d2h_bytes;
      act.copies += c.copies;
      act.pageable_copies += c.pageable_copies;
      act.syncs += c.syncs;
      act.sync_ns += c.sync_ns;
      act.host_wait_gaps += c.host_wait_gaps;
      act.host_wait_ns += c.host_wait_ns;
      act.pageable_h2d_copies += c.pageable_h2d_copies;
      // Kernel times per device (a step on two GPUs is not twice as long).
      const double share = 1.0 / std::max<double>(1, s.num_devices);  // ns per device
      kernel_ns_sum += static_cast<double>(c.kernel_ns) * share;
      gemm_ns_sum += static_cast<double>(c.gemm_ns) * share;
      gemm_fp32_ns_sum += static_cast<double>(c.gemm_fp32_ns) * share;
      collective_ns_sum += static_cast<double>(c.collective_ns) * share;
      // Exposed time is clipped to the step, total counts kernels beginning
      // in it: a collective begun in the previous step must not make the
      // exposed part exceed the total.
      collective_exposed_ns_sum +=
          static_cast<double>(std::min(c.collective_exposed_ns, c.collective_ns)) * share;
    }
    const int64_t device_window = s.duration_ns() * std::max<int64_t>(1, s.num_devices);
    gpu_window_ns += device_window;
    gpu_idle_ns += device_window - s.device_busy_ns;
    idle_other_ns += std::max<int64_t>(0, s.idle_other_ns);
    for (size_t d = 0; d < s.num_devices; ++d) {
      PerDevice& pd = per_device[s.devices[d].device];
      ++pd.steps;
      pd.window_ns += s.duration_ns();
      pd.busy_ns += s.devices[d].busy_ns;
    }
  }
  out->devices.clear();
  for (const auto& [device, pd] : per_device) {
    DeviceStats ds;
    ds.device = device;
    ds.gpu_steps = pd.steps;
    if (pd.window_ns > 0) {
      ds.gpu_idle_pct = 100.0 * static_cast<double>(pd.window_ns - pd.busy_ns) /
                        static_cast<double>(pd.window_ns);
    }
    out->devices.push_back(ds);
  }
  out->gpu_steps = gpu_steps;
  out->activity.reset();
  if (with_activity && gpu_steps > 0) {
    const double n = static_cast<double>(gpu_steps);
    ActivityStats a;
    a.kernels_per_step = static_cast<double>(act.kernels) / n;
    a.kernel_time_p50 = ExactQuantiles(kernel_medians).p50;  // seconds
    a.h2d_bytes_per_step = static_cast<double>(act.h2d_bytes) / n;
    a.d2h_bytes_per_step = static_cast<double>(act.d2h_bytes) / n;
    a.copies_per_step = static_cast<double>(act.copies) / n;
    a.pageable_copies_per_step = static_cast<double>(act.pageable_copies) / n;
    a.syncs_per_step = static_cast<double>(act.syncs) / n;
    a.sync_time_per_step = static_cast<double>(act.sync_ns) * kNsToSeconds / n;
    a.host_wait_gaps_per_step = static_cast<double>(act.host_wait_gaps) / n;
    a.host_wait_time_per_step = static_cast<double>(act.host_wait_ns) * kNsToSeconds / n;
    a.pageable_h2d_copies_per_step = static_cast<double>(act.pageable_h2d_copies) / n;
    a.kernel_time_per_step = kernel_ns_sum * kNsToSeconds / n;
    a.gemm_time_per_step = gemm_ns_sum * kNsToSeconds / n;
    a.fp32_gemm_time_per_step = gemm_fp32_ns_sum * kNsToSeconds / n;
    a.collective_time_per_step = collective_ns_sum * kNsToSeconds / n;
    a.exposed_collective_time_per_step = collective_exposed_ns_sum * kNsToSeconds / n;
    a.dropped_records = *activity_dropped;
    out->activity = a;
  }
  out->device_step_time = ExactQuantiles(device_spans);
  out->gpu_idle_pct.reset();
  out->idle_by_cause.clear();
  if (gpu_window_ns > 0) {
    const auto pct_of_gpu_window = [&](int64_t ns) {
      return 100.0 * static_cast<double>(ns) / static_cast<double>(gpu_window_ns);
    };
    out->gpu_idle_pct = pct_of_gpu_window(gpu_idle_ns);
    if (idle_other_ns > 0)
      out->idle_by_cause[std::string(kOtherPhaseName)] = pct_of_gpu_window(idle_other_ns);
    if (idle_launch_ns > 0)
      out->idle_by_cause[std::string(kLaunchCauseName)] = pct_of_gpu_window(idle_launch_ns);
  }
  return gpu_window_ns;
}

void FillPhaseStats(const StepWindow& window, const PhaseTable& table, StepTotals* totals,
                    int64_t gpu_window_ns, Summary* out) {
  const int64_t window_ns = totals->window_ns;
  const auto share_of = [&](int64_t ns) {
    return window_ns > 0 ? static_cast<double>(ns) / static_cast<double>(window_ns) : 0.0;
  };

  const uint64_t first_index = window.first_index();
  out->phases.clear();
  std::vector<int64_t> per_step, per_step_device, backlogs;
  const int known = table.size();
  for (size_t id = 0; id < window.phases.size() && id < static_cast<size_t>(known); ++id) {
    const PhaseHistory& h = window.phases[id];
    per_step.clear();
    per_step_device.clear();
    backlogs.clear();
    PhaseStats ps;
    int64_t total_ns = 0, top_ns = 0, idle_ns = 0;
    for (size_t k = h.window.size(); k-- > 0;) {
      const PhaseSample& sample = h.window[k];
      if (sample.step_index < first_index) break;  // older than the window
      per_step.push_back(sample.total_ns);
      total_ns += sample.total_ns;
      top_ns += sample.top_ns;
      ps.count += sample.count;
      if (sample.top_count > 0) ps.top_level = true;
      if (sample.device_ns >= 0) {
        per_step_device.push_back(sample.device_ns);
        if (sample.backlog_ns >= 0) backlogs.push_back(sample.backlog_ns);
        idle_ns += sample.idle_ns;
      }
    }
    ps.device = ExactQuantiles(per_step_device);
    ps.backlog_p50 = ExactQuantiles(backlogs).p50;
    if (per_step.empty() && h.outside_count == 0) continue;
    ps.name = std::string(table.Name(static_cast<uint16_t>(id)));
    ps.builtin = id < static_cast<size_t>(kNumBuiltinPhases);
    ps.steps = static_cast<int64_t>(per_step.size());
    ps.total = static_cast<double>(total_ns) * kNsToSeconds;
    ps.inclusive_share = share_of(total_ns);
    ps.share = share_of(top_ns);
    ps.time = ExactQuantiles(per_step);
    ps.outside_steps_count = h.outside_count;
    ps.outside_steps_total = static_cast<double>(h.outside_total_ns) * kNsToSeconds;
    if (gpu_window_ns > 0 && idle_ns > 0) {
      out->idle_by_cause[ps.name] =
          100.0 * static_cast<double>(idle_ns) / static_cast<double>(gpu_window_ns);
    }
    out->phases.push_back(std::move(ps));
  }
  if (!window.steps.empty()) {
    // Step time outside every top-level phase: the synthetic phase "other".
    PhaseStats ps;
    ps.name = std::string(kOtherPhaseName);
    ps.builtin = true;
    ps.top_level = true;
    ps.steps = static_cast<int64_t>(window.steps.size());
    ps.count = ps.steps;
    ps.total = static_cast<double>(totals->other_ns) * kNsToSeconds;
    ps.inclusive_share = share_of(totals->other_ns);
    ps.share = ps.inclusive_share;
    ps.time = ExactQuantiles(totals->other);
    out->phases.push_back(std::move(ps));
  }
  std::sort(out->phases.begin(), out->phases.end(), [](const PhaseStats& a, const PhaseStats& b) {
    return std::tie(b.share, b.inclusive_share, a.name) <
           std::tie(a.share, a.inclusive_share, b.name);
  });
}

bool RollingCounters(const StepWindow& window, double* step_p95_s,
                     std::optional<double>* gpu_idle_pct) {
  const Ring<StepRecord>& steps = window.steps;
  if (steps.empty()) return false;
  std::vector<int64_t> durations;
  durations.reserve(steps.size());
  double window_ns = 0, idle_ns = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord& s = steps[i];
    durations.push_back(s.duration_ns());
    if (s.device_busy_ns >= 0) {
      const double w = static_cast<double>(s.duration_ns()) * std::max<double>(1, s.num_devices);
      window_ns += w;
      idle_ns += w - static_cast<double>(s.device_busy_ns);
    }
  }
  *step_p95_s = ExactQuantiles(durations).p95;
  gpu_idle_pct->reset();
  if (window_ns > 0) *gpu_idle_pct = 100.0 * idle_ns / window_ns;
  return true;
}

}  // namespace gpuscope::internal
