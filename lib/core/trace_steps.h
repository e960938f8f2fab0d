// The last steps' timelines, as the aggregator keeps them for the Chrome
// trace (export/chrome_trace.h).

#ifndef GPUSCOPE_LIB_CORE_TRACE_STEPS_H_
#define GPUSCOPE_LIB_CORE_TRACE_STEPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/activity_source.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

struct TraceSpan {
  uint16_t id = 0;  // phase id
  uint8_t depth = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  // Source events: when the phase's markers completed on the device (-1:
  // not known), and their lane.
  int64_t device_begin_ns = -1;
  int64_t device_end_ns = -1;
  uint16_t lane = 0;
  int device = 0;
};

// Source cupti: one device's time in a step by category (as
// ActivityDeviceResult splits it), for the step's slice.
struct TraceDeviceTime {
  uint32_t device = 0;
  int64_t kernel_ns = 0;
  int64_t memcpy_ns = 0;
  int64_t memset_ns = 0;
  int64_t comm_ns = 0;
  int64_t idle_ns = 0;
};

struct TraceStep {
  uint64_t index = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  std::vector<TraceSpan> phases;
  // Source cupti: activity overlapping the step (syncs included).
  std::vector<DeviceInterval> activity;
  bool has_activity = false;
  uint64_t activity_dropped = 0;             // records past kMaxTraceActivityPerStep
  std::vector<TraceDeviceTime> device_time;  // by device ordinal
};

// TraceCapture
//
// What the Chrome trace encodes (export/chrome_trace.h), as a value: the
// kept steps' timelines (oldest first), the names of their phase ids, the
// launch-gap threshold and the rank. A live session captures one
// (session/trace_capture.h); so does the engine (core/engine.h).
struct TraceCapture {
  std::vector<TraceStep> steps;
  std::vector<std::string> phase_names;  // by phase id
  int64_t launch_threshold_ns = 0;
  std::optional<RankIdentity> rank;
};

// Activity records a kept step holds at most (a 48-byte record each): a
// step with more keeps its first ones and counts the rest.
inline constexpr size_t kMaxTraceActivityPerStep = 1 << 16;

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_TRACE_STEPS_H_
