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
#include "backends/telemetry/process_roles.h"

namespace gpuscope::internal {
namespace {

// How often (in the samples' time) the host sampler looks around afresh:
// for files that were missing, for the process's cgroups, for the children
// every thread forked; and reads /proc/vmstat even without swap. In
// between, a sample reads the files it keeps open, one pread() each. (GPUs
// are looked up again every tenth sample: SampleGpus().)
constexpr int64_t kRefreshNs = 1'000'000'000;

// The live descendants of `parent` (DataLoader workers, wherever they sit
// in the process tree: a forkserver's workers are its children, the
// process's grandchildren), each with its CPU ticks (utime + stime), whether
// it is one of the loader's workers (a pid named in process_roles.h, a
// process torch named "pt_data_worker", or a descendant of either), and for
// a worker itself its run-queue wait.
//
// Descendants are found in /proc/<pid>/task/*/children where the kernel has
// it (every thread lists the children it forked), from `parent` down, else
// by scanning every process and following parent pids (costly on a busy
// host). That full search runs on a refresh only (about once a second): in
// between, the children files of the parent's main thread and of the
// threads found with children (the one that starts the DataLoader workers,
// a forkserver's) are read again, for children forked since, and the
// descendants already known are read again. Their stat files stay open (up
// to kMaxOpenStats): one pread() a process a sample; one that exits fails
// the read and is forgotten (its pid may be reused). A process whose parent
// is neither `parent` nor a descendant found in the same pass is a stranger
// (a reused pid) and is dropped. Where the kernel lists no children, a
// process forked between two refreshes is counted from the next one.
class DescendantTicks {
 public:
  // The name a torch DataLoader worker gives its main thread (and with it
  // the process's command name) as it starts.
  static constexpr absl::string_view kTorchWorkerName = "pt_data_worker";

  struct Process {
    int pid = 0;
    uint64_t ticks = 0;
    bool worker = false;
    uint64_t run_delay_ns = 0;  // named workers only (their main thread)
  };

  DescendantTicks(std::string proc_root, int parent)
      : proc_root_(std::move(proc_root)), parent_(parent), main_tid_(absl::StrCat(parent)) {}

  // `*out`: every live descendant, by pid. `workers`: the loader's workers
  // as named (sorted).
  void Read(bool full, const std::vector<int>& workers, std::vector<Process>* out) {
    out->clear();
    pids_.clear();
    CollectCandidates(full);
    ReadCandidates();
    KeepDescendants();
    ReportProcesses(workers, out);
    LimitOpenFiles();
    known_.swap(next_);
    next_.clear();  // closes the files of those gone and of strangers
  }

 private:
  static constexpr size_t kMaxOpenStats = 64;
  static constexpr size_t kMaxForkers = 8;
  static constexpr size_t kMaxDescendants = 4096;

  struct Known {
    int pid = 0;
    int ppid = 0;
    uint64_t ticks = 0;
    bool accepted = false;
    bool named_worker = false;  // torch named it a DataLoader worker
    bool worker = false;
    ProcFile stat, schedstat;
  };

  // The command name in a /proc/<pid>/stat line ("" when malformed).
  static absl::string_view CommOf(absl::string_view stat) {
    const size_t open = stat.find('(');
    const size_t close = stat.rfind(')');
    if (open == absl::string_view::npos || close == absl::string_view::npos || close < open)
      return "";
    return stat.substr(open + 1, close - open - 1);
  }

  static const Known* Find(const std::vector<Known>& v, int pid) {
    const auto it =
        std::lower_bound(v.begin(), v.end(), pid, [](const Known& k, int p) { return k.pid < p; });
    return it != v.end() && it->pid == pid ? &*it : nullptr;
  }

  // The candidate pids, sorted and unique, in pids_: on a full read, from
  // the process tree (FindDescendants); otherwise the children of the
  // threads that fork and the descendants known.
  void CollectCandidates(bool full) {
    if (full) {
      FindDescendants();
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
      for (const Known& k : known_) pids_.push_back(k.pid);
    }
    std::sort(pids_.begin(), pids_.end());
    pids_.erase(std::unique(pids_.begin(), pids_.end()), pids_.end());
  }

  // Read every candidate: the known ones from their open files. next_: the
  // candidates alive and readable, by pid.
  void ReadCandidates() {
    next_.clear();
    size_t known = 0;
    for (int pid : pids_) {
      while (known < known_.size() && known_[known].pid < pid) ++known;
      Known k;
      k.pid = pid;
      if (known < known_.size() && known_[known].pid == pid) {
        k.stat = std::move(known_[known].stat);
        k.schedstat = std::move(known_[known].schedstat);
      } else {
        k.stat = ProcFile(absl::StrCat(proc_root_, "/", pid, "/stat"), ProcFile::End::kAtShortRead);
      }
      absl::string_view text;
      if (!k.stat.Read(&text, /*may_open=*/true)) continue;  // gone
      absl::string_view f[13];
      uint64_t utime = 0, stime = 0;
      if (!ProcStatFields(text, f, 13) || !absl::SimpleAtoi(f[1], &k.ppid) ||
          !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
        continue;  // unreadable
      }
      k.ticks = utime + stime;
      k.named_worker = CommOf(text) == kTorchWorkerName;
      next_.push_back(std::move(k));
    }
  }

  // Keep the descendants: those whose parent is `parent_` or a descendant,
  // until nothing changes (parents usually come first by pid, so one or
  // two passes).
  void KeepDescendants() {
    for (Known& k : next_) k.accepted = k.ppid == parent_;
    for (bool changed = true; changed;) {
      changed = false;
      for (Known& k : next_) {
        if (k.accepted) continue;
        const Known* p = Find(next_, k.ppid);
        if (p != nullptr && p->accepted) changed = k.accepted = true;
      }
    }
    next_.erase(
        std::remove_if(next_.begin(), next_.end(), [](const Known& k) { return !k.accepted; }),
        next_.end());
  }

  // Workers: named, or below one (up to a depth that no real tree reaches;
  // a cycle of reused pids ends there too). `*out` gets every descendant;
  // the named workers with their run-queue wait.
  void ReportProcesses(const std::vector<int>& workers, std::vector<Process>* out) {
    for (Known& k : next_) {
      const Known* p = &k;
      for (int depth = 0; p != nullptr && depth < 16; ++depth) {
        if (p->named_worker || std::binary_search(workers.begin(), workers.end(), p->pid)) {
          k.worker = true;
          break;
        }
        p = p->ppid == parent_ ? nullptr : Find(next_, p->ppid);
      }
      Process out_p{k.pid, k.ticks, k.worker, 0};
      if (k.named_worker || std::binary_search(workers.begin(), workers.end(), k.pid)) {
        if (!k.schedstat.is_open() && k.schedstat.path().empty()) {
          k.schedstat = ProcFile(absl::StrCat(proc_root_, "/", k.pid, "/schedstat"),
                                 ProcFile::End::kAtShortRead);
        }
        absl::string_view text;
        uint64_t on_cpu = 0;
        if (k.schedstat.Read(&text)) {
          ParseSchedstat(text, &on_cpu, &out_p.run_delay_ns);
        }
      }
      out->push_back(out_p);
    }
  }

  // Keeps at most kMaxOpenStats descendants' files open; the rest are read
  // by path next time.
  void LimitOpenFiles() {
    size_t open = 0;
    for (Known& k : next_) {
      if (open >= kMaxOpenStats) {
        k.stat.Close();  // read by path next time
        k.schedstat.Close();
      } else {
        ++open;
      }
    }
  }

  // Every descendant's threads' children files, from the parent down;
  // without any, every process is a candidate.
  void FindDescendants() {
    forkers_.clear();
    bool have_children_files = false;
    std::vector<int> queue{parent_};
    for (size_t q = 0; q < queue.size() && queue.size() < kMaxDescendants; ++q) {
      const int pid = queue[q];
      const std::string tasks = absl::StrCat(proc_root_, "/", pid, "/task");
      DIR* dir = opendir(tasks.c_str());
      if (dir == nullptr) continue;
      while (dirent* e = readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        ProcFile children(absl::StrCat(tasks, "/", e->d_name, "/children"));
        absl::string_view text;
        if (!children.Read(&text)) continue;
        have_children_files = true;
        const size_t before = pids_.size();
        AppendPids(text);
        for (size_t i = before; i < pids_.size(); ++i) queue.push_back(pids_[i]);
        // Kept open: the parent's main thread's (it usually starts the
        // DataLoader workers, again at every epoch), and those of threads
        // with children (a forkserver's).
        const bool main_thread = pid == parent_ && absl::string_view(e->d_name) == main_tid_;
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
      if (absl::SimpleAtoi(e->d_name, &pid) && pid != parent_) pids_.push_back(pid);
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
  const std::string main_tid_;     // <parent>, the main thread's task
  std::vector<ProcFile> forkers_;  // children files of threads found with children
  std::vector<Known> known_;       // known descendants, by pid
  std::vector<Known> next_;        // scratch
  std::vector<int> pids_;          // scratch: candidates
};

class SystemTelemetry final : public Telemetry {
 public:
  SystemTelemetry(std::string proc_root, std::string cgroup_root)
      : proc_root_(std::move(proc_root)),
        cgroup_root_(std::move(cgroup_root)),
        host_(proc_root_),
        container_memory_(cgroup_root_, proc_root_),
        container_cpu_(cgroup_root_, proc_root_),
        descendants_(proc_root_, static_cast<int>(getpid())),
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
      s.process_memory_bytes = g.process_memory_bytes;
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
    LoaderWorkersSince(&workers_generation_, &workers_, &workers_known_);
    descendants_.Read(refresh, workers_, &procs_);
    const bool any_worker = std::any_of(procs_.begin(), procs_.end(),
                                        [](const DescendantTicks::Process& p) { return p.worker; });
    workers_known_ = workers_known_ || any_worker;
    out->cpu_pressure_pct = snap->cpu_pressure_pct;
    uint64_t train_delay_ns = 0;
    const bool train_read = ReadTrainingThread(&train_delay_ns);
    bool cgroups_moved = false;
    const std::vector<CgroupThrottling>& throttling = container_cpu_.Read(refresh, &cgroups_moved);
    if (have_prev_ && now_ns > prev_ns_) {
      const double seconds = static_cast<double>(now_ns - prev_ns_) * 1e-9;
      const HostRates r = RatesBetween(prev_, *snap, seconds);
      out->host_cpu_pct = r.cpu_pct;
      out->host_iowait_pct = r.iowait_pct;
      out->steal_pct = r.steal_pct;
      out->process_cores = r.process_cores;
      out->swap_pages_per_s = r.swap_pages_per_s;
      // Descendants alive at both samples: their CPU time since the last one
      // (both lists are by pid).
      double worker_ticks = 0, other_ticks = 0, worker_delay_ns = 0;
      auto prev = prev_procs_.begin();
      for (const DescendantTicks::Process& p : procs_) {
        while (prev != prev_procs_.end() && prev->pid < p.pid) ++prev;
        if (prev == prev_procs_.end() || prev->pid != p.pid || p.ticks < prev->ticks) continue;
        (p.worker ? worker_ticks : other_ticks) += static_cast<double>(p.ticks - prev->ticks);
        if (p.worker && p.run_delay_ns >= prev->run_delay_ns)
          worker_delay_ns += static_cast<double>(p.run_delay_ns - prev->run_delay_ns);
      }
      out->child_cores = other_ticks / ticks_per_s_ / seconds;
      if (workers_known_) {
        out->worker_cores = worker_ticks / ticks_per_s_ / seconds;
        out->worker_cpu_wait_cores = worker_delay_ns * 1e-9 / seconds;
      }
      if (!cgroups_moved) {
        const double throttled = ThrottledShare(prev_throttling_, throttling);
        if (!std::isnan(throttled)) out->cpu_throttled_pct = 100 * throttled;
      }
      if (train_read && have_train_prev_ && train_delay_ns >= prev_train_delay_ns_) {
        out->cpu_wait_share = std::min(
            1.0, static_cast<double>(train_delay_ns - prev_train_delay_ns_) * 1e-9 / seconds);
      }
    }
    have_train_prev_ = train_read;
    prev_train_delay_ns_ = train_delay_ns;
    prev_throttling_ = throttling;
    prev_ = *snap;
    have_prev_ = true;
    prev_ns_ = now_ns;
    prev_procs_.swap(procs_);
  }

  // The training thread's run-queue wait so far (schedstat): its thread as a
  // session named it, else the main thread. A new thread starts afresh.
  bool ReadTrainingThread(uint64_t* run_delay_ns) {
    const int self = static_cast<int>(getpid());
    const int tid = TrainingThread() > 0 ? TrainingThread() : self;
    if (tid != train_tid_) {
      train_tid_ = tid;
      train_schedstat_ = ProcFile(absl::StrCat(proc_root_, "/", self, "/task/", tid, "/schedstat"),
                                  ProcFile::End::kAtShortRead);
      have_train_prev_ = false;
    }
    absl::string_view text;
    uint64_t on_cpu_ns = 0;
    return train_schedstat_.Read(&text) && ParseSchedstat(text, &on_cpu_ns, run_delay_ns);
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
  ContainerCpuReader container_cpu_;
  std::vector<CgroupThrottling> prev_throttling_;  // at the last sample, by level
  DescendantTicks descendants_;
  std::vector<DescendantTicks::Process> procs_, prev_procs_;
  uint64_t workers_generation_ = 0;
  std::vector<int> workers_;  // the loader's, as named (sorted)
  bool workers_known_ = false;
  int train_tid_ = 0;
  ProcFile train_schedstat_;
  bool have_train_prev_ = false;
  uint64_t prev_train_delay_ns_ = 0;
  const double ticks_per_s_;
  HostSnapshot prev_;
  bool have_prev_ = false;
  int64_t prev_ns_ = 0;
  std::array<GpuSample, kMaxTelemetryGpus> slow_gpus_{};  // from the last full read, by slot
  int64_t refreshed_ns_ = 0;
  uint64_t samples_ = 0;
};

}  // namespace

std::unique_ptr<Telemetry> MakeSystemTelemetry(std::string proc_root, std::string cgroup_root) {
  return std::make_unique<SystemTelemetry>(std::move(proc_root), std::move(cgroup_root));
}

}  // namespace gpuscope::internal
