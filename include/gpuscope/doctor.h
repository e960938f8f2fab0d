// File: gpuscope/doctor.h
// -----------------------------------------------------------------------------
//
// `gpuscope doctor`: the node sanity check the troubleshooting playbook runs
// before anyone blames the model. Driver and CUDA versions; per GPU the PCIe
// link against its maximum, clocks and throttle reasons now, persistence
// mode, ECC, temperature and power headroom, compute and MIG modes, and the
// GPU's NUMA node against the process's CPU affinity; on the host the
// container CPU limit, swap and memory pressure, and load.
//
// Read-only: it never changes a setting. On a machine without a GPU it says
// so and checks the host.
//
// Example:
//
//   gpuscope::DoctorReport report = gpuscope::RunDoctor();
//   std::cout << gpuscope::FormatDoctor(report);
//   return report.has_failures() ? 1 : 0;

#ifndef GPUSCOPE_DOCTOR_H_
#define GPUSCOPE_DOCTOR_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuscope {

enum class CheckStatus : uint8_t { kOk = 0, kWarn = 1, kFail = 2 };

// "OK", "WARN", "FAIL".
std::string_view CheckStatusName(CheckStatus status);

struct DoctorCheck {
  std::string subject;  // "host", "gpu0", ...
  std::string id;       // stable: "pcie_link", "clocks", "persistence", ...
  CheckStatus status = CheckStatus::kOk;
  std::string value;   // what was seen: "Gen4 x16 (max Gen4 x16)"
  std::string reason;  // why not OK and what to do; empty when OK

  bool operator==(const DoctorCheck&) const = default;
};

struct DoctorReport {
  std::string version;  // gpuscope's
  std::string hostname;
  std::string driver_version;  // "" without a driver
  int cuda_driver_version = -1;
  int gpu_count = 0;
  std::vector<DoctorCheck> checks;
  // The node's stable facts ("gpu0.pcie_link" -> "Gen4 x16"): what a
  // baseline compares. Readings that move on their own (temperature,
  // clocks, power) are not facts.
  std::map<std::string, std::string> facts;

  bool has_failures() const;
  bool operator==(const DoctorReport&) const = default;
};

// Where the doctor reads the host from (tests point these at fake trees).
// NVML comes from $GPUSCOPE_LIBNVML, else libnvidia-ml.so.1.
struct DoctorOptions {
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  std::string cgroup_root = "/sys/fs/cgroup";
  std::vector<int> allowed_cpus;  // empty: this process's affinity
};

// RunDoctor()
//
// Runs every check once, now. Never fails: what cannot be read is said so.
DoctorReport RunDoctor(const DoctorOptions& options = {});

// DoctorBaselineDiff()
//
// One line per fact of `baseline` that `now` lacks or has changed
// ("gpu0.pcie_link: Gen4 x16 -> Gen3 x8"). Empty: the node is as it was.
std::vector<std::string> DoctorBaselineDiff(const DoctorReport& baseline, const DoctorReport& now);

}  // namespace gpuscope

#endif  // GPUSCOPE_DOCTOR_H_
