// Host state from /proc and /sys (issue 6): CPU and iowait, this process's
// and its children's CPU (DataLoader workers), memory, swap and memory
// pressure, load; and the placement facts `gpuscope doctor` checks
// (container CPU limit, CPU affinity, NUMA nodes of the CPUs and of a GPU).
//
// The roots are parameters so that tests read a fake tree. Reads are done by
// the background worker or the doctor, never on the hot path. The one-shot
// functions (ReadHost(), ReadContainerMemory()) open every file afresh; the
// readers the telemetry sampler keeps (HostReader, ContainerMemoryReader)
// keep them open and read each with one pread(), parsing in place.

#ifndef GPUSCOPE_LIB_BACKENDS_HOST_HOST_STATS_H_
#define GPUSCOPE_LIB_BACKENDS_HOST_HOST_STATS_H_

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

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
  // PSI "some avg10" of /proc/pressure/cpu: % of time some runnable task
  // waited for a CPU (host-wide); NaN without PSI.
  double cpu_pressure_pct = std::numeric_limits<double>::quiet_NaN();
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

// ProcStatFields()
//
// The first `n` fields of a /proc/<pid>/stat line after the command name
// (which may hold spaces and parentheses): `fields[0]` is field 3 (the
// state), `fields[1]` the parent pid, `fields[11]` and `fields[12]` utime
// and stime. False when the line has fewer. The views point into `text`.
bool ProcStatFields(absl::string_view text, absl::string_view* fields, size_t n);

// ParseSchedstat()
//
// A task's /proc/<pid>/task/<tid>/schedstat ("<on-cpu ns> <run-queue wait
// ns> <timeslices>"; /proc/<pid>/schedstat is the process's main thread):
// the time it ran and the time it was runnable but waited for a CPU. False
// when the text does not parse (a kernel without sched_info).
bool ParseSchedstat(absl::string_view text, uint64_t* on_cpu_ns, uint64_t* run_delay_ns);

// ProcFile
//
// A file read again and again (/proc, /sys/fs/cgroup): kept open, and read
// whole with pread() from offset 0 (the kernel formats /proc and cgroup
// files afresh on every read from the start) into a buffer kept between
// reads. Not thread-safe.
class ProcFile {
 public:
  // How a read knows it has the whole file.
  enum class End : uint8_t {
    // Read until a read returns nothing: any file. /proc files made of
    // records (/proc/vmstat, a task's children) come a page at a time.
    kAtEof,
    // A read shorter than the buffer has it all: a file the kernel formats
    // in one piece (single_open(): /proc/stat, /proc/<pid>/stat, meminfo,
    // loadavg, pressure, /proc/<pid>/cgroup; every cgroup file) or a regular
    // file. Saves a system call a read.
    kAtShortRead,
  };

  ProcFile() = default;
  explicit ProcFile(std::string path, End end = End::kAtEof) : path_(std::move(path)), end_(end) {}
  ~ProcFile() { Close(); }
  ProcFile(ProcFile&& other) noexcept;
  ProcFile& operator=(ProcFile&& other) noexcept;
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;

  // The whole text (valid until the next Read()), or false when the file
  // cannot be opened or read; a read that fails closes it. A closed file is
  // opened on the first Read() and afterwards only when `may_open`: a file
  // that is missing is not looked for on every read.
  bool Read(absl::string_view* text, bool may_open = true);
  void Close();
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  End end_ = End::kAtEof;
  int fd_ = -1;
  bool tried_ = false;  // opened (or tried to) at least once
  std::string buffer_;
};

// HostReader
//
// ReadHost() for a sampler: the same snapshot, from files kept open between
// reads (one pread() each, no allocation once the buffers are sized).
// /proc/vmstat (the largest file, for the swap counters alone) is read only
// while the host has swap: without any, the counters cannot move, and the
// last ones read are kept (they are read again on every `look_again`). The
// load average and memory and CPU pressure, which the kernel updates every few
// seconds, are read on the first read and on every `look_again`.
class HostReader {
 public:
  explicit HostReader(const std::string& proc_root = "/proc", const std::string& pid_dir = "self");

  // As ReadHost(). `look_again`: look again for files that were missing,
  // read the load average and memory and CPU pressure, and /proc/vmstat whatever
  // the swap (a sampler does this now and then, about once a second);
  // otherwise a file missing at the first read stays unknown.
  absl::StatusOr<HostSnapshot> Read(bool look_again = false);

 private:
  ProcFile stat_, self_stat_, meminfo_, loadavg_, pressure_, cpu_pressure_, vmstat_;
  double ticks_per_s_;
  bool vmstat_read_ = false;  // once: swap_in_ and swap_out_ hold its counters
  uint64_t swap_in_ = 0, swap_out_ = 0;
  bool averages_read_ = false;  // once: load1_ and memory_pressure_pct_ hold them
  double load1_ = std::numeric_limits<double>::quiet_NaN();
  double memory_pressure_pct_ = std::numeric_limits<double>::quiet_NaN();
  double cpu_pressure_pct_ = std::numeric_limits<double>::quiet_NaN();
};

// What happened between two snapshots `seconds` apart.
struct HostRates {
  double cpu_pct = 0;           // of all CPUs busy (not idle, not iowait)
  double iowait_pct = 0;        // of all CPUs waiting for I/O
  double steal_pct = 0;         // of all CPUs taken by the hypervisor for other guests
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

// SelfCgroup
//
// `<proc_root>/self/cgroup`, kept open, for a reader that builds its chains
// from it: Changed() says when they are to be built (again).
class SelfCgroup {
 public:
  explicit SelfCgroup(const std::string& proc_root);

  // True on the first call, and on a `look_again` that finds the file's
  // text (or whether it is readable) changed since the chains were built.
  bool Changed(bool look_again);

  // The chain of `controller` (as CgroupChain()) in the text last read; an
  // unreadable file reads as the root of cgroup v2 and no v1 hierarchy.
  std::vector<std::string> Chain(const std::string& cgroup_root,
                                 const std::string& controller) const;

 private:
  ProcFile file_;
  bool built_ = false;
  bool readable_ = false;
  std::string text_;  // what the chains were built from
};

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

// ContainerMemoryReader
//
// ReadContainerMemory() for a sampler: the process's cgroups are looked up
// on the first read and again on every `look_again` (a process moved to
// another cgroup is noticed then), their files stay open, and a cgroup's
// usage and memory.stat are read only where its limit is the tightest so far
// (no limit, the usual case: one small read per cgroup).
class ContainerMemoryReader {
 public:
  explicit ContainerMemoryReader(std::string cgroup_root = "/sys/fs/cgroup",
                                 std::string proc_root = "/proc");

  // As ReadContainerMemory(). `look_again`: read /proc/self/cgroup again
  // (the chains are rebuilt when it changed) and look again for files that
  // were missing.
  ContainerMemory Read(bool look_again = false);

 private:
  struct Level {
    ProcFile limit, usage, stat;
    const char* inactive_key;  // "inactive_file" (v2), "total_inactive_file" (v1)
  };
  void Build();

  std::string cgroup_root_;
  SelfCgroup self_;
  std::vector<Level> levels_;  // cgroup v2's chain, then cgroup v1's memory chain
};

// The CPU bandwidth limit's counters of one cgroup (its cpu.stat): the
// limit's enforcement periods so far (cgroup v2 and v1 `nr_periods`), those
// in which the cgroup used up its quota and was throttled (`nr_throttled`).
struct CgroupThrottling {
  uint64_t periods = 0;
  uint64_t throttled = 0;
};

// ContainerCpuReader
//
// For a sampler: the throttling counters of every cgroup along the process's
// chains (cgroup v2's, then cgroup v1's cpu controller's) whose cpu.stat
// counts periods: those with a CPU limit (cpu.max, cpu.cfs_quota_us), such
// as a Kubernetes pod's or container's. Looked up as ContainerMemoryReader's.
class ContainerCpuReader {
 public:
  explicit ContainerCpuReader(std::string cgroup_root = "/sys/fs/cgroup",
                              std::string proc_root = "/proc");

  // Each level's counters, in chain order; a level without them reads as
  // zeros. `*rebuilt`: the levels are not those of the last read (the
  // process moved), so the two reads do not compare.
  const std::vector<CgroupThrottling>& Read(bool look_again, bool* rebuilt);

 private:
  void Build();

  std::string cgroup_root_;
  SelfCgroup self_;
  std::vector<ProcFile> stats_;  // cpu.stat, by level
  std::vector<CgroupThrottling> counts_;
};

// The share of the CPU limit's periods between two reads of the same levels
// in which the process's cgroup was throttled: the largest of the levels'
// (a limit binds at whichever level is the tightest). NaN when no level
// counted a period in between (no limit).
double ThrottledShare(const std::vector<CgroupThrottling>& before,
                      const std::vector<CgroupThrottling>& after);

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
