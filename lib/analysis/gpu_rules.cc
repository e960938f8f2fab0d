// The rules about the GPU and what surrounds it: kernel-launch gaps, FP32
// GEMMs, collectives, clock throttling, the PCIe link, nvidia-smi's
// utilization against busy time, and the healthy GPU-bound verdict. Declared
// in rules.h; Diagnose() runs them.

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/rules.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/phase.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

// Kernel-launch overhead: short idle gaps between kernels (CUPTI).
void LaunchBound(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  const double share = IdleShare(s, kLaunchCauseName);
  if (share < o.launch_bound_moderate) return;
  const bool tiny = s.activity.has_value() && s.activity->kernel_time_p50 > 0 &&
                    s.activity->kernel_time_p50 < o.tiny_kernel_seconds;
  Finding f;
  f.id = "launch-bound";
  f.severity = Grade(share, o.launch_bound_moderate, o.launch_bound_high);
  f.share = share;
  f.title =
      absl::StrCat("Launch-bound: ", Pct(share), " of step time idles in gaps between kernels",
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
      tiny ? absl::StrFormat("and a larger batch (kernels run for under %g us each).",
                             1e6 * o.tiny_kernel_seconds)
           : std::string("and a larger batch."));
  f.confidence = "high: launch gaps measured by CUPTI";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// FP32 GEMMs on CUDA cores where tensor cores would do (kernel names).
void Precision(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  if (!s.activity.has_value()) return;
  const ActivityStats& a = *s.activity;
  const double step = MeanStepSeconds(s);
  // Times of a nanosecond or less (a denormal in a hand-edited file) carry no
  // signal and would divide into nonsense.
  constexpr double kTiny = 1e-9;
  if (!(a.kernel_time_per_step > kTiny) || !(a.gemm_time_per_step > kTiny) ||
      !(a.fp32_gemm_time_per_step > 0) || !std::isfinite(a.kernel_time_per_step) ||
      !std::isfinite(a.gemm_time_per_step) || !std::isfinite(a.fp32_gemm_time_per_step) ||
      a.gemm_time_per_step < o.gemm_share_of_kernels * a.kernel_time_per_step ||
      a.fp32_gemm_time_per_step < o.fp32_gemm_share * a.gemm_time_per_step || !(step > 0)) {
    return;
  }
  const double share = std::min(1.0, a.fp32_gemm_time_per_step / step);
  Finding f;
  f.id = "precision";
  f.severity = share >= o.precision_high ? Severity::kHigh : Severity::kModerate;
  f.share = share;
  f.title = absl::StrCat(
      "FP32 matrix multiplies: ", Pct(a.fp32_gemm_time_per_step / a.gemm_time_per_step),
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

// Collective communication on the critical path: NCCL kernel time no other
// work on its GPU overlapped (it includes waiting for the slowest rank), or
// GPU idle in phase "comm".
void CommBound(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  const double step = MeanStepSeconds(s);
  double share = s.source == Source::kHost ? 0 : IdleShare(s, PhaseName(Phase::kComm));
  const PhaseStats* comm = s.FindPhase(PhaseName(Phase::kComm));
  if (s.source == Source::kHost && comm != nullptr) share = comm->inclusive_share;
  if (s.activity.has_value() && step > 0) {
    share = std::max(share, s.activity->exposed_collective_time_per_step / step);
  }
  share = std::min(share, 1.0);
  // Time in collectives includes the wait for the slowest rank: when the
  // last exchange named a straggler on another rank, that wait is its
  // finding, not communication's.
  const double straggler_wait = StragglerWaitShare(s);
  share = std::max(0.0, share - straggler_wait);
  if (share < o.comm_bound_moderate) return;
  Finding f;
  f.id = "comm-bound";
  f.severity = Grade(share, o.comm_bound_moderate, o.comm_bound_high);
  f.share = share;
  f.title = absl::StrCat("Communication-bound: collectives take ", Pct(share), " of step time",
                         straggler_wait > 0 ? absl::StrCat(" besides ", Pct(straggler_wait),
                                                           " waiting for the straggler")
                                            : std::string());
  if (straggler_wait > 0) f.evidence.emplace_back("straggler_wait_share", straggler_wait);
  if (s.activity.has_value()) {
    f.evidence.emplace_back("exposed_collective_time_per_step_s",
                            s.activity->exposed_collective_time_per_step);
    f.evidence.emplace_back("collective_time_per_step_s", s.activity->collective_time_per_step);
  }
  if (comm != nullptr) f.evidence.emplace_back("comm_share", comm->inclusive_share);
  if (s.source != Source::kHost)
    f.evidence.emplace_back("gpu_idle_in_comm_pct", 100 * IdleShare(s, "comm"));
  f.recommendation =
      "Overlap communication with compute: DDP overlaps gradient all-reduce with backward "
      "(tune bucket_cap_mb, set gradient_as_bucket_view=True), FSDP prefetches (forward_prefetch, "
      "backward_prefetch); communicate less often (gradient accumulation with no_sync()) or less "
      "data (a bf16 compression comm hook). Collective time includes waiting for the slowest "
      "rank: compare step times across ranks for a straggler, and check the NCCL topology "
      "(NCCL_DEBUG=INFO) for traffic falling back from NVLink/InfiniBand to PCIe or sockets.";
  f.confidence = s.activity.has_value()
                     ? "medium: NCCL kernels found by name, their overlap with compute "
                       "measured; their time includes waits for peers"
                     : "medium: time in the comm phase";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Clocks held down by power or thermal caps, or hardware slowdown (NVML).
void Throttling(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  if (!s.telemetry.has_value() || s.telemetry->steps == 0) return;
  const TelemetryStats& t = *s.telemetry;
  if (t.throttled_steps < o.throttled_steps_share) return;
  const bool hardware = HasReason(t, "hw_slowdown") || HasReason(t, "hw_thermal_slowdown") ||
                        HasReason(t, "hw_power_brake_slowdown");
  // How far the caps took the clocks: over the throttled steps only (a mean
  // over every step would dilute it). Unknown clocks count as held down.
  const std::optional<double> capped =
      t.throttled_sm_clock_ratio.has_value() ? t.throttled_sm_clock_ratio : t.sm_clock_ratio;
  const double ratio = capped.value_or(0.0);
  const double busy = s.gpu_idle_pct.has_value() ? 1 - *s.gpu_idle_pct / 100 : 1;
  const bool thermal = HasReason(t, "sw_thermal_slowdown");
  Finding f;
  f.id = "throttling";
  // A power cap at full load is how many datacenter GPUs run: a notice
  // unless it takes the clocks well down.
  f.severity = hardware                                     ? Severity::kHigh
               : thermal || ratio < o.power_cap_clock_ratio ? Severity::kModerate
                                                            : Severity::kInfo;
  f.share = capped.has_value() ? std::clamp(t.throttled_steps * (1 - ratio) * busy, 0.0, 1.0) : 0.0;
  std::string reasons;
  for (const std::string& r : t.clocks_event_reasons) {
    if (r != "gpu_idle" && r != "applications_clocks_setting" && r != "sync_boost") {
      absl::StrAppend(&reasons, reasons.empty() ? "" : ", ", r);
    }
  }
  f.title = absl::StrCat(
      "Throttling: clocks were capped in ", Pct(t.throttled_steps), " of steps (", reasons,
      capped.has_value() ? absl::StrCat("; SM clock at ", Pct(ratio), " of max") : "", ")");
  f.evidence.emplace_back("throttled_steps", t.throttled_steps);
  AddIf(f, "sm_clock_ratio", t.sm_clock_ratio);
  AddIf(f, "throttled_sm_clock_ratio", t.throttled_sm_clock_ratio);
  for (const GpuTelemetry& g : t.gpus) {
    f.evidence.emplace_back(absl::StrCat("gpu", g.index, ".temperature_c"), g.temperature_c);
    f.evidence.emplace_back(absl::StrCat("gpu", g.index, ".power_w"), g.power_w);
    f.evidence.emplace_back(absl::StrCat("gpu", g.index, ".power_limit_w"), g.power_limit_w);
  }
  f.recommendation =
      hardware
          ? "A hardware slowdown (overheating, a power-supply or power-brake event) is a node "
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
void PcieLink(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  if (!s.telemetry.has_value()) return;
  Finding f;
  bool narrow = false, slow = false;
  std::string which;
  for (const GpuTelemetry& g : s.telemetry->gpus) {
    const bool w = g.pcie_width > 0 && g.pcie_width_max > 0 && g.pcie_width < g.pcie_width_max;
    const bool busy =
        !std::isnan(g.utilization_pct) && g.utilization_pct >= o.pcie_busy_utilization_pct;
    const bool gen = busy && g.pcie_gen > 0 && g.pcie_gen_max > 0 && g.pcie_gen < g.pcie_gen_max;
    if (!w && !gen) continue;
    narrow = narrow || w;
    slow = slow || gen;
    absl::StrAppend(&which, which.empty() ? "" : ", ",
                    absl::StrFormat("GPU %d at Gen%d x%d of Gen%d x%d", g.index, g.pcie_gen,
                                    g.pcie_width, g.pcie_gen_max, g.pcie_width_max));
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
  f.share =
      s.source == Source::kHost ? (h2d != nullptr ? h2d->inclusive_share : 0) : IdleShare(s, "h2d");
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

// nvidia-smi's utilization is the share of samples in which any kernel ran:
// high while the GPU is busy a small part of the time.
void UtilizationLies(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  if (!s.telemetry.has_value() || !s.telemetry->gpu_utilization_pct.has_value() ||
      !s.gpu_idle_pct.has_value()) {
    return;
  }
  const double reported = *s.telemetry->gpu_utilization_pct;
  const double busy = 100 - *s.gpu_idle_pct;
  if (reported < o.high_reported_utilization_pct || busy >= o.low_busy_pct) return;
  Finding f;
  f.id = "utilization-lies";
  f.severity = Severity::kInfo;
  f.title = absl::StrFormat(
      "nvidia-smi reports %.0f%% GPU utilization, but the GPU was busy %.0f%% of step time",
      reported, busy);
  f.evidence = {{"nvidia_smi_utilization_pct", reported}, {"gpu_busy_pct", busy}};
  f.recommendation =
      "nvidia-smi's utilization counts a sample as busy when any kernel ran in it, however "
      "small. Judge the GPU by its busy time here, and by the findings above.";
  f.confidence = s.source == Source::kCupti
                     ? "high: busy time from CUPTI activity"
                     : "high: busy time here is an upper bound (CUDA events)";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Healthy: the GPU is busy and nothing else explains much.
void GpuBound(const Summary& s, const DiagnoseOptions& o, const std::vector<Finding>& found,
              std::vector<Finding>* out) {
  // Exact idle only: CUDA events give a lower bound, which cannot show the
  // GPU busy.
  if (s.source != Source::kCupti || !s.gpu_idle_pct.has_value() ||
      *s.gpu_idle_pct >= o.gpu_bound_idle_pct)
    return;
  for (const Finding& f : found) {
    if (f.severity != Severity::kInfo) return;
  }
  Finding f;
  f.id = "gpu-bound";
  f.severity = Severity::kInfo;
  f.title = absl::StrFormat(
      "GPU-bound: the GPU is busy %.0f%% of step time; the input, copies and "
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

}  // namespace gpuscope::internal
