#include "backends/clocks_event_reasons.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpuscope::internal {

std::vector<std::string> ClocksEventReasonNames(uint64_t mask) {
  static constexpr std::pair<uint64_t, const char*> kNames[] = {
      {kGpuIdle, "gpu_idle"},
      {kApplicationsClocksSetting, "applications_clocks_setting"},
      {kSwPowerCap, "sw_power_cap"},
      {kHwSlowdown, "hw_slowdown"},
      {kSyncBoost, "sync_boost"},
      {kSwThermalSlowdown, "sw_thermal_slowdown"},
      {kHwThermalSlowdown, "hw_thermal_slowdown"},
      {kHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
      {kDisplayClockSetting, "display_clock_setting"},
  };
  std::vector<std::string> out;
  for (int bit = 0; bit < 64; ++bit) {
    const uint64_t b = uint64_t{1} << bit;
    if ((mask & b) == 0) continue;
    const char* name = nullptr;
    for (const auto& [value, n] : kNames) {
      if (value == b) name = n;
    }
    out.push_back(name != nullptr ? name : absl::StrCat("bit_", bit));
  }
  return out;
}

bool IsThrottling(uint64_t mask) {
  return (mask & (kSwPowerCap | kHwSlowdown | kSwThermalSlowdown | kHwThermalSlowdown |
                  kHwPowerBrakeSlowdown)) != 0;
}

}  // namespace gpuscope::internal
