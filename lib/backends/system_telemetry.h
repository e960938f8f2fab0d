// The Telemetry the process offers: NVML (every GPU, up to
// kMaxTelemetryGpus) when it loads, and /proc for the host, this process and
// its live child processes (DataLoader workers).

#ifndef GPUSCOPE_LIB_BACKENDS_SYSTEM_TELEMETRY_H_
#define GPUSCOPE_LIB_BACKENDS_SYSTEM_TELEMETRY_H_

#include <memory>
#include <string>

#include "backends/telemetry.h"

namespace gpuscope::internal {

// `proc_root`: "/proc", or a fake tree in tests.
std::unique_ptr<Telemetry> MakeSystemTelemetry(std::string proc_root = "/proc");

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_SYSTEM_TELEMETRY_H_
