// DeviceTimer: completion markers on a GPU stream (CUDA events), the
// `events` source (docs/definitions.md).
//
// The recording thread records one marker per scope boundary on the
// scope's stream; the background side later asks, without blocking, when
// each marker completed, mapped onto the host clock (CLOCK_MONOTONIC ns, or
// the session's own clock). Markers come from a pool created and grown off
// the hot path. Implemented over the CUDA driver API (dlopen'ed libcuda) and
// by the simulated device; a session with no DeviceTimer has no events.
//
// Threads: Record() is the recording thread's; everything else runs under
// the session's aggregator lock (one caller at a time).

#ifndef GPUSCOPE_LIB_BACKENDS_DEVICE_TIMER_H_
#define GPUSCOPE_LIB_BACKENDS_DEVICE_TIMER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuscope::internal {

// An opaque stream handle (a CUstream, or a simulated stream's id); 0 is the
// default stream.
using StreamHandle = uint64_t;

// A marker slot that is none: nothing was recorded.
inline constexpr uint32_t kNoEvent = 0xffffffffu;

enum class MarkerState : uint8_t {
  kPending,   // not completed yet; ask again later
  kComplete,  // completed at the returned host time
  kLost,      // will never complete (context destroyed, sticky error)
};

class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;

  // "cuda-events", "simulated", ...
  virtual absl::string_view name() const = 0;

  // Once, off the hot path: OkStatus() if markers can be recorded; else why
  // not (no driver, no device), which lowers the session's source.
  virtual absl::Status Start() = 0;

  // Hot path: records a marker on `stream` and returns its slot, or
  // kNoEvent when none could be recorded (pool exhausted, error).
  // Never blocks, allocates or synchronizes.
  virtual uint32_t Record(StreamHandle stream) noexcept = 0;

  // The lane (a stream of one device, numbered by the timer from 0) the
  // marker in `slot` was recorded on. Valid from Record() to Release().
  virtual uint16_t LaneOf(uint32_t slot) const = 0;

  // The device ordinal of `lane`, or -1 while not known yet (a context the
  // background side has not seen).
  virtual int LaneDevice(uint16_t lane) const = 0;

  // Non-blocking completion query. On kComplete, `*host_ns` is the
  // completion time on the host clock.
  virtual MarkerState Query(uint32_t slot, int64_t* host_ns) = 0;

  // Returns `slot` to the pool. Every recorded slot is released exactly once.
  virtual void Release(uint32_t slot) = 0;

  // Every background pass: grows the pool when it runs low, refreshes the
  // device-to-host clock mapping. A non-OK status means this device can no
  // longer be timed (sticky error, destroyed context): the session lowers its
  // source to host, saying why.
  virtual absl::Status Maintain() = 0;

  // How far a completion time may be from the truth (calibration), ns.
  virtual int64_t accuracy_ns() const = 0;

  // At session close, after every recorded marker was released: destroys the
  // pool. No call follows.
  virtual void Stop() = 0;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_DEVICE_TIMER_H_
