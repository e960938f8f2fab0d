#include "core/aggregator.h"

#include "core/step_series.h"
#include "core/window_stats.h"

namespace gpuscope::internal {

Aggregator::Aggregator(int window, int max_phases)
    : window_(window, max_phases), assembler_(&window_, &telemetry_, &device_) {}

WindowSnapshot Aggregator::Snapshot(const PhaseTable& phases) const {
  WindowSnapshot snapshot;
  snapshot.window = &window_;
  snapshot.phases = &phases;
  snapshot.telemetry = &telemetry_;
  snapshot.pending_steps = device_.steps_waiting();
  if (const ActivitySource* activity = device_.activity(); activity != nullptr) {
    snapshot.activity_dropped = static_cast<int64_t>(activity->dropped());
  }
  return snapshot;
}

void Aggregator::FillSeries(const PhaseTable& table, std::vector<StepPoint>* out) const {
  internal::FillSeries(window_, table, out);
}

bool Aggregator::RollingCounters(double* step_p95_s, std::optional<double>* gpu_idle_pct) const {
  return internal::RollingCounters(window_, step_p95_s, gpu_idle_pct);
}

void Aggregator::TraceSnapshot(std::vector<TraceStep>* out, int64_t* launch_threshold_ns) const {
  out->clear();
  out->reserve(window_.trace.size());
  for (size_t i = 0; i < window_.trace.size(); ++i) out->push_back(window_.trace[i]);
  *launch_threshold_ns = device_.launch_threshold_ns();
}

}  // namespace gpuscope::internal
