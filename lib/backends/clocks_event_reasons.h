// The clocks-event (throttle) reasons: the bitmask in which NVML reports why
// a GPU's clocks are below their maximum, shared by the telemetry interface
// (TelemetrySample::clocks_event_reasons), the aggregator and the doctor.

#ifndef GPUSCOPE_LIB_BACKENDS_CLOCKS_EVENT_REASONS_H_
#define GPUSCOPE_LIB_BACKENDS_CLOCKS_EVENT_REASONS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gpuscope::internal {

// The clocks-event (throttle) reasons bitmask, as NVML defines it.
enum ClocksEventReason : uint64_t {
  kGpuIdle = 0x1,
  kApplicationsClocksSetting = 0x2,
  kSwPowerCap = 0x4,
  kHwSlowdown = 0x8,
  kSyncBoost = 0x10,
  kSwThermalSlowdown = 0x20,
  kHwThermalSlowdown = 0x40,
  kHwPowerBrakeSlowdown = 0x80,
  kDisplayClockSetting = 0x100,
};

// ClocksEventReasonNames()
//
// The names of the reasons set in `mask` ("sw_power_cap", ...), lowest bit
// first; an unknown bit is named "bit_N".
std::vector<std::string> ClocksEventReasonNames(uint64_t mask);

// Whether `mask` holds a reason that costs performance (power or thermal
// caps, hardware slowdowns), as opposed to an idle GPU or a setting.
bool IsThrottling(uint64_t mask);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_CLOCKS_EVENT_REASONS_H_
