// The Telemetry the process offers: NVML when it loads, for the GPUs this
// process uses (those with an active CUDA primary context, matched to NVML by
// PCI bus id; up to kMaxTelemetryGpus), and /proc for the host, this process
// and its live descendant processes (the DataLoader's workers told apart
// from the others where a loader named them: process_roles.h), and the
// run-queue wait of the training thread and of the loader's workers.

#ifndef GPUSCOPE_LIB_BACKENDS_TELEMETRY_SYSTEM_TELEMETRY_H_
#define GPUSCOPE_LIB_BACKENDS_TELEMETRY_SYSTEM_TELEMETRY_H_

#include <memory>
#include <string>

#include "backends/telemetry.h"

namespace gpuscope::internal {

// `proc_root` and `cgroup_root`: "/proc" and "/sys/fs/cgroup", or fake trees
// in tests. Available memory is the host's, or the container's where its
// cgroup limit leaves less.
std::unique_ptr<Telemetry> MakeSystemTelemetry(std::string proc_root = "/proc",
                                               std::string cgroup_root = "/sys/fs/cgroup");

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_TELEMETRY_SYSTEM_TELEMETRY_H_
