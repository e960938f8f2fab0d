// ActivitySource: exact device activity intervals (CUPTI activity records),
// the `cupti` source of DESIGN.md §2.

#ifndef GPUSCOPE_LIB_BACKENDS_ACTIVITY_SOURCE_H_
#define GPUSCOPE_LIB_BACKENDS_ACTIVITY_SOURCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuscope::internal {

enum class ActivityKind : uint8_t { kKernel, kMemcpyH2D, kMemcpyD2H, kMemcpyOther, kMemset, kSync };

// One interval of device activity, already mapped onto the host clock.
struct DeviceInterval {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  uint32_t device = 0;
  uint32_t stream = 0;
  ActivityKind kind = ActivityKind::kKernel;
  bool pageable = false;  // memcpy from/to pageable host memory
  uint64_t bytes = 0;     // memcpy/memset size
};

class ActivitySource {
 public:
  virtual ~ActivitySource() = default;

  // "cupti", "simulated", ...
  virtual absl::string_view name() const = 0;

  // Off the hot path, once: subscribes. OkStatus(), or why not (library
  // missing, another subscriber holds CUPTI, a profiler injected itself).
  virtual absl::Status Start() = 0;

  // Worker: appends every interval completed so far to `out` and returns the
  // host time up to which the record stream is known to be complete.
  virtual int64_t Drain(std::vector<DeviceInterval>* out) = 0;

  // Records dropped because buffers were full, since Start().
  virtual uint64_t dropped() const = 0;

  // Detaches cleanly so that another profiler can subscribe afterwards.
  virtual void Stop() = 0;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_ACTIVITY_SOURCE_H_
