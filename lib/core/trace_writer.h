// The last steps' timelines, as the aggregator keeps them, and their Chrome
// trace encoding (docs/trace.md).

#ifndef GPUSCOPE_LIB_CORE_TRACE_WRITER_H_
#define GPUSCOPE_LIB_CORE_TRACE_WRITER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/activity_source.h"

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

struct TraceStep {
  uint64_t index = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  std::vector<TraceSpan> phases;
  // Source cupti: activity overlapping the step (syncs included).
  std::vector<DeviceInterval> activity;
  bool has_activity = false;
  uint64_t activity_dropped = 0;  // records past kMaxTraceActivityPerStep
};

// Activity records a kept step holds at most (a 48-byte record each): a
// step with more keeps its first ones and counts the rest.
inline constexpr size_t kMaxTraceActivityPerStep = 1 << 16;

// ChromeTraceJson()
//
// `steps` (oldest first) as a Chrome trace JSON object. `name_of` gives a
// phase id's name; gaps between device activity shorter than
// `launch_threshold_ns` are labeled "launch".
std::string ChromeTraceJson(const std::vector<const TraceStep*>& steps,
                            const std::function<std::string_view(uint16_t)>& name_of,
                            int64_t launch_threshold_ns);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_TRACE_WRITER_H_
