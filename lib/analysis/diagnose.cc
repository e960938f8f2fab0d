#include "gpuscope/diagnose.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpuscope/phase.h"
#include "base/json.h"
#include "base/strings.h"

namespace gpuscope {
namespace {

std::string Pct(double fraction) {
  return std::isfinite(fraction) ? absl::StrFormat("%.0f%%", 100 * fraction) : std::string("?%");
}

double MeanStepSeconds(const Summary& s) { return s.steps > 0 ? s.window_time / static_cast<double>(s.steps) : 0; }

// GPU idle while the host was in `cause`, as a fraction of step time (0
// when not measured).
double IdleShare(const Summary& s, std::string_view cause) {
  const auto it = s.idle_by_cause.find(std::string(cause));
  return it != s.idle_by_cause.end() ? it->second / 100 : 0;
}

Severity Grade(double share, double moderate, double high) {
  return share >= high ? Severity::kHigh : share >= moderate ? Severity::kModerate : Severity::kInfo;
}

void AddIf(Finding& f, const char* name, const std::optional<double>& v) {
  if (v.has_value()) f.evidence.emplace_back(name, *v);
}

bool HasReason(const TelemetryStats& t, std::string_view reason) {
  return std::find(t.clocks_event_reasons.begin(), t.clocks_event_reasons.end(), reason) !=
         t.clocks_event_reasons.end();
}

// The input pipeline: time in phase "data" (steps() puts next(loader) there),
// told apart by telemetry as CPU-bound (the process and its workers use the
// CPUs they may, or the host's CPUs are saturated) or storage-bound (iowait
// while the CPUs idle).
void InputBound(const Summary& s, std::vector<Finding>* out) {
  const PhaseStats* data = s.FindPhase(PhaseName(Phase::kData));
  if (data == nullptr || data->steps == 0) return;
  // With a GPU source, what the loader costs is the GPU's idle time while
  // the host waits for it: a loader hidden behind the GPU's backlog costs
  // nothing. Host time only without one.
  const bool measured = s.source != Source::kHost && s.gpu_steps > 0;
  const double share = measured ? IdleShare(s, data->name) : data->inclusive_share;
  if (share < kInputBoundModerate) return;
  enum class Cause { kUnknown, kCpu, kStorage } cause = Cause::kUnknown;
  double cores_used = 0;
  if (s.telemetry.has_value()) {
    const TelemetryStats& t = *s.telemetry;
    cores_used = t.process_cores.value_or(0) + t.worker_cores.value_or(0);
    const bool cores_saturated = (t.process_cores.has_value() || t.worker_cores.has_value()) &&
                                 t.cpus_available.has_value() && *t.cpus_available > 0 &&
                                 cores_used >= kCpuSaturatedShare * *t.cpus_available;
    const bool host_saturated = t.host_cpu_pct.has_value() && *t.host_cpu_pct >= kCpuSaturatedPct;
    const bool waiting_on_io = t.host_iowait_pct.has_value() && *t.host_iowait_pct >= kStorageIowaitPct &&
                               t.host_cpu_pct.has_value() && *t.host_cpu_pct < kStorageCpuPct;
    if (cores_saturated || host_saturated) {
      cause = Cause::kCpu;
    } else if (waiting_on_io) {
      cause = Cause::kStorage;
    }
  }
  Finding f;
  f.severity = Grade(share, kInputBoundModerate, kInputBoundHigh);
  f.share = share;
  const std::string wait =
      measured ? absl::StrCat("the GPU idles ", Pct(share), " of step time waiting for the next batch")
               : absl::StrCat(Pct(share), " of step time is spent waiting for the next batch");
  f.evidence = {{"data_share", data->inclusive_share},
                {"data_p50_s", data->time.p50},
                {"data_p95_s", data->time.p95},
                {"step_p50_s", s.step_time.p50}};
  if (s.samples_per_second.has_value()) f.evidence.emplace_back("samples_per_second", *s.samples_per_second);
  if (const auto idle = s.idle_by_cause.find(data->name); idle != s.idle_by_cause.end()) {
    f.evidence.emplace_back("gpu_idle_in_data_pct", idle->second);
  }
  if (s.telemetry.has_value()) {
    AddIf(f, "host_cpu_pct", s.telemetry->host_cpu_pct);
    AddIf(f, "host_iowait_pct", s.telemetry->host_iowait_pct);
    AddIf(f, "process_cores", s.telemetry->process_cores);
    AddIf(f, "worker_cores", s.telemetry->worker_cores);
    AddIf(f, "cpus_available", s.telemetry->cpus_available);
  }
  switch (cause) {
    case Cause::kCpu:
      f.id = "input-bound.cpu";
      f.title = absl::StrCat("Input-bound on CPU: ", wait, ", with the CPUs saturated");
      f.recommendation =
          "The loader's CPUs are the limit: more num_workers will not help past the CPUs available. "
          "Make preprocessing cheaper (pre-resize or pre-decode the dataset offline, decode at lower "
          "resolution), move augmentation to the GPU (torchvision.transforms.v2 on CUDA tensors, "
          "NVIDIA DALI), keep pin_memory=True and persistent_workers=True, or get more CPU cores "
          "(a container CPU limit may be the cap).";
      break;
    case Cause::kStorage:
      f.id = "input-bound.storage";
      f.title = absl::StrCat("Input-bound on storage: ", wait, ", with the CPUs idle in iowait");
      f.recommendation =
          "The loader waits on reads: cache or copy the dataset to local NVMe or RAM, store it in "
          "large sequential shards (WebDataset, TFRecord, FFCV) instead of many small files, and "
          "keep more reads in flight (raise num_workers and prefetch_factor, "
          "persistent_workers=True).";
      break;
    case Cause::kUnknown:
      f.id = "input-bound";
      f.title = absl::StrCat("Input-bound: ", wait);
      f.recommendation =
          "Feed the GPU faster: raise DataLoader num_workers (up to one per spare CPU core), set "
          "pin_memory=True and persistent_workers=True, raise prefetch_factor, and move decoding "
          "and augmentation out of the training process. If the workers already saturate the "
          "CPUs, make preprocessing cheaper (or do it on the GPU); if the CPUs sit idle while "
          "iowait is high, the storage is the bottleneck: cache, shard or prefetch the dataset "
          "to local disk.";
      break;
  }
  if (!measured) {
    f.confidence =
        "medium: host timing only; if the loop waits for the GPU inside the data phase (a "
        "synchronizing copy, say), that wait counts as data time. A GPU source separates them.";
  } else if (s.source == Source::kCupti) {
    f.confidence = "high: the GPU was measured idle while the host waited for data";
  } else {
    f.confidence = "high: the GPU was idle at least this long while the host waited for data "
                   "(CUDA events give a lower bound)";
  }
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Host-to-device copies the GPU waits for: idle while the host is in "h2d"
// (GPU sources; a copy overlapped with compute leaves no idle), or the h2d
// phase's time (host only, or copies from pageable memory, which block the
// host).
void CopyBound(const Summary& s, std::vector<Finding>* out) {
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
  if (share < kCopyBoundModerate) return;
  Finding f;
  f.id = "h2d-bound";
  f.severity = Grade(share, kCopyBoundModerate, kCopyBoundHigh);
  f.share = share;
  f.title = absl::StrCat("H2D-bound: the GPU waits for host-to-device copies ", Pct(share), " of step time",
                         pageable > 0 ? " (pageable memory)" : "");
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
  f.confidence = s.source == Source::kHost
                     ? "medium: host timing of the h2d phase; a GPU source shows whether the copy "
                       "overlaps compute"
                     : blocking ? "high: CUPTI saw the copies come from pageable memory, which blocks the host "
                                  "for the copy's duration"
                                : "high: the GPU was measured idle while the host copied";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Synchronizations that drain the GPU's queue: with CUPTI, the GPU waiting
// for the host (HTA's host-wait gaps) in a loop that blocks on the device
// every step, up to the idle no other rule explains; otherwise idle in a
// phase named "sync".
void SyncBound(const Summary& s, std::vector<Finding>* out) {
  double share = s.source == Source::kHost ? 0 : IdleShare(s, PhaseName(Phase::kSync));
  if (s.source == Source::kHost) {
    if (const PhaseStats* sync = s.FindPhase(PhaseName(Phase::kSync)); sync != nullptr) share = sync->inclusive_share;
  }
  const double step = MeanStepSeconds(s);
  if (s.activity.has_value() && s.activity->syncs_per_step >= 1 && step > 0) {
    // The GPU's waits for the host, but not those other rules explain: the
    // loader (data), copies (h2d), collectives (comm) and launch gaps. What
    // is left is idle inside compute phases, where a sync leaves the queue
    // empty while the host works.
    double unexplained = 0;
    for (const auto& [cause, pct] : s.idle_by_cause) {
      if (cause != PhaseName(Phase::kData) && cause != PhaseName(Phase::kH2D) && cause != PhaseName(Phase::kComm) &&
          cause != kLaunchCauseName) {
        unexplained += pct / 100;
      }
    }
    share = std::max(share, std::min(s.activity->host_wait_time_per_step / step, unexplained));
  }
  if (share < kSyncBoundModerate) return;
  Finding f;
  f.id = "sync-bound";
  f.severity = Grade(share, kSyncBoundModerate, kSyncBoundHigh);
  f.share = share;
  f.title = absl::StrCat("Sync-bound: the GPU idles ", Pct(share),
                         " of step time after the host blocks on it (.item(), .cpu(), synchronize)");
  if (s.activity.has_value()) {
    f.evidence.emplace_back("syncs_per_step", s.activity->syncs_per_step);
    f.evidence.emplace_back("sync_time_per_step_s", s.activity->sync_time_per_step);
    f.evidence.emplace_back("d2h_bytes_per_step", s.activity->d2h_bytes_per_step);
    f.evidence.emplace_back("host_wait_time_per_step_s", s.activity->host_wait_time_per_step);
  }
  f.evidence.emplace_back("gpu_idle_after_sync_share", share);
  f.recommendation =
      "Each sync empties the GPU's queue, and it idles until the host launches again. Log "
      "less often (call .item() or .cpu() on losses and metrics every N steps, or accumulate "
      "them on the GPU), drop print(tensor) and host-side checks from the step, copy results "
      "back with non_blocking=True into pinned buffers, and find hidden syncs with "
      "torch.cuda.set_sync_debug_mode(\"warn\").";
  f.confidence = s.activity.has_value() ? "high: syncs and the GPU's waits for the host counted per step"
                                        : "medium: idle measured while the host was in the sync phase";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Kernel-launch overhead: short idle gaps between kernels (CUPTI).
void LaunchBound(const Summary& s, std::vector<Finding>* out) {
  const double share = IdleShare(s, kLaunchCauseName);
  if (share < kLaunchBoundModerate) return;
  const bool tiny = s.activity.has_value() && s.activity->kernel_time_p50 > 0 &&
                    s.activity->kernel_time_p50 < kTinyKernelSeconds;
  Finding f;
  f.id = "launch-bound";
  f.severity = Grade(share, kLaunchBoundModerate, kLaunchBoundHigh);
  f.share = share;
  f.title = absl::StrCat("Launch-bound: ", Pct(share), " of step time idles in gaps between kernels",
                         tiny ? " (many tiny kernels: the batch may be too small)" : "");
  f.evidence.emplace_back("launch_gap_share", share);
  if (s.activity.has_value()) {
    f.evidence.emplace_back("kernels_per_step", s.activity->kernels_per_step);
    f.evidence.emplace_back("kernel_time_p50_s", s.activity->kernel_time_p50);
    f.evidence.emplace_back("host_wait_gaps_per_step", s.activity->host_wait_gaps_per_step);
  }
  f.recommendation = absl::StrCat(
      "The host cannot launch kernels as fast as the GPU runs them. Launch fewer, larger "
      "kernels: torch.compile (fuses elementwise ops), CUDA graphs (torch.compile(mode="
      "\"reduce-overhead\") or torch.cuda.CUDAGraph), fused optimizers (fused=True or "
      "foreach=True), ",
      tiny ? "and a larger batch (kernels run for under 20 us each)." : "and a larger batch.");
  f.confidence = "high: launch gaps measured by CUPTI";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// FP32 GEMMs on CUDA cores where tensor cores would do (kernel names).
void Precision(const Summary& s, std::vector<Finding>* out) {
  if (!s.activity.has_value()) return;
  const ActivityStats& a = *s.activity;
  const double step = MeanStepSeconds(s);
  // Times of a nanosecond or less (a denormal in a hand-edited file) carry no
  // signal and would divide into nonsense.
  constexpr double kTiny = 1e-9;
  if (!(a.kernel_time_per_step > kTiny) || !(a.gemm_time_per_step > kTiny) ||
      !(a.fp32_gemm_time_per_step > 0) || !std::isfinite(a.kernel_time_per_step) ||
      !std::isfinite(a.gemm_time_per_step) || !std::isfinite(a.fp32_gemm_time_per_step) ||
      a.gemm_time_per_step < kGemmShareOfKernels * a.kernel_time_per_step ||
      a.fp32_gemm_time_per_step < kFp32GemmShare * a.gemm_time_per_step || !(step > 0)) {
    return;
  }
  const double share = std::min(1.0, a.fp32_gemm_time_per_step / step);
  Finding f;
  f.id = "precision";
  f.severity = share >= 0.20 ? Severity::kHigh : Severity::kModerate;
  f.share = share;
  f.title = absl::StrCat("FP32 matrix multiplies: ", Pct(a.fp32_gemm_time_per_step / a.gemm_time_per_step),
                         " of GEMM time runs without tensor cores (", Pct(share), " of step time)");
  f.evidence = {{"fp32_gemm_time_per_step_s", a.fp32_gemm_time_per_step},
                {"gemm_time_per_step_s", a.gemm_time_per_step},
                {"kernel_time_per_step_s", a.kernel_time_per_step},
                {"fp32_gemm_share_of_gemm", a.fp32_gemm_time_per_step / a.gemm_time_per_step}};
  f.recommendation =
      "Use tensor cores: train in bf16 with torch.autocast(\"cuda\", dtype=torch.bfloat16), or at "
      "least allow TF32 (torch.set_float32_matmul_precision(\"high\"), or "
      "torch.backends.cuda.matmul.allow_tf32 = True); GEMMs typically run several times faster.";
  f.confidence = "medium: GEMM precision is read from kernel names (cuBLAS, CUTLASS patterns)";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Clocks held down by power or thermal caps, or hardware slowdown (NVML).
void Throttling(const Summary& s, std::vector<Finding>* out) {
  if (!s.telemetry.has_value() || s.telemetry->steps == 0) return;
  const TelemetryStats& t = *s.telemetry;
  if (t.throttled_steps < kThrottledStepsShare) return;
  const bool hardware = HasReason(t, "hw_slowdown") || HasReason(t, "hw_thermal_slowdown") ||
                        HasReason(t, "hw_power_brake_slowdown");
  // How far the caps took the clocks: over the throttled steps only (a mean
  // over every step would dilute it). Unknown clocks count as held down.
  const std::optional<double> capped = t.throttled_sm_clock_ratio.has_value() ? t.throttled_sm_clock_ratio
                                                                              : t.sm_clock_ratio;
  const double ratio = capped.value_or(0.0);
  const double busy = s.gpu_idle_pct.has_value() ? 1 - *s.gpu_idle_pct / 100 : 1;
  const bool thermal = HasReason(t, "sw_thermal_slowdown");
  Finding f;
  f.id = "throttling";
  // A power cap at full load is how many datacenter GPUs run: a notice
  // unless it takes the clocks well down.
  f.severity = hardware                                   ? Severity::kHigh
               : thermal || ratio < kPowerCapClockRatio   ? Severity::kModerate
                                                          : Severity::kInfo;
  f.share = capped.has_value() ? std::clamp(t.throttled_steps * (1 - ratio) * busy, 0.0, 1.0) : 0.0;
  std::string reasons;
  for (const std::string& r : t.clocks_event_reasons) {
    if (r != "gpu_idle" && r != "applications_clocks_setting" && r != "sync_boost") {
      absl::StrAppend(&reasons, reasons.empty() ? "" : ", ", r);
    }
  }
  f.title = absl::StrCat("Throttling: clocks were capped in ", Pct(t.throttled_steps), " of steps (", reasons,
                         capped.has_value() ? absl::StrCat("; SM clock at ", Pct(ratio), " of max") : "",
                         ")");
  f.evidence.emplace_back("throttled_steps", t.throttled_steps);
  AddIf(f, "sm_clock_ratio", t.sm_clock_ratio);
  AddIf(f, "throttled_sm_clock_ratio", t.throttled_sm_clock_ratio);
  for (const GpuTelemetry& g : t.gpus) {
    f.evidence.emplace_back(absl::StrCat("gpu", g.index, ".temperature_c"), g.temperature_c);
    f.evidence.emplace_back(absl::StrCat("gpu", g.index, ".power_w"), g.power_w);
    f.evidence.emplace_back(absl::StrCat("gpu", g.index, ".power_limit_w"), g.power_limit_w);
  }
  f.recommendation =
      hardware ? "A hardware slowdown (overheating, a power-supply or power-brake event) is a node "
                 "fault: check cooling and power with nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER, "
                 "run gpuscope doctor, and move the job or drain the node."
               : "The GPU runs into its power or thermal limit: check airflow and inlet temperature, "
                 "whether the power limit was lowered (nvidia-smi -q -d POWER), and whether other work "
                 "shares the GPU; the cap is expected at full load on some parts.";
  f.confidence = "high: NVML's clocks-event reasons, sampled during the steps";
  f.source = "nvml";
  out->push_back(std::move(f));
}

// A PCIe link trained below its maximum (NVML, at the window's last sample).
// Width does not change with load; generation drops at idle, so it counts
// only on a GPU nvidia-smi shows busy.
void PcieLink(const Summary& s, std::vector<Finding>* out) {
  if (!s.telemetry.has_value()) return;
  Finding f;
  bool narrow = false, slow = false;
  std::string which;
  for (const GpuTelemetry& g : s.telemetry->gpus) {
    const bool w = g.pcie_width > 0 && g.pcie_width_max > 0 && g.pcie_width < g.pcie_width_max;
    const bool busy = !std::isnan(g.utilization_pct) && g.utilization_pct >= 50;
    const bool gen = busy && g.pcie_gen > 0 && g.pcie_gen_max > 0 && g.pcie_gen < g.pcie_gen_max;
    if (!w && !gen) continue;
    narrow = narrow || w;
    slow = slow || gen;
    absl::StrAppend(&which, which.empty() ? "" : ", ",
                    absl::StrFormat("GPU %d at Gen%d x%d of Gen%d x%d", g.index, g.pcie_gen, g.pcie_width,
                                    g.pcie_gen_max, g.pcie_width_max));
    const std::string k = absl::StrCat("gpu", g.index, ".");
    f.evidence.emplace_back(k + "pcie_gen", g.pcie_gen);
    f.evidence.emplace_back(k + "pcie_gen_max", g.pcie_gen_max);
    f.evidence.emplace_back(k + "pcie_width", g.pcie_width);
    f.evidence.emplace_back(k + "pcie_width_max", g.pcie_width_max);
  }
  if (!narrow && !slow) return;
  const PhaseStats* h2d = s.FindPhase(PhaseName(Phase::kH2D));
  f.id = "pcie-link";
  f.severity = narrow ? Severity::kHigh : Severity::kModerate;
  // The step time it can explain: the copies the GPU waits for.
  f.share = s.source == Source::kHost ? (h2d != nullptr ? h2d->inclusive_share : 0) : IdleShare(s, "h2d");
  f.title = absl::StrCat("PCIe link below its maximum: ", which);
  f.recommendation =
      "Host-device copies run at a fraction of their speed. Compare LnkSta with LnkCap in "
      "lspci -vv and nvidia-smi -q -d PCI; reseat the card or its riser, check BIOS PCIe "
      "settings, or move the job to a healthy node (gpuscope doctor --baseline catches this at "
      "job start).";
  f.confidence = narrow ? "high: the link width does not change with load"
                        : "medium: the link generation drops at idle; it was below maximum while "
                          "the GPU was busy";
  f.source = "nvml";
  out->push_back(std::move(f));
}

// Collective communication on the critical path: NCCL kernel time no other
// work on its GPU overlapped (it includes waiting for the slowest rank), or
// GPU idle in phase "comm".
void CommBound(const Summary& s, std::vector<Finding>* out) {
  const double step = MeanStepSeconds(s);
  double share = s.source == Source::kHost ? 0 : IdleShare(s, PhaseName(Phase::kComm));
  const PhaseStats* comm = s.FindPhase(PhaseName(Phase::kComm));
  if (s.source == Source::kHost && comm != nullptr) share = comm->inclusive_share;
  if (s.activity.has_value() && step > 0) {
    share = std::max(share, s.activity->exposed_collective_time_per_step / step);
  }
  share = std::min(share, 1.0);
  if (share < kCommBoundModerate) return;
  Finding f;
  f.id = "comm-bound";
  f.severity = Grade(share, kCommBoundModerate, kCommBoundHigh);
  f.share = share;
  f.title = absl::StrCat("Communication-bound: collectives take ", Pct(share), " of step time");
  if (s.activity.has_value()) {
    f.evidence.emplace_back("exposed_collective_time_per_step_s", s.activity->exposed_collective_time_per_step);
    f.evidence.emplace_back("collective_time_per_step_s", s.activity->collective_time_per_step);
  }
  if (comm != nullptr) f.evidence.emplace_back("comm_share", comm->inclusive_share);
  if (s.source != Source::kHost) f.evidence.emplace_back("gpu_idle_in_comm_pct", 100 * IdleShare(s, "comm"));
  f.recommendation =
      "Overlap communication with compute: DDP overlaps gradient all-reduce with backward "
      "(tune bucket_cap_mb, set gradient_as_bucket_view=True), FSDP prefetches (forward_prefetch, "
      "backward_prefetch); communicate less often (gradient accumulation with no_sync()) or less "
      "data (a bf16 compression comm hook). Collective time includes waiting for the slowest "
      "rank: compare step times across ranks for a straggler, and check the NCCL topology "
      "(NCCL_DEBUG=INFO) for traffic falling back from NVLink/InfiniBand to PCIe or sockets.";
  f.confidence = s.activity.has_value() ? "medium: NCCL kernels found by name, their overlap with compute "
                                          "measured; their time includes waits for peers"
                                        : "medium: time in the comm phase";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// nvidia-smi's utilization is the share of samples in which any kernel ran:
// high while the GPU is busy a small part of the time.
void UtilizationLies(const Summary& s, std::vector<Finding>* out) {
  if (!s.telemetry.has_value() || !s.telemetry->gpu_utilization_pct.has_value() || !s.gpu_idle_pct.has_value()) {
    return;
  }
  const double reported = *s.telemetry->gpu_utilization_pct;
  const double busy = 100 - *s.gpu_idle_pct;
  if (reported < kHighReportedUtilizationPct || busy >= kLowBusyPct) return;
  Finding f;
  f.id = "utilization-lies";
  f.severity = Severity::kInfo;
  f.title = absl::StrFormat("nvidia-smi reports %.0f%% GPU utilization, but the GPU was busy %.0f%% of step time",
                            reported, busy);
  f.evidence = {{"nvidia_smi_utilization_pct", reported}, {"gpu_busy_pct", busy}};
  f.recommendation =
      "nvidia-smi's utilization counts a sample as busy when any kernel ran in it, however "
      "small. Judge the GPU by its busy time here, and by the findings above.";
  f.confidence = s.source == Source::kCupti ? "high: busy time from CUPTI activity"
                                            : "high: busy time here is an upper bound (CUDA events)";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Healthy: the GPU is busy and nothing else explains much.
void GpuBound(const Summary& s, const std::vector<Finding>& found, std::vector<Finding>* out) {
  // Exact idle only: CUDA events give a lower bound, which cannot show the
  // GPU busy.
  if (s.source != Source::kCupti || !s.gpu_idle_pct.has_value() || *s.gpu_idle_pct >= kGpuBoundIdlePct) return;
  for (const Finding& f : found) {
    if (f.severity != Severity::kInfo) return;
  }
  Finding f;
  f.id = "gpu-bound";
  f.severity = Severity::kInfo;
  f.title = absl::StrFormat("GPU-bound: the GPU is busy %.0f%% of step time; the input, copies and "
                            "launches keep up",
                            100 - *s.gpu_idle_pct);
  f.evidence = {{"gpu_idle_pct", *s.gpu_idle_pct}, {"step_p50_s", s.step_time.p50}};
  f.recommendation =
      "Healthy. Further speed comes from the GPU work itself: bf16 autocast or TF32, "
      "torch.compile, fused kernels (FlashAttention), or a larger batch if memory allows.";
  f.confidence = "high: busy time from CUPTI activity";
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
  const std::pair<const char*, int64_t> counters[] = {
      {"out_of_order_end", m.out_of_order_end}, {"stale_end", m.stale_end},
      {"nested_step", m.nested_step},           {"wrong_thread", m.wrong_thread},
      {"too_deep", m.too_deep},                 {"invalid_phase", m.invalid_phase},
      {"dropped_records", m.dropped_records},   {"incomplete_steps", m.incomplete_steps}};
  for (const auto& [name, n] : counters) {
    if (n > 0) f.evidence.emplace_back(name, static_cast<double>(n));
  }
  std::string advice;
  if (m.nested_step > 0) absl::StrAppend(&advice, "Steps must not nest: end one before the next. ");
  if (m.out_of_order_end + m.stale_end > 0) {
    absl::StrAppend(&advice, "End scopes in reverse order of beginning (use with-blocks or RAII). ");
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

}  // namespace

std::string_view SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kModerate: return "moderate";
    case Severity::kHigh: return "high";
  }
  return "info";
}

std::vector<Finding> Diagnose(const Summary& summary) {
  std::vector<Finding> findings;
  if (summary.steps > 0) {
    InputBound(summary, &findings);
    CopyBound(summary, &findings);
    SyncBound(summary, &findings);
    LaunchBound(summary, &findings);
    Precision(summary, &findings);
    CommBound(summary, &findings);
    Throttling(summary, &findings);
    PcieLink(summary, &findings);
    UtilizationLies(summary, &findings);
    GpuBound(summary, findings, &findings);
  }
  Instrumentation(summary, &findings);
  HostOnly(summary, &findings);
  EventsOnly(summary, &findings);
  // Whatever a summary holds (a hand-edited file, a bug), findings carry
  // numbers: a share in [0, 1] and finite evidence, so that ranking, JSON and
  // every reader can rely on them.
  for (Finding& f : findings) {
    f.share = std::isfinite(f.share) ? std::clamp(f.share, 0.0, 1.0) : 0.0;
    std::erase_if(f.evidence, [](const auto& e) { return !std::isfinite(e.second); });
  }
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    return std::tie(b.share, b.severity) < std::tie(a.share, a.severity);
  });
  return findings;
}

std::string FindingsToJson(const std::vector<Finding>& findings) {
  internal::JsonWriter w(/*indent=*/2);
  w.BeginArray();
  for (const Finding& f : findings) {
    w.BeginObject();
    w.Key("id"); w.String(f.id);
    w.Key("title"); w.String(f.title);
    w.Key("severity"); w.String(SeverityName(f.severity));
    w.Key("share"); w.Number(f.share);
    w.Key("evidence");
    w.BeginObject();
    for (const auto& [name, value] : f.evidence) {
      w.Key(name);
      w.Number(value);
    }
    w.EndObject();
    w.Key("recommendation"); w.String(f.recommendation);
    w.Key("confidence"); w.String(f.confidence);
    w.Key("source"); w.String(f.source);
    w.EndObject();
  }
  w.EndArray();
  return w.Take();
}

}  // namespace gpuscope
