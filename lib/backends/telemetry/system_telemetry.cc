#include "backends/telemetry/system_telemetry.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backends/cuda/cuda_driver_timer.h"
#include "backends/host/host_stats.h"
#include "backends/nvml/nvml.h"

namespace gpuscope::internal {
namespace {

// How often (in the samples' time) the host sampler looks around afresh:
// for files that were missing, for the process's cgroups, for the children
// every thread forked; and reads /proc/vmstat even without swap. In
// between, a sample reads the files it keeps open, one pread() each. (GPUs
// are looked up again every tenth sample: SampleGpus().)
constexpr int64_t kRefreshNs = 1'000'000'000;

// The CPU ticks (utime + stime) of the live children of `parent`
// (DataLoader workers), by pid.
//
// Children are found in /proc/<parent>/task/*/children where the kernel has
// it (every thread lists the children it forked), else by scanning every
// process for those whose parent is `parent` (costly on a busy host). That
// full search runs on a refresh only (about once a second): in between, the
// children files of the main thread and of the threads found with children
// (the one that starts the DataLoader workers) are read again, for children
// forked since, and the children already known are read again. Their stat
// files stay open (up to kMaxOpenStats): one pread() a child a sample; a
// child that exits fails the read and is forgotten (its pid may be reused).
// Where the kernel lists no children, a child forked between two refreshes
// is counted from the next one.
class ChildTicks {
 public:
  ChildTicks(std::string proc_root, int parent)
      : proc_root_(std::move(proc_root)),
        parent_(parent),
        tasks_(absl::StrCat(proc_root_, "/", parent, "/task")),
        main_tid_(absl::StrCat(parent)) {}

  // `*out`: (pid, ticks) of every live child, by pid.
  void Read(bool full, std::vector<std::pair<int, uint64_t>>* out) {
    out->clear();
    pids_.clear();
    if (full) {
      FindChildren();
    } else {
      for (size_t i = 0; i < forkers_.size();) {
        absl::string_view text;
        if (forkers_[i].Read(&text, /*may_open=*/false)) {
          AppendPids(text);
          ++i;
        } else {  // the thread ended
          forkers_.erase(forkers_.begin() + static_cast<std::ptrdiff_t>(i));
        }
      }
      for (const Child& c : children_) pids_.push_back(c.pid);
    }
    std::sort(pids_.begin(), pids_.end());
    pids_.erase(std::unique(pids_.begin(), pids_.end()), pids_.end());
    // Read every candidate: the known ones from their open files.
    next_.clear();
    size_t known = 0;
    for (int pid : pids_) {
      while (known < children_.size() && children_[known].pid < pid) ++known;
      Child c;
      c.pid = pid;
      if (known < children_.size() && children_[known].pid == pid) {
        c.stat = std::move(children_[known].stat);
      } else {
        c.stat = ProcFile(absl::StrCat(proc_root_, "/", pid, "/stat"), ProcFile::End::kAtShortRead);
      }
      absl::string_view text;
      if (!c.stat.Read(&text, /*may_open=*/true)) continue;  // gone
      absl::string_view f[13];
      int ppid = 0;
      uint64_t utime = 0, stime = 0;
      if (!ProcStatFields(text, f, 13) || !absl::SimpleAtoi(f[1], &ppid) || ppid != parent_ ||
          !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
        continue;  // not a child (a full scan's stranger), or unreadable
      }
      out->emplace_back(pid, utime + stime);
      if (next_.size() >= kMaxOpenStats) c.stat.Close();  // read by path next time
      next_.push_back(std::move(c));
    }
    children_.swap(next_);
    next_.clear();  // closes the files of the children gone and of strangers
  }

 private:
  static constexpr size_t kMaxOpenStats = 64;
  static constexpr size_t kMaxForkers = 4;

  struct Child {
    int pid = 0;
    ProcFile stat;
  };

  // Every thread's children file; without any, every process is a candidate.
  void FindChildren() {
    forkers_.clear();
    bool have_children_files = false;
    if (DIR* dir = opendir(tasks_.c_str()); dir != nullptr) {
      while (dirent* e = readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        ProcFile children(absl::StrCat(tasks_, "/", e->d_name, "/children"));
        absl::string_view text;
        if (!children.Read(&text)) continue;
        have_children_files = true;
        const size_t before = pids_.size();
        AppendPids(text);
        // Kept open: the main thread's (it usually starts the DataLoader
        // workers, again at every epoch), and those of threads with children.
        const bool main_thread = absl::string_view(e->d_name) == main_tid_;
        if ((main_thread || pids_.size() > before) && forkers_.size() < kMaxForkers) {
          forkers_.push_back(std::move(children));
        }
      }
      closedir(dir);
    }
    if (have_children_files) return;
    DIR* dir = opendir(proc_root_.c_str());
    if (dir == nullptr) return;
    while (dirent* e = readdir(dir)) {
      int pid = 0;
      if (absl::SimpleAtoi(e->d_name, &pid)) pids_.push_back(pid);
    }
    closedir(dir);
  }

  // Space-separated pids.
  void AppendPids(absl::string_view text) {
    for (absl::string_view token : absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
      int pid = 0;
      if (absl::SimpleAtoi(token, &pid)) pids_.push_back(pid);
    }
  }

  const std::string proc_root_;
  const int parent_;
  const std::string tasks_;        // <proc_root>/<parent>/task
  const std::string main_tid_;     // <parent>, the main thread's task
  std::vector<ProcFile> forkers_;  // children files of threads found with children
  std::vector<Child> children_;    // known children, by pid
  std::vector<Child> next_;        // scratch
  std::vector<int> pids_;          // scratch: candidates
};

class SystemTelemetry final : public Telemetry {
 public:
  SystemTelemetry(std::string proc_root, std::string cgroup_root)
      : proc_root_(std::move(proc_root)),
        cgroup_root_(std::move(cgroup_root)),
        host_(proc_root_),
        container_memory_(cgroup_root_, proc_root_),
        children_(proc_root_, static_cast<int>(getpid())),
        ticks_per_s_(static_cast<double>(std::max<long>(1, sysconf(_SC_CLK_TCK)))) {
    description_ = Describe();
  }

  absl::string_view name() const override { return "system"; }

  absl::Status Start() override {
    absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Open();
    if (nvml.ok()) {
      nvml_ = std::move(*nvml);
      for (int i = 0; i < nvml_->device_count(); ++i)
        nvml_bus_ids_.push_back(CanonicalPciBusId(nvml_->BusId(i)));
    } else {
      nvml_status_ = std::string(nvml.status().message());
    }
    host_ok_ = host_.Read().ok();
    // The CPUs the loader may use: the affinity mask, cut by a container
    // limit (placement does not change while a job runs).
    const HostPlacement p = ReadPlacement("/sys", cgroup_root_, nullptr, proc_root_);
    if (p.cpus_allowed > 0) {
      cpus_available_ = std::isnan(p.cgroup_cpu_limit)
                            ? p.cpus_allowed
                            : std::min<double>(p.cpus_allowed, p.cgroup_cpu_limit);
    }
    description_ = Describe();
    if (nvml_ == nullptr && !host_ok_) {
      return absl::UnavailableError(
          absl::StrCat("neither NVML (", nvml_status_, ") nor ", proc_root_, " is readable"));
    }
    return absl::OkStatus();
  }

  // Kept from the last time the job's GPUs were looked up: the sampler asks
  // for it after every sample.
  std::string description() const override { return description_; }

  void Sample(int64_t now_ns, TelemetrySample* out) override {
    ++samples_;
    // Now and then (about once a second), look around afresh.
    const bool refresh =
        samples_ == 1 || now_ns < refreshed_ns_ || now_ns - refreshed_ns_ >= kRefreshNs;
    if (refresh) refreshed_ns_ = now_ns;
    *out = TelemetrySample{};
    out->host_ns = now_ns;
    out->cpus_available = cpus_available_;
    if (host_ok_) SampleHost(now_ns, refresh, out);
    if (nvml_ != nullptr) SampleGpus(out);
  }

 private:
  std::string Describe() const {
    if (nvml_ == nullptr) return absl::StrCat("/proc (no GPU telemetry: ", nvml_status_, ")");
    std::string gpus;
    if (job_gpus_.empty()) {
      gpus = absl::StrCat("NVML (no GPU sampled: ", job_gpus_note_, ")");
    } else {
      gpus = absl::StrCat("NVML (", job_gpus_.size() == 1 ? "GPU " : "GPUs ",
                          absl::StrJoin(job_gpus_, ", "), " of ", nvml_->device_count(), ": the ",
                          job_gpus_.size() == 1 ? "one" : "ones", " this process uses)");
    }
    return host_ok_ ? absl::StrCat(gpus, ", /proc") : gpus;
  }

  void SampleGpus(TelemetrySample* out) {
    // Which GPUs are the job's, and their slow-changing state (maximum
    // clocks and link, power limit, ECC counts, modes): at the first sample,
    // then every tenth (about once a second; a process may take up another
    // GPU later). In between, only what changes is queried, the rest is
    // carried over from then.
    const bool full = samples_ % 10 == 1;
    if (full) RefreshJobGpus();
    out->gpu_count = static_cast<int>(std::min<size_t>(job_gpus_.size(), kMaxTelemetryGpus));
    for (int k = 0; k < out->gpu_count; ++k) {
      const int i = job_gpus_[static_cast<size_t>(k)];
      GpuSample& slow = slow_gpus_[static_cast<size_t>(k)];
      // PCIe throughput counters take NVML about 20 ms each: every tenth
      // sample only (about once a second at the default rate).
      const GpuState g =
          nvml_->Read(i, /*pcie_throughput=*/samples_ % 10 == 0,
                      full || slow.index != i ? Nvml::Fields::kAll : Nvml::Fields::kChanging);
      if (full || slow.index != i) {
        slow.index = i;
        slow.sm_clock_max_mhz = g.sm_clock_max_mhz;
        slow.mem_clock_max_mhz = g.mem_clock_max_mhz;
        slow.pcie_gen_max = g.pcie_gen_max;
        slow.pcie_width_max = g.pcie_width_max;
        slow.ecc_corrected = g.ecc_corrected;
        slow.ecc_uncorrected = g.ecc_uncorrected;
        slow.persistence_mode = g.persistence_mode;
        slow.compute_mode = g.compute_mode;
        slow.mig_mode = g.mig_mode;
        slow.power_limit_w = g.power_limit_w;
      }
      GpuSample& s = out->gpus[static_cast<size_t>(k)];
      s = slow;
      s.utilization_pct = g.utilization_gpu_pct;
      s.sm_clock_mhz = g.sm_clock_mhz;
      s.mem_clock_mhz = g.mem_clock_mhz;
      s.memory_total_bytes = g.memory_total_bytes;
      s.pcie_gen = g.pcie_gen;
      s.pcie_width = g.pcie_width;
      s.power_w = g.power_w;
      s.temperature_c = g.temperature_c;
      s.memory_used_bytes = g.memory_used_bytes;
      s.pcie_rx_bytes_per_s = g.pcie_rx_bytes_per_s;  // NaN unless read this time
      s.pcie_tx_bytes_per_s = g.pcie_tx_bytes_per_s;
      s.clocks_event_reasons = g.clocks_event_reasons_known ? g.clocks_event_reasons : 0;
    }
  }

  // The NVML indices of the GPUs this process uses (a primary context is
  // active on them), matched by PCI bus id: a job on some of a node's GPUs
  // must not average in the others (idle, or another job's).
  void RefreshJobGpus() {
    LookUpJobGpus();
    description_ = Describe();
  }

  void LookUpJobGpus() {
    job_gpus_.clear();
    absl::StatusOr<std::vector<std::string>> ids = ProcessCudaDeviceBusIds();
    if (!ids.ok()) {
      job_gpus_note_ = absl::IsFailedPrecondition(ids.status())
                           ? "CUDA is not initialized in this process"
                           : std::string(ids.status().message());
      return;
    }
    for (const std::string& id : *ids) {
      const auto it = std::find(nvml_bus_ids_.begin(), nvml_bus_ids_.end(), CanonicalPciBusId(id));
      if (it != nvml_bus_ids_.end())
        job_gpus_.push_back(static_cast<int>(it - nvml_bus_ids_.begin()));
    }
    std::sort(job_gpus_.begin(), job_gpus_.end());
    job_gpus_note_ = ids->empty() ? "this process uses no CUDA device yet"
                                  : absl::StrCat("NVML lists none of this process's GPUs (",
                                                 absl::StrJoin(*ids, ", "), ")");
  }

  void SampleHost(int64_t now_ns, bool refresh, TelemetrySample* out) {
    absl::StatusOr<HostSnapshot> snap = host_.Read(refresh);
    if (!snap.ok()) return;
    // The container's limit binds first where it is the tighter.
    const ContainerMemory cm = container_memory_.Read(refresh);
    out->memory_available_bytes = std::isnan(cm.available_bytes) ? snap->mem_available_bytes
                                  : std::isnan(snap->mem_available_bytes)
                                      ? cm.available_bytes
                                      : std::min(cm.available_bytes, snap->mem_available_bytes);
    out->memory_pressure_pct = snap->memory_pressure_pct;
    out->load1 = snap->load1;
    children_.Read(refresh, &child_ticks_);
    if (have_prev_ && now_ns > prev_ns_) {
      const double seconds = static_cast<double>(now_ns - prev_ns_) * 1e-9;
      const HostRates r = RatesBetween(prev_, *snap, seconds);
      out->host_cpu_pct = r.cpu_pct;
      out->host_iowait_pct = r.iowait_pct;
      out->process_cores = r.process_cores;
      out->swap_pages_per_s = r.swap_pages_per_s;
      // Children alive at both samples: their CPU time since the last one
      // (both lists are by pid).
      double ticks = 0;
      auto prev = prev_child_ticks_.begin();
      for (const auto& [pid, now_ticks] : child_ticks_) {
        while (prev != prev_child_ticks_.end() && prev->first < pid) ++prev;
        if (prev != prev_child_ticks_.end() && prev->first == pid && now_ticks >= prev->second)
          ticks += static_cast<double>(now_ticks - prev->second);
      }
      out->children_cores = ticks / ticks_per_s_ / seconds;
    }
    prev_ = *snap;
    have_prev_ = true;
    prev_ns_ = now_ns;
    prev_child_ticks_.swap(child_ticks_);
  }

  const std::string proc_root_;
  const std::string cgroup_root_;
  std::unique_ptr<Nvml> nvml_;
  std::vector<std::string> nvml_bus_ids_;            // canonical, by NVML index
  std::vector<int> job_gpus_;                        // NVML indices, ascending
  std::string job_gpus_note_ = "not looked up yet";  // why job_gpus_ is empty
  std::string nvml_status_;
  bool host_ok_ = false;
  double cpus_available_ = kNotSampled;
  std::string description_;
  HostReader host_;
  ContainerMemoryReader container_memory_;
  ChildTicks children_;
  const double ticks_per_s_;
  HostSnapshot prev_;
  bool have_prev_ = false;
  int64_t prev_ns_ = 0;
  std::vector<std::pair<int, uint64_t>> child_ticks_, prev_child_ticks_;  // by pid
  std::array<GpuSample, kMaxTelemetryGpus> slow_gpus_{};  // from the last full read, by slot
  int64_t refreshed_ns_ = 0;
  uint64_t samples_ = 0;
};

}  // namespace

std::unique_ptr<Telemetry> MakeSystemTelemetry(std::string proc_root, std::string cgroup_root) {
  return std::make_unique<SystemTelemetry>(std::move(proc_root), std::move(cgroup_root));
}

}  // namespace gpuscope::internal
