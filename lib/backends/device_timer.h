// DeviceTimer: completion markers on a GPU stream (CUDA events), the
// `events` source of DESIGN.md §2.
//
// The recording thread records one marker per scope boundary; the background
// worker later asks, without blocking, when each marker completed, mapped
// onto the host clock. The CUDA driver implementation (dlopen'ed libcuda) and
// the simulated device implement this; a session with no DeviceTimer has no
// GPU timeline from events.

#ifndef GPUSCOPE_LIB_BACKENDS_DEVICE_TIMER_H_
#define GPUSCOPE_LIB_BACKENDS_DEVICE_TIMER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuscope::internal {

// An opaque stream handle (a CUstream, or a simulated stream's id); 0 is the
// default stream.
using StreamHandle = uint64_t;

enum class MarkerState : uint8_t {
  kPending,    // not completed yet; ask again later
  kComplete,   // completed at the returned host time
  kLost,       // will never complete (context destroyed, sticky error)
};

class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;

  // "cuda-events", "simulated", ...
  virtual absl::string_view name() const = 0;

  // Off the hot path, once: OkStatus() if markers can be recorded; else why
  // not (no driver, no device, no context), which lowers the session's source.
  virtual absl::Status Start() = 0;

  // Hot path: records a marker on `stream` and returns its slot, or
  // kNoEvent (record.h) when none could be recorded (pool exhausted, error).
  // Never blocks, allocates or synchronizes.
  virtual uint32_t Record(StreamHandle stream) noexcept = 0;

  // Worker: non-blocking completion query. On kComplete, `*host_ns` is the
  // completion time on the host clock.
  virtual MarkerState Query(uint32_t slot, int64_t* host_ns) = 0;

  // Worker: returns `slot` to the pool. Every recorded slot is released
  // exactly once.
  virtual void Release(uint32_t slot) = 0;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_DEVICE_TIMER_H_
