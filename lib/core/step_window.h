// The window: what a session keeps of its completed steps, and what every
// summary, series and trace is read from. A ring of the last `window` steps,
// per phase a ring of its per-step times, the lifetime histogram of step
// time, and the last steps' timelines for the trace.
//
// Step assembly (core/step_assembly.h) appends to it, device resolution
// (core/device_resolution.h) and the telemetry window
// (core/telemetry_window.h) fill in the fields they measure, the window
// statistics (core/window_stats.h) and the series (core/step_series.h) read
// it. Plain data, not thread-safe: the session's aggregator lock guards it.

#ifndef GPUSCOPE_LIB_CORE_STEP_WINDOW_H_
#define GPUSCOPE_LIB_CORE_STEP_WINDOW_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/telemetry.h"
#include "base/ring.h"
#include "core/activity_timeline.h"
#include "core/log_histogram.h"
#include "core/trace_steps.h"

namespace gpuscope::internal {

// One device's busy time in a step.
struct DeviceBusy {
  int device = 0;
  int64_t busy_ns = 0;  // events: an upper bound
};

// Devices a step keeps numbers for; a step on more is left without GPU
// numbers.
inline constexpr size_t kMaxDevicesPerStep = 8;

// One completed step. Device, idle and telemetry fields are filled by the
// GPU sources when a session has them; -1 / NaN mean "not measured".
struct StepRecord {
  uint64_t index = 0;  // completed-step number, 0-based
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t samples = -1;
  int64_t tokens = -1;
  int64_t top_level_ns = 0;  // sum of top-level phase host time

  int64_t device_busy_ns = -1;  // GPU busy within the step, summed over `devices`
  std::array<DeviceBusy, kMaxDevicesPerStep> devices{};
  uint8_t num_devices = 0;        // devices timed in the step
  int64_t device_span_ns = -1;    // events: first to last completion
  int64_t backlog_begin_ns = -1;  // events: device lag at the step's begin
  int64_t idle_other_ns = -1;     // idle with no phase open
  int64_t idle_launch_ns = -1;    // idle gaps shorter than the launch threshold
  ActivityCounts activity;        // cupti: per-step counts (valid when device_busy_ns >= 0)
  StepTelemetry telemetry;        // time-weighted over the step

  int64_t duration_ns() const { return end_ns - begin_ns; }
};

// One phase's share of one step.
struct PhaseSample {
  uint64_t step_index = 0;
  int64_t total_ns = 0;     // union of the phase's intervals in the step
  int64_t top_ns = 0;       // its top-level intervals' time (part of the breakdown)
  int64_t device_ns = -1;   // device time (events: span; CUPTI: busy), -1: not measured
  int64_t idle_ns = -1;     // GPU idle charged to this phase
  int64_t backlog_ns = -1;  // events: device lag at the phase's first begin
  uint32_t count = 0;       // occurrences
  uint32_t top_count = 0;   // top-level occurrences
};

// One phase id's history.
struct PhaseHistory {
  Ring<PhaseSample> window;   // allocated when the phase first completes in a step
  int64_t outside_count = 0;  // occurrences outside any step, since the start
  int64_t outside_total_ns = 0;
};

// StepWindow
//
// The completed steps a session keeps. Plain data with lookups; whoever
// holds it (the aggregator) keeps the fields consistent: `steps` holds steps
// `first_index()` .. `completed - 1`, and each phase ring holds samples of
// steps in increasing index order.
struct StepWindow {
  // `window` steps (and per-phase samples), `max_phases` phase ids.
  StepWindow(int window, int max_phases)
      : capacity(static_cast<size_t>(window)),
        steps(static_cast<size_t>(window)),
        phases(static_cast<size_t>(max_phases)) {}

  // The completed-step number of the oldest step kept.
  uint64_t first_index() const { return completed - steps.size(); }

  // The sample of phase `phase_id` for step `step_index`, or nullptr (the
  // phase did not occur in it, or it left the phase's ring).
  PhaseSample* FindSample(uint16_t phase_id, uint64_t step_index);

  // The kept timeline of step `index`, or nullptr.
  TraceStep* FindTrace(uint64_t index);

  const size_t capacity;             // Options::window
  Ring<StepRecord> steps;            // the last `capacity` completed steps
  std::vector<PhaseHistory> phases;  // indexed by phase id
  LogHistogram lifetime;             // every completed step's time
  uint64_t completed = 0;            // steps completed since the start
  int64_t incomplete_steps = 0;      // steps left out: records of them were dropped
  Ring<TraceStep> trace{0};          // the last steps' timelines; slots (and vectors) reused
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_STEP_WINDOW_H_
