// Host state from /proc and /sys (issue 6): CPU and iowait, this process's
// and its children's CPU (DataLoader workers), memory, swap and memory
// pressure, load; and the placement facts `gpuscope doctor` checks
// (container CPU limit, CPU affinity, NUMA nodes of the CPUs and of a GPU).
//
// The roots are parameters so that tests read a fake tree. Reads are plain
// file reads (no allocation beyond the strings), done by the background
// worker or the doctor, never on the hot path.

#ifndef GPUSCOPE_LIB_BACKENDS_HOST_HOST_STATS_H_
#define GPUSCOPE_LIB_BACKENDS_HOST_HOST_STATS_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuscope::internal {

struct CpuTimes {  // /proc/stat "cpu" line, in clock ticks
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  uint64_t total() const { return user + nice + system + idle + iowait + irq + softirq + steal; }
};

struct HostSnapshot {
  CpuTimes cpu;
  double process_cpu_s = 0;   // this process: utime + stime
  double children_cpu_s = 0;  // its waited-for children: cutime + cstime
  double mem_total_bytes = std::numeric_limits<double>::quiet_NaN();
  double mem_available_bytes = std::numeric_limits<double>::quiet_NaN();
  double swap_total_bytes = std::numeric_limits<double>::quiet_NaN();
  double swap_free_bytes = std::numeric_limits<double>::quiet_NaN();
  double load1 = std::numeric_limits<double>::quiet_NaN();
  // PSI "some avg10" of /proc/pressure/memory (% of time stalled); NaN
  // without PSI.
  double memory_pressure_pct = std::numeric_limits<double>::quiet_NaN();
  uint64_t swap_in_pages = 0;   // /proc/vmstat pswpin
  uint64_t swap_out_pages = 0;  // pswpout
};

// ReadHost()
//
// A snapshot from `proc_root` (normally "/proc"); `pid_dir` is the process's
// directory below it ("self"). NotFound/DataLoss naming the file when
// /proc/stat cannot be read or parsed; other files are optional.
absl::StatusOr<HostSnapshot> ReadHost(const std::string& proc_root = "/proc",
                                      const std::string& pid_dir = "self");

// What happened between two snapshots `seconds` apart.
struct HostRates {
  double cpu_pct = 0;           // of all CPUs busy (not idle, not iowait)
  double iowait_pct = 0;        // of all CPUs waiting for I/O
  double process_cores = 0;     // CPUs this process used
  double children_cores = 0;    // CPUs its (reaped) children used
  double swap_pages_per_s = 0;  // in + out
};
HostRates RatesBetween(const HostSnapshot& before, const HostSnapshot& after, double seconds);

struct HostPlacement {
  int cpus_online = -1;   // /proc/cpuinfo-independent: sysfs online list
  int cpus_allowed = -1;  // this process's affinity
  double cgroup_cpu_limit = std::numeric_limits<double>::quiet_NaN();  // cores; NaN: no limit
  std::vector<int> numa_nodes_of_allowed_cpus;                         // sorted
};

// ReadPlacement()
//
// From `sys_root` ("/sys") and `cgroup_root` ("/sys/fs/cgroup"), and the
// process's affinity (sched_getaffinity) unless `allowed_cpus` is given
// (tests). The CPU limit is the tightest quota along the process's cgroups
// (CgroupChain): cgroup v2's `cpu.max`, cgroup v1's `cpu.cfs_quota_us` over
// `cpu.cfs_period_us`. Fields that cannot be read stay unknown.
HostPlacement ReadPlacement(const std::string& sys_root = "/sys",
                            const std::string& cgroup_root = "/sys/fs/cgroup",
                            const std::vector<int>* allowed_cpus = nullptr,
                            const std::string& proc_root = "/proc");

// CgroupChain()
//
// The directories of the process's cgroup and of each ancestor up to the
// root, own first, as named in `<proc_root>/self/cgroup` (Slurm, systemd and
// container runtimes nest them). `controller` "" is cgroup v2's unified
// hierarchy (mounted at `cgroup_root`); "cpu" or "memory" a cgroup v1
// controller (mounted at `cgroup_root`/<its line's controller list>, e.g.
// "cpu,cpuacct"). Empty when the process is in no such hierarchy.
std::vector<std::string> CgroupChain(const std::string& proc_root, const std::string& cgroup_root,
                                     const std::string& controller);

// The memory limit a container (or a Slurm job) puts on the process: NaN
// when there is none.
struct ContainerMemory {
  double limit_bytes = std::numeric_limits<double>::quiet_NaN();
  // The limit less what counts against it (usage less inactive page cache).
  double available_bytes = std::numeric_limits<double>::quiet_NaN();
};

// ReadContainerMemory()
//
// The tightest limit along the process's cgroups: cgroup v2's `memory.max`
// against `memory.current` less `inactive_file`, cgroup v1's
// `memory.limit_in_bytes` against `memory.usage_in_bytes` less
// `total_inactive_file`.
ContainerMemory ReadContainerMemory(const std::string& cgroup_root = "/sys/fs/cgroup",
                                    const std::string& proc_root = "/proc");

// A PCI bus id as sysfs writes it ("0000:17:00.0": lower case, a domain of
// at least 4 digits), from NVML's ("00000000:17:00.0") or CUDA's
// ("0000:17:00.0"); "" when it does not parse.
std::string CanonicalPciBusId(const std::string& bus_id);

// The NUMA node of the PCI device `bus_id` ("00000000:17:00.0" as NVML
// gives it), or -1 when unknown (no NUMA, or not found).
int PciNumaNode(const std::string& sys_root, const std::string& bus_id);

// Parses a kernel CPU list ("0-3,8,10-11") into CPU numbers; empty on error.
std::vector<int> ParseCpuList(const std::string& list);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_HOST_HOST_STATS_H_
