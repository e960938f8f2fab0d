// File: gpuscope/timeline.h
// -----------------------------------------------------------------------------
//
// What a session keeps step by step, beyond the summary:
//
//   * `Session::StepSeries()`: one `StepPoint` per step of the window (step
//     time, each top-level phase's time, GPU idle by cause, telemetry), for
//     plots such as the HTML report's.
//   * `Session::StepColumns()`: the same, a column per field, for long
//     windows (65,536 steps of 100 phases: a map per step is slow to make).
//   * the last `Options::trace_steps` steps' timelines, which
//     `ToChromeTrace(session)` (gpuscope/report.h) writes as a Chrome trace.
//
// Example:
//
//   std::ofstream("trace.json") << gpuscope::ToChromeTrace(session);
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
  // The step's peak GPU memory allocated (its fullest GPU), bytes: nullopt
  // without an allocator sample in it (Summary::memory).
  std::optional<double> memory_peak_bytes;

  bool operator==(const StepPoint&) const = default;
};

// SeriesColumns
//
// The window's steps as StepPoint holds them, one column per field
// (Session::StepColumns()): what a plot of a long window reads, without a
// map per step. Element i of every column is step index[i], oldest first.
// Times in seconds; NaN where not measured.
struct SeriesColumns {
  std::vector<uint64_t> index;
  std::vector<double> begin;
  std::vector<double> duration;
  // Top-level host time per phase, a column per phase with top-level time
  // in some step of the window (0 in the others), by phase id, "other"
  // last: each step's values sum to its duration.
  std::vector<std::string> phase_names;
  std::vector<std::vector<double>> phases;  // [phase][step]
  // GPU idle as StepPoint::gpu_idle_pct (NaN: not measured in that step),
  // and idle seconds per cause, a column per cause with idle time in some
  // step ("other", "launch", then phases by id; 0 in the others).
  std::vector<double> gpu_idle_pct;
  std::vector<std::string> idle_causes;
  std::vector<std::vector<double>> idle_by_cause;  // [cause][step]
  // Telemetry over the step (NaN: not sampled).
  std::vector<double> gpu_utilization_pct;
  std::vector<double> sm_clock_ratio;
  std::vector<double> host_cpu_pct;
  std::vector<double> host_iowait_pct;
  std::vector<double> worker_cores;
  std::vector<double> memory_peak_bytes;  // StepPoint::memory_peak_bytes, NaN: not sampled

  size_t size() const { return index.size(); }
};

}  // namespace gpuscope

#endif  // GPUSCOPE_TIMELINE_H_
