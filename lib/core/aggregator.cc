#include "core/aggregator.h"

#include "core/window_stats.h"

namespace gpuscope::internal {

Aggregator::Aggregator(int window, int max_phases)
    : window_(window, max_phases),
      memory_(window),
      assembler_(&window_, &telemetry_, &memory_, &device_) {}

WindowSnapshot Aggregator::Snapshot(const PhaseTable& phases) const {
  WindowSnapshot snapshot;
  snapshot.window = window_.Snapshot();
  snapshot.phase_names.reserve(static_cast<size_t>(phases.size()));
  for (int id = 0; id < phases.size(); ++id)
    snapshot.phase_names.emplace_back(phases.Name(static_cast<uint16_t>(id)));
  snapshot.telemetry = telemetry_.SampleStats(window_);
  snapshot.memory = memory_.Snapshot();
  snapshot.pending_steps = device_.steps_waiting(window_.first_index());
  if (const ActivitySource* activity = device_.activity(); activity != nullptr) {
    snapshot.activity_dropped = static_cast<int64_t>(activity->dropped());
  }
  return snapshot;
}

bool Aggregator::RollingCounters(double* step_p95_s, std::optional<double>* gpu_idle_pct) const {
  return internal::RollingCounters(window_.Snapshot(/*with_phase_totals=*/false), step_p95_s,
                                   gpu_idle_pct);
}

StallHistory Aggregator::StallHistoryOf() const {
  StallHistory h;
  const WindowView view = window_.Snapshot(/*with_phase_totals=*/false);
  h.measured_steps = view.size();
  h.warming_up = window_.warmup_left() > 0;
  if (view.empty()) return h;
  std::vector<int64_t> durations;
  durations.reserve(view.size());
  view.ForEachStep(
      [&](const StepRecord& s, const StepDevices*) { durations.push_back(s.duration_ns()); });
  const Quantiles q = ExactQuantiles(durations);
  h.step_p99_s = q.p99;
  h.step_max_s = q.max;
  return h;
}

void Aggregator::TraceSnapshot(std::vector<TraceStep>* out, int64_t* launch_threshold_ns) const {
  out->clear();
  out->reserve(window_.trace.size());
  for (size_t i = 0; i < window_.trace.size(); ++i) out->push_back(window_.trace[i]);
  *launch_threshold_ns = device_.launch_threshold_ns();
}

}  // namespace gpuscope::internal
