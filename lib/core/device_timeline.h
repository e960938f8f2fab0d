// What CUDA-event-style markers at scope boundaries say about a step's GPU
// time (DESIGN.md §2, docs/definitions.md "Events").
//
// Each boundary b has a host record time h(b) and a device completion time
// c(b) >= h(b), both on the host clock. On an in-order stream, work enqueued
// between two boundaries b_i, b_{i+1} can only run inside
// [max(c_i, h_i), c_{i+1}]: not before the earlier marker completed, not
// before it was enqueued, and done by the time the later marker completed.
// The union of those intervals bounds GPU busy time from above, so the idle
// time it leaves is a lower bound. One stated assumption tightens it: while
// `data` (waiting for the input pipeline) is the innermost open phase, no
// work is enqueued on the recorded stream, unless the next marker shows
// otherwise (it completed later than both the work before it and its own
// record time). Phases nested in data are not covered by the assumption.
//
// Backlog at a boundary is c - h: how far the GPU lagged the host there.

#ifndef GPUSCOPE_LIB_CORE_DEVICE_TIMELINE_H_
#define GPUSCOPE_LIB_CORE_DEVICE_TIMELINE_H_

#include <cstdint>
#include <vector>

namespace gpuscope::internal {

// Markers completing within this of their record time count as "the GPU
// had nothing pending" (driver latency on a real GPU is a few microseconds).
inline constexpr int64_t kMarkerSlackNs = 20'000;

// Phase id for time inside no phase ("other").
inline constexpr int kNoPhase = -1;

struct Boundary {
  int64_t host_ns = 0;    // when the marker was recorded
  int64_t device_ns = 0;  // when it completed
};

// One phase occurrence in the step, with the markers at its ends.
struct PhaseSpan {
  int phase_id = kNoPhase;
  int depth = 0;          // 0: top level
  bool is_data = false;   // the input-pipeline phase (see above)
  Boundary begin;
  Boundary end;
};

struct StepTimelineInput {
  Boundary begin;                  // the step's own markers
  Boundary end;
  std::vector<PhaseSpan> phases;   // any order
};

struct StepTimeline {
  int64_t window_ns = 0;          // host step time
  int64_t busy_upper_ns = 0;      // GPU busy within the window, at most
  int64_t idle_lower_ns = 0;      // window - busy_upper: idle, at least
  int64_t device_span_ns = 0;     // c(end) - c(begin)
  int64_t backlog_begin_ns = 0;   // c(begin) - h(begin)
  int64_t idle_other_ns = 0;      // idle with no phase open
  // Per entry of StepTimelineInput::phases: its device span, its backlog at
  // begin, and the idle time charged to it (innermost open phase).
  struct PerPhase {
    int64_t device_span_ns = 0;
    int64_t backlog_begin_ns = 0;
    int64_t idle_ns = 0;
  };
  std::vector<PerPhase> phases;
};

// AnalyzeStepTimeline()
//
// Device-side numbers for one step whose markers all completed.
StepTimeline AnalyzeStepTimeline(const StepTimelineInput& in);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_DEVICE_TIMELINE_H_
