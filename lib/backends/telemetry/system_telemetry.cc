#include "backends/telemetry/system_telemetry.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
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

// The pids of `parent`'s live children: from /proc/<parent>/task/*/children
// where the kernel has it (cheap), else by scanning every process (costly
// on a busy host).
std::vector<int> ChildPids(const std::string& proc_root, int parent, bool* scan_all) {
  std::vector<int> pids;
  const std::string tasks = absl::StrCat(proc_root, "/", parent, "/task");
  DIR* dir = opendir(tasks.c_str());
  bool have_children_files = false;
  if (dir != nullptr) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream f(absl::StrCat(tasks, "/", e->d_name, "/children"));
      if (!f) continue;
      have_children_files = true;
      int pid = 0;
      while (f >> pid) pids.push_back(pid);
    }
    closedir(dir);
  }
  *scan_all = !have_children_files;
  return pids;
}

// CPU ticks (utime + stime) of every live child of `parent`, by pid.
std::map<int, uint64_t> ChildTicks(const std::string& proc_root, int parent) {
  std::map<int, uint64_t> out;
  bool scan_all = false;
  std::vector<std::string> names;
  for (int pid : ChildPids(proc_root, parent, &scan_all)) names.push_back(absl::StrCat(pid));
  if (scan_all) {
    DIR* dir = opendir(proc_root.c_str());
    if (dir == nullptr) return out;
    while (dirent* e = readdir(dir)) {
      int pid = 0;
      if (absl::SimpleAtoi(e->d_name, &pid)) names.push_back(e->d_name);
    }
    closedir(dir);
  }
  for (const std::string& name : names) {
    int pid = 0;
    if (!absl::SimpleAtoi(name, &pid)) continue;
    std::ifstream f(absl::StrCat(proc_root, "/", name, "/stat"));
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(absl::string_view(text).substr(close + 1), ' ', absl::SkipEmpty());
    // fields[0] is field 3 (state), [1] the parent pid, [11] and [12] utime, stime.
    int ppid = 0;
    uint64_t utime = 0, stime = 0;
    if (fields.size() > 12 && absl::SimpleAtoi(fields[1], &ppid) && ppid == parent &&
        absl::SimpleAtoi(fields[11], &utime) && absl::SimpleAtoi(fields[12], &stime)) {
      out[pid] = utime + stime;
    }
  }
  return out;
}

class SystemTelemetry final : public Telemetry {
 public:
  SystemTelemetry(std::string proc_root, std::string cgroup_root)
      : proc_root_(std::move(proc_root)), cgroup_root_(std::move(cgroup_root)) {}

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
    host_ok_ = ReadHost(proc_root_).ok();
    // The CPUs the loader may use: the affinity mask, cut by a container
    // limit (placement does not change while a job runs).
    const HostPlacement p = ReadPlacement("/sys", cgroup_root_, nullptr, proc_root_);
    if (p.cpus_allowed > 0) {
      cpus_available_ = std::isnan(p.cgroup_cpu_limit)
                            ? p.cpus_allowed
                            : std::min<double>(p.cpus_allowed, p.cgroup_cpu_limit);
    }
    if (nvml_ == nullptr && !host_ok_) {
      return absl::UnavailableError(
          absl::StrCat("neither NVML (", nvml_status_, ") nor ", proc_root_, " is readable"));
    }
    return absl::OkStatus();
  }

  std::string description() const override {
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

  void Sample(int64_t now_ns, TelemetrySample* out) override {
    ++samples_;
    *out = TelemetrySample{};
    out->host_ns = now_ns;
    out->cpus_available = cpus_available_;
    if (host_ok_) SampleHost(now_ns, out);
    if (nvml_ != nullptr) {
      // Which GPUs are the job's: at the first sample, then about once a
      // second (a process may take up another GPU later).
      if (samples_ % 10 == 1) RefreshJobGpus();
      out->gpu_count = static_cast<int>(std::min<size_t>(job_gpus_.size(), kMaxTelemetryGpus));
      for (int k = 0; k < out->gpu_count; ++k) {
        const int i = job_gpus_[static_cast<size_t>(k)];
        // PCIe throughput counters take NVML about 20 ms each: every tenth
        // sample only (about once a second at the default rate).
        const GpuState g = nvml_->Read(i, /*pcie_throughput=*/samples_ % 10 == 0);
        GpuSample& s = out->gpus[static_cast<size_t>(k)];
        s.index = i;
        s.utilization_pct = g.utilization_gpu_pct;
        s.sm_clock_mhz = g.sm_clock_mhz;
        s.sm_clock_max_mhz = g.sm_clock_max_mhz;
        s.mem_clock_mhz = g.mem_clock_mhz;
        s.mem_clock_max_mhz = g.mem_clock_max_mhz;
        s.memory_total_bytes = g.memory_total_bytes;
        s.pcie_gen = g.pcie_gen;
        s.pcie_gen_max = g.pcie_gen_max;
        s.pcie_width = g.pcie_width;
        s.pcie_width_max = g.pcie_width_max;
        s.ecc_corrected = g.ecc_corrected;
        s.ecc_uncorrected = g.ecc_uncorrected;
        s.persistence_mode = g.persistence_mode;
        s.compute_mode = g.compute_mode;
        s.mig_mode = g.mig_mode;
        s.power_w = g.power_w;
        s.power_limit_w = g.power_limit_w;
        s.temperature_c = g.temperature_c;
        s.memory_used_bytes = g.memory_used_bytes;
        s.pcie_rx_bytes_per_s = g.pcie_rx_bytes_per_s;  // NaN unless read this time
        s.pcie_tx_bytes_per_s = g.pcie_tx_bytes_per_s;
        s.clocks_event_reasons = g.clocks_event_reasons_known ? g.clocks_event_reasons : 0;
      }
    }
  }

 private:
  // The NVML indices of the GPUs this process uses (a primary context is
  // active on them), matched by PCI bus id: a job on some of a node's GPUs
  // must not average in the others (idle, or another job's).
  void RefreshJobGpus() {
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

  void SampleHost(int64_t now_ns, TelemetrySample* out) {
    absl::StatusOr<HostSnapshot> snap = ReadHost(proc_root_);
    if (!snap.ok()) return;
    // The container's limit binds first where it is the tighter.
    const ContainerMemory cm = ReadContainerMemory(cgroup_root_, proc_root_);
    out->memory_available_bytes = std::isnan(cm.available_bytes) ? snap->mem_available_bytes
                                  : std::isnan(snap->mem_available_bytes)
                                      ? cm.available_bytes
                                      : std::min(cm.available_bytes, snap->mem_available_bytes);
    out->memory_pressure_pct = snap->memory_pressure_pct;
    out->load1 = snap->load1;
    std::map<int, uint64_t> children = ChildTicks(proc_root_, static_cast<int>(getpid()));
    if (prev_.has_value() && now_ns > prev_ns_) {
      const double seconds = static_cast<double>(now_ns - prev_ns_) * 1e-9;
      const HostRates r = RatesBetween(*prev_, *snap, seconds);
      out->host_cpu_pct = r.cpu_pct;
      out->host_iowait_pct = r.iowait_pct;
      out->process_cores = r.process_cores;
      out->swap_pages_per_s = r.swap_pages_per_s;
      // Children alive at both samples: their CPU time since the last one.
      double ticks = 0;
      for (const auto& [pid, now_ticks] : children) {
        const auto it = prev_children_.find(pid);
        if (it != prev_children_.end() && now_ticks >= it->second)
          ticks += static_cast<double>(now_ticks - it->second);
      }
      const double hz = static_cast<double>(std::max<long>(1, sysconf(_SC_CLK_TCK)));
      out->children_cores = ticks / hz / seconds;
    }
    prev_ = *snap;
    prev_ns_ = now_ns;
    prev_children_ = std::move(children);
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
  std::optional<HostSnapshot> prev_;
  int64_t prev_ns_ = 0;
  std::map<int, uint64_t> prev_children_;
  uint64_t samples_ = 0;
};

}  // namespace

std::unique_ptr<Telemetry> MakeSystemTelemetry(std::string proc_root, std::string cgroup_root) {
  return std::make_unique<SystemTelemetry>(std::move(proc_root), std::move(cgroup_root));
}

}  // namespace gpuscope::internal
