// File: gpuscope/timeline.h
// -----------------------------------------------------------------------------
//
// What a session keeps step by step, beyond the summary:
//
//   * `Session::StepSeries()`: one `StepPoint` per step of the window (step
//     time, each top-level phase's time, GPU idle by cause, telemetry), for
//     plots such as the HTML report's.
//   * `Session::TraceJson()`: the last `Options::trace_steps` steps as a
//     Chrome trace (chrome://tracing, https://ui.perfetto.dev): host steps and
//     phases, device activity per stream (source cupti) or each phase's
//     device span (source events), and GPU idle gaps labeled with their
//     cause. Format: docs/trace.md.
//
// Example:
//
//   std::ofstream("trace.json") << session.TraceJson();
//   for (const gpuscope::StepPoint& p : session.StepSeries()) plot(p.index, p.duration);

#ifndef GPUSCOPE_TIMELINE_H_
#define GPUSCOPE_TIMELINE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpuscope {

// StepPoint
//
// One completed step. Times in seconds; `begin` on the session's host clock.
struct StepPoint {
  uint64_t index = 0;  // completed-step number, 0-based
  double begin = 0;
  double duration = 0;
  // Top-level host time per phase, "other" (outside every top-level phase)
  // included: they sum to `duration`.
  std::map<std::string, double> phases;
  // With a GPU source, once the step's device data is in: GPU idle (mean
  // over its devices) as a percentage, and idle seconds per cause (a phase,
  // "other", "launch").
  std::optional<double> gpu_idle_pct;
  std::map<std::string, double> idle_by_cause;
  // Telemetry over the step (nullopt: not sampled).
  std::optional<double> gpu_utilization_pct;  // as nvidia-smi reports it
  std::optional<double> sm_clock_ratio;
  std::optional<double> host_cpu_pct;
  std::optional<double> host_iowait_pct;
  std::optional<double> worker_cores;

  bool operator==(const StepPoint&) const = default;
};

// StepSeriesToJson()
//
// `{"schema": "gpuscope.step_series", "schema_version": 1, "steps": [...]}`,
// each step an object with the fields above (nullopt as null).
std::string StepSeriesToJson(const std::vector<StepPoint>& series);

}  // namespace gpuscope

#endif  // GPUSCOPE_TIMELINE_H_
