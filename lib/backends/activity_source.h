// ActivitySource: exact device activity intervals (CUPTI activity records,
// or the simulated device's), the `cupti` source (docs/definitions.md).
//
// Threads: Start() once from the session's constructor; Drain() and Stop()
// under the session's aggregator lock.

#ifndef GPUSCOPE_LIB_BACKENDS_ACTIVITY_SOURCE_H_
#define GPUSCOPE_LIB_BACKENDS_ACTIVITY_SOURCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "backends/kernel_names.h"

namespace gpuscope::internal {

enum class ActivityKind : uint8_t {
  kKernel,
  kMemcpyH2D,
  kMemcpyD2H,
  kMemcpyOther,  // device to device, peer, ...
  kMemset,
  kSync,  // a host call that blocked on the device (not device activity)
};

inline bool IsDeviceActivity(ActivityKind k) { return k != ActivityKind::kSync; }
inline bool IsCopy(ActivityKind k) {
  return k == ActivityKind::kMemcpyH2D || k == ActivityKind::kMemcpyD2H ||
         k == ActivityKind::kMemcpyOther;
}

// One interval of activity, on the host clock (CLOCK_MONOTONIC ns, or the
// session's clock).
struct DeviceInterval {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t launch_ns = -1;  // when the API call that enqueued it began; -1: unknown
  uint32_t device = 0;
  uint32_t stream = 0;
  uint32_t name = 0;  // kernels: InternKernelName()'s id (0: not known)
  ActivityKind kind = ActivityKind::kKernel;
  bool pageable = false;                           // memcpy from/to pageable host memory
  KernelClass kernel_class = KernelClass::kOther;  // kernels: what the name says
  uint64_t bytes = 0;                              // memcpy/memset size
};
static_assert(sizeof(DeviceInterval) == 48, "a step's trace keeps up to 64 Ki of them");

class ActivitySource {
 public:
  virtual ~ActivitySource() = default;

  // "CUPTI", "simulated CUPTI", ...
  virtual absl::string_view name() const = 0;

  // Off the hot path, once: subscribes. OkStatus(), or why not (library
  // missing, another subscriber holds CUPTI, a profiler injected itself).
  virtual absl::Status Start() = 0;

  // Appends every record delivered so far to `out` and returns the host time
  // before which the record stream is complete: no interval that began
  // before it will be delivered later (so a step that ended before it has
  // every record that overlaps it). Never blocks on the device.
  // `flush_now` (at close): flush what the library holds, best effort.
  virtual int64_t Drain(std::vector<DeviceInterval>* out, bool flush_now) = 0;

  // Device activity records delivered since Start().
  virtual uint64_t records() const = 0;
  // Records dropped because buffers were full, since Start().
  virtual uint64_t dropped() const = 0;
  // Activity buffers the library handed back and this source read, since
  // Start() (CUPTI; 0 where there are no buffers).
  virtual uint64_t buffers() const { return 0; }

  // Detaches cleanly so that another profiler can subscribe afterwards.
  virtual void Stop() = 0;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_ACTIVITY_SOURCE_H_
