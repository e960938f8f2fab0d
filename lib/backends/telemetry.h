// Telemetry: device and host state sampled by the background worker at a
// fixed rate, never on the hot path (NVML, /proc).

#ifndef GPUSCOPE_LIB_BACKENDS_TELEMETRY_H_
#define GPUSCOPE_LIB_BACKENDS_TELEMETRY_H_

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuscope::internal {

inline constexpr double kNotSampled = std::numeric_limits<double>::quiet_NaN();

// One sample, or a time-weighted mean of samples over a step. NaN: not
// available from this source.
struct TelemetrySample {
  int64_t host_ns = 0;
  double gpu_utilization_pct = kNotSampled;  // as nvidia-smi reports it
  double sm_clock_mhz = kNotSampled;
  double sm_clock_max_mhz = kNotSampled;
  double power_w = kNotSampled;
  double power_limit_w = kNotSampled;
  double temperature_c = kNotSampled;
  uint64_t throttle_reasons = 0;             // NVML clocks-event bitmask
  double host_cpu_pct = kNotSampled;
  double host_iowait_pct = kNotSampled;
};

class Telemetry {
 public:
  virtual ~Telemetry() = default;
  virtual absl::string_view name() const = 0;
  // Once: OkStatus(), or why not (NVML missing, /proc unreadable).
  virtual absl::Status Start() = 0;
  // Worker: fills `out` with the current state.
  virtual void Sample(int64_t now_ns, TelemetrySample* out) = 0;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_TELEMETRY_H_
