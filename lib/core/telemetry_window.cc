#include "core/telemetry_window.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "backends/clocks_event_reasons.h"

namespace gpuscope::internal {
namespace {

// A weighted mean that skips unknown (NaN) values: nullopt when none came.
struct Mean {
  double sum = 0, weight = 0;
  void Add(double v, double w) {
    if (!std::isnan(v) && w > 0) {
      sum += v * w;
      weight += w;
    }
  }
  std::optional<double> Get() const {
    return weight > 0 ? std::optional<double>(sum / weight) : std::nullopt;
  }
};

float AsFloat(std::optional<double> v) {
  return v.has_value() ? static_cast<float>(*v) : std::numeric_limits<float>::quiet_NaN();
}

// One GPU's means over the window, and its latest state.
struct GpuMeans {
  GpuTelemetry latest;
  Mean util, sm, sm_max, mem, mem_max, power, limit, temp, used, total, rx, tx;
  uint64_t reasons = 0;
};

// Adds one GPU's sample: its utilization as a rate, the rest as state
// holding after the sample for `w`.
void AddGpuSample(const GpuSample& gs, double w, double rate, GpuMeans& m) {
  m.util.Add(gs.utilization_pct, rate);
  m.latest.index = gs.index;
  if (w <= 0) return;  // the rest is state, holding after the sample
  m.sm.Add(gs.sm_clock_mhz, w);
  m.sm_max.Add(gs.sm_clock_max_mhz, w);
  m.mem.Add(gs.mem_clock_mhz, w);
  m.mem_max.Add(gs.mem_clock_max_mhz, w);
  m.power.Add(gs.power_w, w);
  m.limit.Add(gs.power_limit_w, w);
  m.temp.Add(gs.temperature_c, w);
  m.used.Add(gs.memory_used_bytes, w);
  m.total.Add(gs.memory_total_bytes, w);
  m.rx.Add(gs.pcie_rx_bytes_per_s, w);
  m.tx.Add(gs.pcie_tx_bytes_per_s, w);
  m.reasons |= gs.clocks_event_reasons;
  GpuTelemetry& l = m.latest;
  l.pcie_gen = gs.pcie_gen;
  l.pcie_gen_max = gs.pcie_gen_max;
  l.pcie_width = gs.pcie_width;
  l.pcie_width_max = gs.pcie_width_max;
  l.ecc_corrected = gs.ecc_corrected;
  l.ecc_uncorrected = gs.ecc_uncorrected;
  l.persistence_mode = gs.persistence_mode;
  l.compute_mode = gs.compute_mode;
  l.mig_mode = gs.mig_mode;
  l.process_memory_bytes = gs.process_memory_bytes;
}

// The mean, NaN when none came.
double Value(const Mean& m) { return m.Get().value_or(std::numeric_limits<double>::quiet_NaN()); }

// One GPU's telemetry over the window: its latest state and its means.
GpuTelemetry GpuTelemetryOf(const GpuMeans& m) {
  GpuTelemetry g = m.latest;
  g.utilization_pct = Value(m.util);
  g.sm_clock_mhz = Value(m.sm);
  g.sm_clock_max_mhz = Value(m.sm_max);
  g.mem_clock_mhz = Value(m.mem);
  g.mem_clock_max_mhz = Value(m.mem_max);
  g.power_w = Value(m.power);
  g.power_limit_w = Value(m.limit);
  g.temperature_c = Value(m.temp);
  g.memory_used_bytes = Value(m.used);
  g.memory_total_bytes = Value(m.total);
  g.pcie_rx_bytes_per_s = Value(m.rx);
  g.pcie_tx_bytes_per_s = Value(m.tx);
  g.clocks_event_reasons = ClocksEventReasonNames(m.reasons);
  return g;
}

}  // namespace

void TelemetryWindow::Add(const TelemetrySample& sample, StepWindow* window) {
  if (!samples_.empty() && sample.host_ns < samples_.back().host_ns) return;  // out of order
  if (samples_.size() == kMaxSamples) samples_.pop_front();
  samples_.push_back(sample);
  // Revise the steps still open (the newest ones: steps end in order).
  open_ = std::min(open_, window->size());
  size_t still_open = 0;
  window->ForEachNewest(open_, [&](StepRecord* s) {
    s->telemetry = Over(s->begin_ns, s->end_ns);
    if (s->end_ns > sample.host_ns) ++still_open;
  });
  open_ = still_open;
}

template <typename F>
void TelemetryWindow::ForEachSampleOver(int64_t begin_ns, int64_t end_ns, F f) const {
  const size_t n = samples_.size();
  // The first sample that can bear on the window: the one holding at its
  // begin (the last at or before it).
  size_t i = static_cast<size_t>(
      std::upper_bound(samples_.begin(), samples_.end(), begin_ns,
                       [](int64_t t, const TelemetrySample& s) { return t < s.host_ns; }) -
      samples_.begin());
  if (i > 0) --i;
  const bool instant = end_ns == begin_ns;
  for (; i < n; ++i) {
    const int64_t at = samples_[i].host_ns;
    const int64_t prev = i > 0 ? samples_[i - 1].host_ns : INT64_MIN;
    if (prev >= end_ns && !(instant && prev == end_ns)) break;
    const int64_t next = i + 1 < n ? samples_[i + 1].host_ns : INT64_MAX;
    double hold = static_cast<double>(std::min(next, end_ns) - std::max(at, begin_ns));
    if (instant) hold = at <= begin_ns && begin_ns < next ? 1 : 0;
    double rate = 0;
    if (i > 0) {
      rate = static_cast<double>(std::min(at, end_ns) - std::max(prev, begin_ns));
      if (instant) rate = prev < begin_ns && begin_ns <= at ? 1 : 0;
    }
    if (hold > 0 || rate > 0) f(samples_[i], std::max(0.0, hold), std::max(0.0, rate));
  }
}

// State (clocks, throttle reasons) holds from a sample to the next (hold
// weights); rates (CPU, iowait, nvidia-smi's utilization) describe the
// interval before their sample (rate weights).
StepTelemetry TelemetryWindow::Over(int64_t begin_ns, int64_t end_ns) const {
  StepTelemetry t;
  Mean util, ratio, cpu, iowait, proc, workers, children, wait;
  ForEachSampleOver(begin_ns, end_ns, [&](const TelemetrySample& s, double hold, double rate) {
    Mean gpu_util;
    double lowest_ratio = std::numeric_limits<double>::quiet_NaN();
    for (int g = 0; g < s.gpu_count; ++g) {
      const GpuSample& gs = s.gpus[static_cast<size_t>(g)];
      gpu_util.Add(gs.utilization_pct, 1);
      if (gs.sm_clock_max_mhz > 0) {
        const double r = gs.sm_clock_mhz / gs.sm_clock_max_mhz;
        if (std::isnan(lowest_ratio) || r < lowest_ratio) lowest_ratio = r;
      }
      if (hold > 0) t.clocks_event_reasons |= gs.clocks_event_reasons;
    }
    util.Add(gpu_util.Get().value_or(std::numeric_limits<double>::quiet_NaN()), rate);
    ratio.Add(lowest_ratio, hold);
    cpu.Add(s.host_cpu_pct, rate);
    iowait.Add(s.host_iowait_pct, rate);
    proc.Add(s.process_cores, rate);
    workers.Add(s.worker_cores, rate);
    children.Add(s.child_cores, rate);
    wait.Add(s.cpu_wait_share, rate);
  });
  t.gpu_utilization_pct = AsFloat(util.Get());
  t.sm_clock_ratio = AsFloat(ratio.Get());
  t.host_cpu_pct = AsFloat(cpu.Get());
  t.host_iowait_pct = AsFloat(iowait.Get());
  t.process_cores = AsFloat(proc.Get());
  t.worker_cores = AsFloat(workers.Get());
  t.child_cores = AsFloat(children.Get());
  t.cpu_wait_share = AsFloat(wait.Get());
  return t;
}

void AddStepTelemetry(const WindowView& view, TelemetryStats* stats) {
  TelemetryStats& ts = *stats;
  Mean util, ratio, cpu, iowait, proc, workers, children, wait, throttled_ratio;
  uint64_t reasons = 0;
  int64_t throttled = 0;
  view.ForEachStep([&](const StepRecord& s, const StepDevices*) {
    const StepTelemetry& t = s.telemetry;
    const bool covered = !std::isnan(t.gpu_utilization_pct) || !std::isnan(t.host_cpu_pct) ||
                         !std::isnan(t.sm_clock_ratio) || !std::isnan(t.process_cores);
    if (!covered) return;
    ++ts.steps;
    const double w = static_cast<double>(std::max<int64_t>(1, s.duration_ns()));
    util.Add(t.gpu_utilization_pct, w);
    ratio.Add(t.sm_clock_ratio, w);
    cpu.Add(t.host_cpu_pct, w);
    iowait.Add(t.host_iowait_pct, w);
    proc.Add(t.process_cores, w);
    workers.Add(t.worker_cores, w);
    children.Add(t.child_cores, w);
    wait.Add(t.cpu_wait_share, w);
    reasons |= t.clocks_event_reasons;
    if (IsThrottling(t.clocks_event_reasons)) {
      ++throttled;
      throttled_ratio.Add(t.sm_clock_ratio, w);
    }
  });
  ts.gpu_utilization_pct = util.Get();
  ts.sm_clock_ratio = ratio.Get();
  ts.throttled_sm_clock_ratio = throttled_ratio.Get();
  ts.host_cpu_pct = cpu.Get();
  ts.host_iowait_pct = iowait.Get();
  ts.process_cores = proc.Get();
  ts.worker_cores = workers.Get();
  ts.child_cores = children.Get();
  ts.cpu_wait_share = wait.Get();
  ts.throttled_steps =
      ts.steps > 0 ? static_cast<double>(throttled) / static_cast<double>(ts.steps) : 0.0;
  ts.clocks_event_reasons = ClocksEventReasonNames(reasons);
}

std::optional<TelemetryStats> TelemetryWindow::SampleStats(const StepWindow& window) const {
  if (source_.empty()) return std::nullopt;
  TelemetryStats ts;
  ts.source = source_;
  // Host memory and load, and per GPU: time-weighted over the window, each
  // sample holding until the next (as for steps); state is the last
  // sample's that covers the window.
  if (!window.empty()) {
    const int64_t from = window.Find(window.first_index())->begin_ns;
    const int64_t to = window.Find(window.completed() - 1)->end_ns;
    Mean avail, pressure, swap, load, cpus, worker_wait, cpu_pressure, steal, throttled;
    std::map<int, GpuMeans> per_gpu;
    ForEachSampleOver(from, to, [&](const TelemetrySample& s, double w, double rate) {
      avail.Add(s.memory_available_bytes, w);
      pressure.Add(s.memory_pressure_pct, w);
      swap.Add(s.swap_pages_per_s, rate);
      load.Add(s.load1, w);
      cpus.Add(s.cpus_available, w);
      worker_wait.Add(s.worker_cpu_wait_cores, rate);
      cpu_pressure.Add(s.cpu_pressure_pct, w);
      steal.Add(s.steal_pct, rate);
      throttled.Add(s.cpu_throttled_pct, rate);
      for (int g = 0; g < s.gpu_count; ++g) {
        const GpuSample& gs = s.gpus[static_cast<size_t>(g)];
        AddGpuSample(gs, w, rate, per_gpu[gs.index]);
      }
    });
    ts.memory_available_bytes = avail.Get();
    ts.memory_pressure_pct = pressure.Get();
    ts.swap_pages_per_s = swap.Get();
    ts.load1 = load.Get();
    ts.cpus_available = cpus.Get();
    ts.worker_cpu_wait_cores = worker_wait.Get();
    ts.cpu_pressure_pct = cpu_pressure.Get();
    ts.steal_pct = steal.Get();
    ts.cpu_throttled_pct = throttled.Get();
    for (const auto& [index, m] : per_gpu) ts.gpus.push_back(GpuTelemetryOf(m));
  }
  return ts;
}

}  // namespace gpuscope::internal
