// The rules about what the host makes the GPU wait for: the input pipeline
// (told apart as CPU- or storage-bound), host-to-device copies and
// synchronizations; and the notices about the recording itself (misused
// scopes, host timing only, CUDA events instead of CUPTI). Declared in
// rules.h; Diagnose() runs them.

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/rules.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/phase.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

namespace {

// What the loader costs, as a share of step time: with a GPU source, the
// GPU's idle time while the host waits for the next batch (a loader hidden
// behind the GPU's backlog costs nothing); host time in phase "data"
// without one. 0 without a data phase.
double InputShare(const Summary& s, bool* measured) {
  const PhaseStats* data = s.FindPhase(PhaseName(Phase::kData));
  *measured = s.source != Source::kHost && s.gpu_steps > 0;
  if (data == nullptr || data->steps == 0) return 0;
  return *measured ? IdleShare(s, data->name) : data->inclusive_share;
}

// The CPU the loader uses, in cores: the process's own (a loader without
// worker processes runs in it) and its workers', where a loader named them;
// every descendant's where none did (the best guess, said in the evidence).
// nullopt when nothing was sampled.
std::optional<double> LoaderCores(const TelemetryStats& t) {
  if (!t.process_cores.has_value() && !t.worker_cores.has_value() && !t.child_cores.has_value())
    return std::nullopt;
  const double children = t.worker_cores.has_value() ? *t.worker_cores : t.child_cores.value_or(0);
  return t.process_cores.value_or(0) + children;
}

// The share of the time the loader's workers were ready to run (running or
// waiting for a CPU) that they waited; nullopt without workers ready.
std::optional<double> WorkerWaitShare(const TelemetryStats& t) {
  if (!t.worker_cores.has_value() || !t.worker_cpu_wait_cores.has_value()) return std::nullopt;
  const double ready = *t.worker_cores + *t.worker_cpu_wait_cores;
  if (ready <= 0) return std::nullopt;
  return *t.worker_cpu_wait_cores / ready;
}

// The loader's workers waited for a CPU at least a fifth of the time they
// were ready to run (or, without workers, the training thread, which then
// loads the data, a tenth of all time).
bool LoaderContended(const TelemetryStats& t) {
  if (t.worker_cores.value_or(0) > 0) {
    if (const std::optional<double> wait = WorkerWaitShare(t); wait.has_value()) {
      return *wait >= 0.20;
    }
  }
  return t.cpu_wait_share.value_or(0) >= 0.10;
}

// What limits the input pipeline, as telemetry tells it.
enum class InputCause { kUnknown, kCpu, kStorage };

// The loader's limit by telemetry: its CPUs when the process and its
// workers use the CPUs they may, storage when the CPUs idle in iowait;
// `contended` when, not CPU-bound, the loader waits for CPUs others take.
InputCause FindInputCause(const Summary& s, const DiagnoseOptions& o, bool* contended) {
  InputCause cause = InputCause::kUnknown;
  if (s.telemetry.has_value()) {
    const TelemetryStats& t = *s.telemetry;
    const std::optional<double> cores_used = LoaderCores(t);
    const bool cores_saturated = cores_used.has_value() && t.cpus_available.has_value() &&
                                 *t.cpus_available > 0 &&
                                 *cores_used >= o.cpu_saturated_share * *t.cpus_available;
    const bool waiting_on_io = t.host_iowait_pct.has_value() &&
                               *t.host_iowait_pct >= o.storage_iowait_pct &&
                               t.host_cpu_pct.has_value() && *t.host_cpu_pct < o.storage_cpu_pct;
    if (cores_saturated) {
      cause = InputCause::kCpu;
    } else if (waiting_on_io) {
      cause = InputCause::kStorage;
    }
    *contended = cause != InputCause::kCpu && LoaderContended(t);
  }
  return cause;
}

// Input-bound's evidence: the data phase's times, throughput, the GPU's
// idle time in it, and the host's CPU and the loader's use of it.
void AddInputEvidence(const Summary& s, const PhaseStats& data, Finding& f) {
  f.evidence = {{"data_share", data.inclusive_share},
                {"data_p50_s", data.time.p50},
                {"data_p95_s", data.time.p95},
                {"step_p50_s", s.step_time.p50}};
  if (s.samples_per_second.has_value())
    f.evidence.emplace_back("samples_per_second", *s.samples_per_second);
  if (const auto idle = s.idle_by_cause.find(data.name); idle != s.idle_by_cause.end()) {
    f.evidence.emplace_back("gpu_idle_in_data_pct", idle->second);
  }
  if (s.telemetry.has_value()) {
    AddIf(f, "host_cpu_pct", s.telemetry->host_cpu_pct);
    AddIf(f, "host_iowait_pct", s.telemetry->host_iowait_pct);
    AddIf(f, "process_cores", s.telemetry->process_cores);
    AddIf(f, "worker_cores", s.telemetry->worker_cores);
    AddIf(f, "child_cores", s.telemetry->child_cores);
    AddIf(f, "cpus_available", s.telemetry->cpus_available);
    AddIf(f, "worker_cpu_wait_cores", s.telemetry->worker_cpu_wait_cores);
    AddIf(f, "cpu_wait_share", s.telemetry->cpu_wait_share);
  }
}

// Input-bound's id, title and recommendation for its cause.
void DescribeInputBound(const Summary& s, InputCause cause, bool measured, double share,
                        bool contended, Finding& f) {
  const std::string wait =
      measured
          ? absl::StrCat("the GPU idles ", Pct(share), " of step time waiting for the next batch")
          : absl::StrCat(Pct(share), " of step time is spent waiting for the next batch");
  const std::string also = contended ? ", and the loader waits for CPUs others take" : "";
  switch (cause) {
    case InputCause::kCpu:
      f.id = "input-bound.cpu";
      f.title =
          absl::StrCat("Input-bound on CPU: ", wait, ", with the loader using ",
                       absl::StrFormat("%.1f of %.1f CPUs", LoaderCores(*s.telemetry).value_or(0),
                                       s.telemetry->cpus_available.value_or(0)));
      f.recommendation =
          "The loader's CPUs are the limit: more num_workers will not help past the CPUs "
          "available. "
          "Make preprocessing cheaper (pre-resize or pre-decode the dataset offline, decode at "
          "lower "
          "resolution), move augmentation to the GPU (torchvision.transforms.v2 on CUDA tensors, "
          "NVIDIA DALI), keep pin_memory=True and persistent_workers=True, or get more CPU cores "
          "(a container CPU limit may be the cap).";
      break;
    case InputCause::kStorage:
      f.id = "input-bound.storage";
      f.title =
          absl::StrCat("Input-bound on storage: ", wait, ", with the CPUs idle in iowait", also);
      f.recommendation =
          "The loader waits on reads: cache or copy the dataset to local NVMe or RAM, store it in "
          "large sequential shards (WebDataset, TFRecord, FFCV) instead of many small files, and "
          "keep more reads in flight (raise num_workers and prefetch_factor, "
          "persistent_workers=True).";
      break;
    case InputCause::kUnknown:
      f.id = "input-bound";
      f.title = absl::StrCat("Input-bound: ", wait, also);
      f.recommendation =
          "Feed the GPU faster: raise DataLoader num_workers (up to one per spare CPU core), set "
          "pin_memory=True and persistent_workers=True, raise prefetch_factor, and move decoding "
          "and augmentation out of the training process. If the workers already saturate the "
          "CPUs, make preprocessing cheaper (or do it on the GPU); if the CPUs sit idle while "
          "iowait is high, the storage is the bottleneck: cache, shard or prefetch the dataset "
          "to local disk.";
      break;
  }
  if (contended) {
    absl::StrAppend(&f.recommendation,
                    " The loader is short of CPU because other processes take it: more workers "
                    "add to the contention (see cpu-contention).");
  }
}

// How far input-bound's share can be trusted, by what measured it.
const char* InputConfidence(const Summary& s, bool measured) {
  if (!measured) {
    return "medium: host timing only; if the loop waits for the GPU inside the data phase (a "
           "synchronizing copy, say), that wait counts as data time. A GPU source separates them.";
  }
  if (s.source == Source::kCupti) {
    return "high: the GPU was measured idle while the host waited for data";
  }
  return "high: the GPU was idle at least this long while the host waited for data "
         "(CUDA events give a lower bound)";
}

}  // namespace

// The input pipeline: time in phase "data" (steps() puts next(loader) there),
// told apart by telemetry as CPU-bound (the process and its loader's
// workers use the CPUs they may) or storage-bound (iowait while the CPUs
// idle). A host kept busy by other processes is not the loader's CPU limit:
// the loader then may get less CPU than it asks for, which cpu-contention
// judges by the run-queue wait.
void InputBound(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  const PhaseStats* data = s.FindPhase(PhaseName(Phase::kData));
  if (data == nullptr || data->steps == 0) return;
  bool measured = false;
  const double share = InputShare(s, &measured);
  if (share < o.input_bound_moderate) return;
  bool contended = false;
  const InputCause cause = FindInputCause(s, o, &contended);
  Finding f;
  f.severity = Grade(share, o.input_bound_moderate, o.input_bound_high);
  f.share = share;
  AddInputEvidence(s, *data, f);
  DescribeInputBound(s, cause, measured, share, contended, f);
  f.confidence = InputConfidence(s, measured);
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

namespace {

// What cpu-contention measures: who waits for a CPU, what it costs, and
// who takes the CPUs.
struct Contention {
  double train = 0;        // the training thread's wait, a share of wall time
  double worker_wait = 0;  // the workers' wait, a share of their time ready to run
  double loader = 0;       // the workers' wait as a share of step time
  double share = 0;        // what it costs, a share of step time
  double own = 0;          // the cores the job's own processes use
  bool self_inflicted = false;
  bool steal = false;
  bool throttled = false;
};

// Contention's measures from telemetry; nullopt when it costs less than
// the moderate share (or is not finite).
std::optional<Contention> MeasureContention(const Summary& s, const TelemetryStats& t,
                                            const DiagnoseOptions& o) {
  Contention c;
  c.train = t.cpu_wait_share.value_or(0);
  c.worker_wait = WorkerWaitShare(t).value_or(0);
  bool measured = false;
  c.loader = c.worker_wait > 0 ? InputShare(s, &measured) * c.worker_wait : 0.0;
  c.share = std::min(1.0, c.train + c.loader);
  if (c.share < o.cpu_contention_moderate || !std::isfinite(c.share)) return std::nullopt;
  c.own = t.process_cores.value_or(0) + t.worker_cores.value_or(0) + t.child_cores.value_or(0);
  c.self_inflicted = t.cpus_available.has_value() && *t.cpus_available > 0 &&
                     c.own >= o.cpu_saturated_share * *t.cpus_available;
  c.steal = t.steal_pct.value_or(0) >= 5.0;
  c.throttled = t.cpu_throttled_pct.value_or(0) >= 5.0;
  return c;
}

// Cpu-contention's title: who waited, and who takes the CPUs.
std::string ContentionTitle(const TelemetryStats& t, const DiagnoseOptions& o,
                            const Contention& c) {
  std::vector<std::string> who;
  if (c.train >= 0.005)
    who.push_back(
        absl::StrFormat("the training thread waited for a CPU %s of the time", Pct(c.train)));
  if (c.loader > 0 && c.worker_wait >= 0.005) {
    who.push_back(absl::StrFormat("the loader's workers %s of the time they were ready to run",
                                  Pct(c.worker_wait)));
  }
  std::string why;
  if (c.throttled) {
    why =
        absl::StrFormat("; the container's CPU limit throttled it in %.0f%% of the limit's periods",
                        *t.cpu_throttled_pct);
    if (t.cpus_available.has_value())
      absl::StrAppendFormat(&why, " (%.1f CPUs available)", *t.cpus_available);
  } else if (c.self_inflicted) {
    why = absl::StrFormat("; the job's own processes use %.1f of its %.1f CPUs", c.own,
                          *t.cpus_available);
  } else if (t.host_cpu_pct.has_value() && *t.host_cpu_pct >= o.cpu_saturated_pct) {
    why = absl::StrFormat("; other processes keep the host's CPUs %.0f%% busy", *t.host_cpu_pct);
  } else if (t.cpu_pressure_pct.has_value() && *t.cpu_pressure_pct >= 10) {
    why =
        absl::StrFormat("; tasks wait for a CPU %.0f%% of the time host-wide", *t.cpu_pressure_pct);
  }
  if (c.steal) absl::StrAppendFormat(&why, "; the hypervisor takes %.0f%%", *t.steal_pct);
  return absl::StrCat("CPU contention: ", absl::StrJoin(who, ", and "), why, " (", Pct(c.share),
                      " of step time)");
}

// Cpu-contention's evidence: the waits, and the CPU use of the job and the host.
void AddContentionEvidence(const TelemetryStats& t, const Contention& c, Finding& f) {
  f.evidence = {{"cpu_wait_share", c.train}};
  AddIf(f, "worker_cpu_wait_cores", t.worker_cpu_wait_cores);
  if (c.loader > 0) f.evidence.emplace_back("loader_wait_share", c.loader);
  AddIf(f, "process_cores", t.process_cores);
  AddIf(f, "worker_cores", t.worker_cores);
  AddIf(f, "child_cores", t.child_cores);
  AddIf(f, "cpus_available", t.cpus_available);
  AddIf(f, "host_cpu_pct", t.host_cpu_pct);
  AddIf(f, "load1", t.load1);
  AddIf(f, "cpu_pressure_pct", t.cpu_pressure_pct);
  AddIf(f, "steal_pct", t.steal_pct);
  AddIf(f, "cpu_throttled_pct", t.cpu_throttled_pct);
}

// Cpu-contention's recommendation, by who takes the CPUs.
void RecommendForContention(const Contention& c, Finding& f) {
  if (c.throttled) {
    f.recommendation =
        "The container's CPU limit (a CFS quota: Kubernetes resources.limits.cpu, Docker --cpus) "
        "stops the job's threads whenever they use up a period's quota, until the next period; "
        "many threads use it up early in the period. Raise the limit (or drop it and keep the "
        "request), or fit the job in it: cap the CPU threads (torch.set_num_threads, "
        "OMP_NUM_THREADS) and DataLoader num_workers so that together they stay within the "
        "limit's CPUs. With Guaranteed QoS and whole CPUs, the static CPU manager gives the "
        "container dedicated cores instead of a quota.";
  } else if (c.self_inflicted) {
    f.recommendation =
        "The job's own threads and processes outnumber its CPUs: cap the CPU threads per process "
        "(torch.set_num_threads, OMP_NUM_THREADS, e.g. cores / processes), keep DataLoader "
        "num_workers at most the cores left over, and don't run CPU work (evaluation, "
        "logging, checkpoint compression) beside training on the same cores.";
  } else {
    f.recommendation =
        "Other processes take the CPUs this job needs: give the job dedicated cores (Slurm "
        "--exclusive or --cpus-per-task; Kubernetes Guaranteed QoS with whole CPUs and the "
        "static CPU manager; taskset or cpusets on a shared host), move other work off the "
        "node, or lower its priority (nice). Adding DataLoader workers only adds to the "
        "contention.";
  }
  if (c.steal) {
    absl::StrAppend(&f.recommendation,
                    " The hypervisor gives this VM's CPUs to other guests: a dedicated or larger "
                    "instance avoids it.");
  }
}

}  // namespace

// CPU contention: the training thread, or the loader's workers, ready to
// run but waiting for a CPU (schedstat's run-queue wait), whoever takes the
// CPUs: a container's CPU limit (its cgroup throttled in at least 5 % of the
// limit's periods: a throttled thread waits on the run queue until the next
// period), other jobs on a shared host, the hypervisor (steal), or the job's
// own threads and processes when they outnumber its CPUs. What it costs:
// the training thread's wait, as a share of wall time, stretches the step
// by as much; the workers' wait, as a share of their time ready to run,
// stretches the loader's cost (input-bound's share) by as much.
void CpuContention(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  if (!s.telemetry.has_value()) return;
  const TelemetryStats& t = *s.telemetry;
  const std::optional<Contention> c = MeasureContention(s, t, o);
  if (!c.has_value()) return;
  Finding f;
  f.id = "cpu-contention";
  f.severity = Grade(c->share, o.cpu_contention_moderate, o.cpu_contention_high);
  f.share = c->share;
  f.title = ContentionTitle(t, o, *c);
  AddContentionEvidence(t, *c, f);
  RecommendForContention(*c, f);
  f.confidence =
      "high: the kernel's run-queue accounting (schedstat) counts the time each thread was ready "
      "to run but had no CPU";
  f.source = "proc";
  out->push_back(std::move(f));
}

// Host-to-device copies the GPU waits for: idle while the host is in "h2d"
// (GPU sources; a copy overlapped with compute leaves no idle), or the h2d
// phase's time (host only, or copies from pageable memory, which block the
// host).
void CopyBound(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  const PhaseStats* h2d = s.FindPhase(PhaseName(Phase::kH2D));
  const double pageable = s.activity.has_value() ? s.activity->pageable_h2d_copies_per_step : 0;
  double share = s.source == Source::kHost ? (h2d != nullptr ? h2d->inclusive_share : 0)
                                           : IdleShare(s, PhaseName(Phase::kH2D));
  // A pageable copy blocks the host until it is done: then the phase's host
  // time is on the critical path even while the copy keeps the GPU busy.
  bool blocking = false;
  if (pageable > 0 && h2d != nullptr && h2d->inclusive_share > share) {
    share = h2d->inclusive_share;
    blocking = true;
  }
  if (share < o.h2d_bound_moderate) return;
  Finding f;
  f.id = "h2d-bound";
  f.severity = Grade(share, o.h2d_bound_moderate, o.h2d_bound_high);
  f.share = share;
  f.title = absl::StrCat("H2D-bound: the GPU waits for host-to-device copies ", Pct(share),
                         " of step time", pageable > 0 ? " (pageable memory)" : "");
  if (h2d != nullptr) {
    f.evidence.emplace_back("h2d_share", h2d->inclusive_share);
    f.evidence.emplace_back("h2d_p50_s", h2d->time.p50);
  }
  if (s.source != Source::kHost) f.evidence.emplace_back("gpu_idle_in_h2d_pct", 100 * share);
  if (s.activity.has_value()) {
    f.evidence.emplace_back("h2d_bytes_per_step", s.activity->h2d_bytes_per_step);
    f.evidence.emplace_back("copies_per_step", s.activity->copies_per_step);
    f.evidence.emplace_back("pageable_h2d_copies_per_step", pageable);
  }
  f.recommendation = absl::StrCat(
      pageable > 0 ? "Copies come from pageable memory, which the driver stages through a pinned "
                     "buffer at a fraction of PCIe speed: set DataLoader pin_memory=True (or "
                     "tensor.pin_memory()). "
                   : "",
      "Copy with .to(device, non_blocking=True) from pinned memory and overlap the next batch's "
      "copy with this step's compute (a side CUDA stream, or a prefetcher); send compact inputs "
      "(uint8 images, then convert and normalize on the GPU).");
  f.confidence =
      s.source == Source::kHost
          ? "medium: host timing of the h2d phase; a GPU source shows whether the copy "
            "overlaps compute"
      : blocking ? "high: CUPTI saw the copies come from pageable memory, which blocks the host "
                   "for the copy's duration"
                 : "high: the GPU was measured idle while the host copied";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Copies the step's compute waits for, seen from the device: time in which
// the GPU only copied memory (device_share_memcpy: copy engines busy, no
// kernel running; CUPTI only). h2d-bound sees the GPU idle while the host
// copies; this sees the copy itself on the critical path, in either
// direction (a per-step .cpu() of a large tensor is as exposed as an input
// batch copied in the foreground). When h2d-bound already fired and most
// bytes go host to device, its share covers this time: not counted twice.
void CopyExposed(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  if (!s.activity.has_value() || !s.activity->device_share_memcpy.has_value()) return;
  const ActivityStats& a = *s.activity;
  const double share = *a.device_share_memcpy;
  if (!(share >= o.copy_exposed_moderate)) return;
  const bool to_host = a.d2h_bytes_per_step > a.h2d_bytes_per_step;
  const bool h2d_found =
      std::any_of(out->begin(), out->end(), [](const Finding& f) { return f.id == "h2d-bound"; });
  if (h2d_found && !to_host) return;
  Finding f;
  f.id = "copy-exposed";
  f.severity = Grade(share, o.copy_exposed_moderate, o.copy_exposed_high);
  f.share = share;
  f.title = absl::StrFormat(
      "Copies not overlapped with compute: the GPU only copied memory %s of step time "
      "(%.0f MB a step host to device, %.0f MB device to host)",
      Pct(share), a.h2d_bytes_per_step / 1e6, a.d2h_bytes_per_step / 1e6);
  f.evidence = {{"device_share_memcpy", share},
                {"h2d_bytes_per_step", a.h2d_bytes_per_step},
                {"d2h_bytes_per_step", a.d2h_bytes_per_step},
                {"copies_per_step", a.copies_per_step},
                {"pageable_copies_per_step", a.pageable_copies_per_step}};
  AddIf(f, "device_share_kernel", a.device_share_kernel);
  f.recommendation = absl::StrCat(
      to_host ? "Most bytes go device to host: don't bring large tensors to the CPU every step "
                "(.cpu(), .numpy(), .tolist(), .item() on big results, metrics computed on the "
                "host); reduce them on the GPU first, log every N steps, or copy with "
                "non_blocking=True into a pinned buffer and read it a step later. "
              : "Most bytes go host to device: copy the next batch while this one computes "
                "(DataLoader pin_memory=True, .to(device, non_blocking=True), a prefetcher on a "
                "side CUDA stream), and send compact inputs (uint8, then convert on the GPU). ",
      a.pageable_copies_per_step > 0
          ? "Some copies use pageable host memory, which cannot overlap anything: pin it. "
          : "",
      "A copy overlaps compute only when it is asynchronous, from or to pinned memory, on a "
      "stream other than the compute's.");
  f.confidence =
      "high: CUPTI measured the device time in which only copies ran (no kernel on the device)";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Synchronizations that drain the GPU's queue: with CUPTI, the GPU idle
// after a sync returned until the host launched again
// (ActivityStats::sync_idle_share) in a loop that blocks on the device every
// step (DiagnoseOptions::sync_min_syncs_per_step), up to the idle no other
// rule explains; otherwise idle in a phase named "sync". Summaries saved
// before sync_idle_share existed use the GPU's waits for the host (HTA's
// host-wait gaps) instead, which also count a host too slow to launch.
void SyncBound(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  double share = s.source == Source::kHost ? 0 : IdleShare(s, PhaseName(Phase::kSync));
  if (s.source == Source::kHost) {
    if (const PhaseStats* sync = s.FindPhase(PhaseName(Phase::kSync)); sync != nullptr)
      share = sync->inclusive_share;
  }
  const double step = MeanStepSeconds(s);
  if (s.activity.has_value() && s.activity->syncs_per_step >= o.sync_min_syncs_per_step &&
      step > 0) {
    // The GPU's waits for the host, but not those other rules explain: the
    // loader (data), copies (h2d), collectives (comm) and launch gaps. What
    // is left is idle inside compute phases, where a sync leaves the queue
    // empty while the host works.
    double unexplained = 0;
    for (const auto& [cause, pct] : s.idle_by_cause) {
      if (cause != PhaseName(Phase::kData) && cause != PhaseName(Phase::kH2D) &&
          cause != PhaseName(Phase::kComm) && cause != kLaunchCauseName) {
        unexplained += pct / 100;
      }
    }
    const double after_sync = s.activity->sync_idle_share.has_value()
                                  ? *s.activity->sync_idle_share
                                  : s.activity->host_wait_time_per_step / step;
    share = std::max(share, std::min(after_sync, unexplained));
  }
  if (share < o.sync_bound_moderate) return;
  Finding f;
  f.id = "sync-bound";
  f.severity = Grade(share, o.sync_bound_moderate, o.sync_bound_high);
  f.share = share;
  f.title =
      absl::StrCat("Sync-bound: the GPU idles ", Pct(share),
                   " of step time after the host blocks on it (.item(), .cpu(), synchronize)");
  if (s.activity.has_value()) {
    f.evidence.emplace_back("syncs_per_step", s.activity->syncs_per_step);
    f.evidence.emplace_back("sync_time_per_step_s", s.activity->sync_time_per_step);
    f.evidence.emplace_back("d2h_bytes_per_step", s.activity->d2h_bytes_per_step);
    f.evidence.emplace_back("host_wait_time_per_step_s", s.activity->host_wait_time_per_step);
    if (s.activity->sync_idle_share.has_value())
      f.evidence.emplace_back("sync_idle_share", *s.activity->sync_idle_share);
  }
  f.evidence.emplace_back("gpu_idle_after_sync_share", share);
  f.recommendation =
      "Each sync empties the GPU's queue, and it idles until the host launches again. Log "
      "less often (call .item() or .cpu() on losses and metrics every N steps, or accumulate "
      "them on the GPU), drop print(tensor) and host-side checks from the step, copy results "
      "back with non_blocking=True into pinned buffers, and find hidden syncs with "
      "torch.cuda.set_sync_debug_mode(\"warn\").";
  f.confidence = s.activity.has_value()
                     ? "high: syncs and the GPU's waits for the host counted per step"
                     : "medium: idle measured while the host was in the sync phase";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Misused scopes make every other number suspect; say so, with the fix.
void Instrumentation(const Summary& s, std::vector<Finding>* out) {
  const MisuseCounts& m = s.misuse;
  if (m.total() == 0) return;
  Finding f;
  f.id = "instrumentation";
  f.severity = Severity::kModerate;
  f.title = absl::StrCat(m.total(), " scope calls could not be recorded as written");
  const std::pair<const char*, int64_t> counters[] = {{"out_of_order_end", m.out_of_order_end},
                                                      {"stale_end", m.stale_end},
                                                      {"nested_step", m.nested_step},
                                                      {"wrong_thread", m.wrong_thread},
                                                      {"too_deep", m.too_deep},
                                                      {"invalid_phase", m.invalid_phase},
                                                      {"dropped_records", m.dropped_records},
                                                      {"incomplete_steps", m.incomplete_steps}};
  for (const auto& [name, n] : counters) {
    if (n > 0) f.evidence.emplace_back(name, static_cast<double>(n));
  }
  std::string advice;
  if (m.nested_step > 0) absl::StrAppend(&advice, "Steps must not nest: end one before the next. ");
  if (m.out_of_order_end + m.stale_end > 0) {
    absl::StrAppend(&advice,
                    "End scopes in reverse order of beginning (use with-blocks or RAII). ");
  }
  if (m.wrong_thread > 0) {
    absl::StrAppend(&advice, "Record each thread in its own Session. ");
  }
  if (m.invalid_phase > 0) {
    absl::StrAppend(&advice,
                    "Use phase names of 1-64 bytes of visible text (no control or invisible "
                    "characters, no leading or trailing space), fewer than Options::max_phases. ");
  }
  if (m.too_deep > 0) absl::StrAppend(&advice, "Keep fewer than 32 scopes open at once. ");
  if (m.dropped_records + m.incomplete_steps > 0) {
    absl::StrAppend(&advice,
                    "Records were dropped: raise Options::queue_capacity or lower "
                    "flush_interval_ms. ");
  }
  if (!advice.empty()) advice.pop_back();
  f.recommendation = advice;
  f.confidence = "high: counted on every scope";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Without a GPU timeline, say what is missing and what would provide it.
void HostOnly(const Summary& s, std::vector<Finding>* out) {
  if (s.source != Source::kHost) return;
  Finding f;
  f.id = "host-only";
  f.severity = Severity::kInfo;
  f.title = "Host timing only: GPU busy and idle time are not measured";
  f.evidence = {{"window_steps", static_cast<double>(s.steps)}};
  f.recommendation = absl::StrCat(
      "Phase times are host wall-clock times. On a machine with an NVIDIA driver, CUDA events "
      "add each phase's device time and a lower bound on GPU idle %, and CUPTI adds exact GPU "
      "idle % charged to its cause (data wait, copies, syncs, launch overhead). Why not here: ",
      s.source_reason);
  f.confidence = "high";
  f.source = "host";
  out->push_back(std::move(f));
}

// With CUDA events only, say that idle is a lower bound and what would make
// it exact.
void EventsOnly(const Summary& s, std::vector<Finding>* out) {
  if (s.source != Source::kEvents) return;
  Finding f;
  f.id = "events-only";
  f.severity = Severity::kInfo;
  f.title = "GPU idle % is a lower bound from CUDA events, not exact from CUPTI";
  f.evidence = {{"gpu_steps", static_cast<double>(s.gpu_steps)}};
  if (s.gpu_idle_pct.has_value()) f.evidence.emplace_back("gpu_idle_pct_at_least", *s.gpu_idle_pct);
  f.recommendation = absl::StrCat(
      "CUPTI activity records give exact GPU busy time, launch gaps, copies and syncs per step. "
      "If another profiler held CUPTI, rerun without it (or release it first); on CUPTI older "
      "than 13.2, ask for it with cupti=True. Why not here: ",
      s.source_reason);
  f.confidence = "high";
  f.source = "events";
  out->push_back(std::move(f));
}

}  // namespace gpuscope::internal
