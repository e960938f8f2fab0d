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

WindowTotals FillStepStats(const WindowView& window, Summary* out) {
  out->steps = static_cast<int64_t>(window.size());
  out->total_steps = static_cast<int64_t>(window.measured());
  out->lifetime_step_time = window.lifetime().Summarize();
  out->warmup.steps = window.warmup().steps;
  out->warmup.total = static_cast<double>(window.warmup().total_ns) * kNsToSeconds;
  out->warmup.max = static_cast<double>(window.warmup().max_ns) * kNsToSeconds;

  WindowTotals totals;
  std::vector<int64_t> durations;
  durations.reserve(window.size());
  totals.other.reserve(window.size());
  int64_t samples = 0, samples_ns = 0, tokens = 0, tokens_ns = 0;
  bool have_samples = false, have_tokens = false;
  window.ForEachStep([&](const StepRecord& s, const StepDevices*) {
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
  });
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

// Long: one pass over the window's steps gathers some twenty sums (device
// time, idle by cause, activity counts, time by category, per device), so
// that each step is read once; then each sum becomes its statistic.
int64_t FillDeviceStats(const WindowView& window, std::optional<int64_t> activity_dropped,
                        Summary* out) {
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
  // Device time by category, summed over steps and their devices, and the
  // step-device pairs and their time (cupti).
  int64_t cat_kernel_ns = 0, cat_memcpy_ns = 0, cat_memset_ns = 0, cat_comm_ns = 0,
          cat_window_ns = 0, cat_pairs = 0;
  window.ForEachStep([&](const StepRecord& s, const StepDevices* devices) {
    if (s.device_busy_ns < 0 || devices == nullptr) return;
    ++gpu_steps;
    if (s.device_span_ns >= 0) device_spans.push_back(s.device_span_ns);
    idle_launch_ns += std::max<int64_t>(0, s.idle_launch_ns);
    if (with_activity) {
      const ActivityCounts& c = devices->activity;
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
      act.sync_idle_ns += c.sync_idle_ns;
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
      cat_kernel_ns += c.busy_kernel_ns;
      cat_memcpy_ns += c.busy_memcpy_ns;
      cat_memset_ns += c.busy_memset_ns;
      cat_comm_ns += c.busy_comm_ns;
      const int64_t pairs = std::max<int64_t>(1, s.num_devices);
      cat_window_ns += s.duration_ns() * pairs;
      cat_pairs += pairs;
    }
    const int64_t device_window = s.duration_ns() * std::max<int64_t>(1, s.num_devices);
    gpu_window_ns += device_window;
    gpu_idle_ns += device_window - s.device_busy_ns;
    idle_other_ns += std::max<int64_t>(0, s.idle_other_ns);
    for (size_t d = 0; d < s.num_devices; ++d) {
      PerDevice& pd = per_device[devices->devices[d].device];
      ++pd.steps;
      pd.window_ns += s.duration_ns();
      pd.busy_ns += devices->devices[d].busy_ns;
    }
  });
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
    if (cat_window_ns > 0) {
      // Idle is what the categories leave: the busy time gpu_idle_pct uses.
      const int64_t cat_idle_ns = std::max<int64_t>(
          0, cat_window_ns - cat_kernel_ns - cat_memcpy_ns - cat_memset_ns - cat_comm_ns);
      const double pairs = static_cast<double>(cat_pairs);
      const double window_ns = static_cast<double>(cat_window_ns);
      const auto per_step = [&](int64_t ns) {
        return static_cast<double>(ns) * kNsToSeconds / pairs;
      };
      const auto share = [&](int64_t ns) { return static_cast<double>(ns) / window_ns; };
      a.device_time_kernel = per_step(cat_kernel_ns);
      a.device_time_memcpy = per_step(cat_memcpy_ns);
      a.device_time_memset = per_step(cat_memset_ns);
      a.device_time_comm = per_step(cat_comm_ns);
      a.device_time_idle = per_step(cat_idle_ns);
      a.device_share_kernel = share(cat_kernel_ns);
      a.device_share_memcpy = share(cat_memcpy_ns);
      a.device_share_memset = share(cat_memset_ns);
      a.device_share_comm = share(cat_comm_ns);
      a.device_share_idle = share(cat_idle_ns);
      a.sync_idle_share = share(act.sync_idle_ns);
    }
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

void FillPhaseStats(const WindowView& window, const std::vector<std::string>& names,
                    WindowTotals* totals, int64_t gpu_window_ns, Summary* out) {
  const int64_t window_ns = totals->window_ns;
  const auto share_of = [&](int64_t ns) {
    return window_ns > 0 ? static_cast<double>(ns) / static_cast<double>(window_ns) : 0.0;
  };

  out->phases.clear();
  const std::vector<PhaseTotals>& phase_totals = window.phase_totals();
  std::vector<int64_t> backlogs;
  for (size_t id = 0; id < phase_totals.size() && id < names.size(); ++id) {
    const PhaseTotals& t = phase_totals[id];
    if (t.time.count() == 0 && t.outside_count == 0) continue;
    const auto phase = static_cast<uint16_t>(id);
    PhaseStats ps;
    ps.name = names[id];
    ps.builtin = id < static_cast<size_t>(kNumBuiltinPhases);
    ps.steps = t.time.count();
    ps.count = t.count;
    ps.top_level = t.top_level_steps > 0;
    const auto total_ns = static_cast<int64_t>(t.time.sum());
    ps.total = static_cast<double>(total_ns) * kNsToSeconds;
    ps.inclusive_share = share_of(total_ns);
    ps.share = share_of(t.top_ns);
    ps.time = SelectQuantiles(
        t.time, [&](auto f) { window.ForEachPhaseTime(phase, f); },
        [&](const TargetBuckets& b, TargetSink& sink) {
          window.CollectPhaseTimes(phase, b, sink);
        });
    if (t.device.count() > 0) {
      backlogs.clear();
      ps.device = SelectQuantiles(t.device, [&](auto f) {
        window.ForEachSample(phase, [&](uint64_t, const PhaseSample& sample) {
          if (sample.device_ns < 0) return;
          f(sample.device_ns);
          if (sample.backlog_ns >= 0) backlogs.push_back(sample.backlog_ns);
        });
      });
      ps.backlog_p50 = ExactQuantiles(backlogs).p50;
    }
    ps.outside_steps_count = t.outside_count;
    ps.outside_steps_total = static_cast<double>(t.outside_total_ns) * kNsToSeconds;
    if (gpu_window_ns > 0 && t.idle_ns > 0) {
      out->idle_by_cause[ps.name] =
          100.0 * static_cast<double>(t.idle_ns) / static_cast<double>(gpu_window_ns);
    }
    out->phases.push_back(std::move(ps));
  }
  if (!window.empty()) {
    // Step time outside every top-level phase: the synthetic phase "other".
    PhaseStats ps;
    ps.name = std::string(kOtherPhaseName);
    ps.builtin = true;
    ps.top_level = true;
    ps.steps = static_cast<int64_t>(window.size());
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

bool RollingCounters(const WindowView& window, double* step_p95_s,
                     std::optional<double>* gpu_idle_pct) {
  if (window.empty()) return false;
  double window_ns = 0, idle_ns = 0;
  window.ForEachStep([&](const StepRecord& s, const StepDevices*) {
    if (s.device_busy_ns >= 0) {
      const double w = static_cast<double>(s.duration_ns()) * std::max<double>(1, s.num_devices);
      window_ns += w;
      idle_ns += w - static_cast<double>(s.device_busy_ns);
    }
  });
  std::vector<int64_t> durations;
  durations.reserve(window.size());
  window.ForEachStep(
      [&](const StepRecord& s, const StepDevices*) { durations.push_back(s.duration_ns()); });
  *step_p95_s = ExactQuantiles(durations).p95;
  gpu_idle_pct->reset();
  if (window_ns > 0) *gpu_idle_pct = 100.0 * idle_ns / window_ns;
  return true;
}

}  // namespace gpuscope::internal
