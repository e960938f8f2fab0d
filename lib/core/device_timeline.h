// What CUDA-event-style markers at scope boundaries say about a step's GPU
// time (docs/definitions.md "Events").
//
// Each boundary b has a host record time h(b) and a device completion time
// c(b) >= h(b), both on the host clock, and a lane: the stream (of one
// device) its marker was recorded on. On an in-order stream, work enqueued
// between two consecutive markers b_i, b_{i+1} of that stream can only run
// inside [max(c_i, h_i), c_{i+1}]: not before the earlier marker completed,
// not before it was enqueued, and done by the time the later one completed.
// The union of those intervals over a device's streams bounds that device's
// busy time from above, so the idle time it leaves is a lower bound.
//
// Stated assumptions (each dropped for a pair of markers whose later marker
// shows work: it completed later than both the work before it and its own
// record time, plus kMarkerSlackNs):
//   * the input pipeline: while `data` is the innermost open phase, nothing
//     is enqueued on any recorded stream (phases nested in data are not
//     covered);
//   * streams a phase names: work goes on a stream only while a scope
//     recorded on it is open. The session's stream is covered by the step
//     itself, so only streams that phases name explicitly are concerned.
//
// Between steps, a lane's last marker before the step (LanePast) says how
// long work enqueued earlier may have kept the device busy, whether or not
// the lane has markers in this step. A device takes part in a step when one
// of its lanes has a marker in it or earlier work running into it.
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
  uint16_t lane = 0;      // the stream it was recorded on (DeviceTimer lanes)
};

// One phase occurrence in the step, with the markers at its ends (both on
// one lane).
struct PhaseSpan {
  int phase_id = kNoPhase;
  int depth = 0;         // 0: top level
  bool is_data = false;  // the input-pipeline phase (see above)
  Boundary begin;
  Boundary end;
};

// What came before this step on one lane.
struct LanePast {
  enum class State : uint8_t {
    kNone,     // no marker was ever recorded on the lane: no earlier work
    kKnown,    // `last` is the lane's last marker before this step
    kUnknown,  // markers went unanalyzed (a step was dropped): assume the worst
  };
  State state = State::kNone;
  Boundary last;
};

struct StepTimelineInput {
  Boundary begin;  // the step's own markers (the session's lane)
  Boundary end;
  std::vector<PhaseSpan> phases;  // any order
  std::vector<int> lane_device;   // device ordinal per lane; lanes past its end: device 0
  std::vector<LanePast> past;     // per lane; lanes past its end: kNone
};

// One device's share of the step.
struct DeviceIdle {
  int device = 0;
  int64_t busy_upper_ns = 0;  // busy within the window, at most
  int64_t idle_lower_ns = 0;  // window - busy_upper: idle, at least
  int64_t idle_other_ns = 0;  // idle with no phase open
};

struct StepTimeline {
  int64_t window_ns = 0;         // host step time
  int64_t device_span_ns = 0;    // c(end) - c(begin)
  int64_t backlog_begin_ns = 0;  // c(begin) - h(begin)
  // Per device taking part in the step (see above), by ascending ordinal.
  std::vector<DeviceIdle> devices;
  // Sums over `devices` (with one device, that device's numbers).
  int64_t busy_upper_ns = 0;
  int64_t idle_lower_ns = 0;
  int64_t idle_other_ns = 0;
  // Per entry of StepTimelineInput::phases: its device span, its backlog at
  // begin, and the idle time charged to it (innermost open phase), summed
  // over devices.
  struct PerPhase {
    int64_t device_span_ns = 0;
    int64_t backlog_begin_ns = 0;
    int64_t idle_ns = 0;
  };
  std::vector<PerPhase> phases;
  // Per lane with markers in the step: its last marker (the next step's
  // LanePast).
  std::vector<Boundary> lane_last;
};

// AnalyzeStepTimeline()
//
// Device-side numbers for one step whose markers all completed.
StepTimeline AnalyzeStepTimeline(const StepTimelineInput& in);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_DEVICE_TIMELINE_H_
