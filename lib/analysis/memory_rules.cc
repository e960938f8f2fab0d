// The rules about this process's GPU memory (Summary::memory, from its
// allocator's numbers): allocation retries (memory-thrash), memory nearly
// full or fragmented (memory-pressure), room for a larger batch
// (batch-headroom), and the out-of-memory error that ended a step (oom).
// Declared in rules.h; Diagnose() runs them. docs/diagnosis.md gives the
// thresholds' origins.

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/rules.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string GiB(double bytes) {
  return std::isfinite(bytes) ? absl::StrFormat("%.1f GiB", bytes / kGiB) : std::string("?");
}

// The GPU with the largest peak allocation (null: none has one).
const GpuMemory* Fullest(const MemoryStats& m) {
  const GpuMemory* top = nullptr;
  for (const GpuMemory& g : m.gpus) {
    if (!(g.peak_allocated_bytes >= 0)) continue;
    if (top == nullptr || g.peak_allocated_bytes > top->peak_allocated_bytes) top = &g;
  }
  return top;
}

// What this process held of the GPU at its peak, bytes: the allocator's
// peak reservation, or NVML's use of the process (the CUDA context too)
// where that is larger. NaN when neither is known.
double PeakUsed(const GpuMemory& g) {
  if (std::isnan(g.peak_reserved_bytes)) return g.process_used_bytes;
  if (g.process_used_bytes > g.peak_reserved_bytes) return g.process_used_bytes;
  return g.peak_reserved_bytes;
}

// " in phase \"forward\"", or "" when no phase was open at the peak.
std::string InPhase(const std::string& phase) {
  return phase.empty() ? std::string() : absl::StrCat(" in phase \"", phase, "\"");
}

}  // namespace

// The allocator freed its cache and retried cudaMalloc: each retry is a
// device-wide synchronization and a round of cudaFree calls.
void MemoryThrash(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  if (!s.memory.has_value()) return;
  // Retries add up over GPUs; their steps and cost are the worst GPU's (a
  // step in which two GPUs retried is one step, and its time counts once).
  int64_t retries = 0, steps = 0;
  double time = 0;
  for (const GpuMemory& g : s.memory->gpus) {
    retries += g.alloc_retries;
    if (g.retry_time > time || (g.retry_time == time && g.retry_steps > steps)) {
      time = g.retry_time;
      steps = g.retry_steps;
    }
  }
  if (retries == 0) return;
  const double share = s.window_time > 0 ? std::min(1.0, time / s.window_time) : 0;
  Finding f;
  f.id = "memory-thrash";
  f.severity = share >= o.memory_thrash_high ? Severity::kHigh : Severity::kModerate;
  f.share = share;
  f.title = absl::StrCat(retries, " GPU memory allocation retr", retries == 1 ? "y" : "ies", " in ",
                         steps, " step", steps == 1 ? "" : "s",
                         ": the allocator emptied its cache to find room (", Pct(share),
                         " of step time)");
  f.evidence = {{"alloc_retries", static_cast<double>(retries)},
                {"retry_steps", static_cast<double>(steps)},
                {"retry_time_s", time},
                {"retry_share", share}};
  if (const GpuMemory* g = Fullest(*s.memory); g != nullptr) {
    f.evidence.emplace_back("peak_reserved_bytes", g->peak_reserved_bytes);
    f.evidence.emplace_back("total_bytes", g->total_bytes);
    f.evidence.emplace_back("fragmentation", g->fragmentation);
  }
  f.recommendation =
      "The caching allocator could not find a free block, released every cached one and called "
      "cudaMalloc again: each retry synchronizes the GPU and costs milliseconds, silently. Set "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow in place instead of "
      "fragmenting), use a smaller batch (with gradient accumulation to keep the effective one), "
      "keep fewer activations alive (activation checkpointing, no references to intermediate "
      "tensors across steps), and remove torch.cuda.empty_cache() calls from the loop (each one "
      "makes the next steps reserve their memory again).";
  f.confidence =
      "high that retries happened (the allocator's own num_alloc_retries rose); medium for their "
      "cost: the time those steps took over the median step, which other work in them adds to";
  f.source = "allocator";
  out->push_back(std::move(f));
}

// The peak within a few percent of the GPU's memory, or much of the
// allocator's reservation unusable: the next longer batch runs out.
void MemoryPressure(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  if (!s.memory.has_value()) return;
  const GpuMemory* g = Fullest(*s.memory);
  if (g == nullptr || !(g->total_bytes > 0)) return;
  const double used = PeakUsed(*g) / g->total_bytes;
  const double reserved = g->peak_reserved_bytes / g->total_bytes;
  const bool full = used >= o.memory_pressure_share;
  const bool fragmented =
      g->fragmentation >= o.memory_fragmentation && reserved >= o.memory_usable_share;
  if (!full && !fragmented) return;
  Finding f;
  f.id = "memory-pressure";
  f.severity = Severity::kModerate;
  f.title =
      full ? absl::StrCat("GPU ", g->device, " memory nearly full: peak ", GiB(PeakUsed(*g)),
                          " of ", GiB(g->total_bytes), " (", Pct(used), ")", InPhase(g->peak_phase))
           : absl::StrCat("GPU ", g->device, " memory fragmented: ", Pct(g->fragmentation),
                          " of the allocator's ", GiB(g->peak_reserved_bytes),
                          " unused even at the peak");
  f.evidence = {{"peak_used_share", used},
                {"peak_allocated_bytes", g->peak_allocated_bytes},
                {"peak_reserved_bytes", g->peak_reserved_bytes},
                {"total_bytes", g->total_bytes},
                {"fragmentation", g->fragmentation},
                {"peak_step", static_cast<double>(g->peak_step)}};
  f.recommendation = absl::StrCat(
      "A longer sequence or a larger batch than this window's runs out of memory. Set "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (less memory lost to fragmentation), "
      "recompute activations instead of keeping them (activation checkpointing, "
      "torch.utils.checkpoint)",
      g->peak_phase.empty() ? ""
                            : absl::StrCat(" where the peak is, phase \"", g->peak_phase, "\""),
      ", and use smaller micro-batches with gradient accumulation to keep the effective batch.");
  f.confidence = g->peak_exact ? "high: the allocator's own high-water mark"
                               : "medium: the peak is the highest sample, so the true peak may be "
                                 "higher still";
  f.source = "allocator";
  out->push_back(std::move(f));
}

// The peak is a small share of the GPU's memory: a batch N times larger
// would fit, assuming activations scale with the batch and what stays
// allocated between steps (weights, gradients, optimizer state) does not.
void BatchHeadroom(const Summary& s, const DiagnoseOptions& o, const std::vector<Finding>& found,
                   std::vector<Finding>* out) {
  // After an out-of-memory error, a larger batch is the wrong advice.
  if (!s.memory.has_value() || s.memory->oom.has_value()) return;
  const GpuMemory* g = Fullest(*s.memory);
  if (g == nullptr || !(g->total_bytes > 0) || !(g->min_allocated_bytes >= 0)) return;
  const double used = PeakUsed(*g) / g->total_bytes;
  if (!(used < o.memory_pressure_share)) return;  // never advise a larger batch when nearly full
  const double activations = g->peak_allocated_bytes - g->min_allocated_bytes;
  if (!(activations > 0)) return;  // nothing grows within a step: no basis for an estimate
  // The allocator holds more than the tensors (its cache, rounding) in
  // proportion; the CUDA context is what NVML counts beyond the reservation.
  const double cache = g->peak_reserved_bytes > g->peak_allocated_bytes
                           ? g->peak_reserved_bytes / g->peak_allocated_bytes
                           : 1.0;
  const double context = g->process_used_bytes > g->peak_reserved_bytes
                             ? g->process_used_bytes - g->peak_reserved_bytes
                             : 0.0;
  const double budget = o.memory_usable_share * g->total_bytes - context;
  const double growth = (budget / cache - g->min_allocated_bytes) / activations;
  if (!(growth >= o.batch_headroom_factor)) return;
  const bool launch_bound = std::any_of(found.begin(), found.end(), [](const Finding& x) {
    return x.id == "launch-bound" && x.severity != Severity::kInfo;
  });
  const bool tiny = s.activity.has_value() && s.activity->kernel_time_p50 > 0 &&
                    s.activity->kernel_time_p50 < o.tiny_kernel_seconds;
  Finding f;
  f.id = "batch-headroom";
  f.severity = launch_bound || tiny ? Severity::kModerate : Severity::kInfo;
  f.title = absl::StrFormat("Room for a batch about %.1fx larger: peak %s of %s GPU memory (%s)",
                            growth, GiB(PeakUsed(*g)), GiB(g->total_bytes), Pct(used));
  f.evidence = {{"batch_growth", growth},
                {"peak_used_share", used},
                {"peak_allocated_bytes", g->peak_allocated_bytes},
                {"min_allocated_bytes", g->min_allocated_bytes},
                {"total_bytes", g->total_bytes}};
  std::string per_sample;
  if (s.samples_per_second.has_value() && s.steps > 0 && s.window_time > 0) {
    const double samples = *s.samples_per_second * s.window_time / static_cast<double>(s.steps);
    if (samples >= 1) {
      f.evidence.emplace_back("samples_per_step", samples);
      f.evidence.emplace_back("activation_bytes_per_sample", activations / samples);
      per_sample = absl::StrFormat(
          " (%s of activations per sample: about %.0f samples a step "
          "instead of %.0f)",
          GiB(activations / samples), samples * growth, samples);
    }
  }
  f.recommendation = absl::StrCat(
      "The window's peak uses ", Pct(used), " of the GPU's memory. An estimate: assuming the ",
      GiB(activations), " that grows within a step (activations) scales with the batch and the ",
      GiB(g->min_allocated_bytes),
      " that stays between steps (weights, gradients, optimizer state) does not, a batch about ",
      absl::StrFormat("%.1f", growth), "x larger", per_sample, " fits in ",
      Pct(o.memory_usable_share), " of it. ",
      launch_bound || tiny
          ? "This loop is launch-bound or its kernels are tiny: a larger batch gives each kernel "
            "more work and amortizes the per-launch overhead. "
          : "",
      "Raise the batch size (scaling the learning rate with it, or keeping the effective batch "
      "with fewer gradient-accumulation steps), then check that memory-pressure does not fire.");
  f.confidence = g->peak_exact
                     ? "medium: an estimate; activation memory is assumed proportional to the "
                       "batch"
                     : "low: an estimate from sampled peaks (the true peak may be higher); "
                       "activation memory is assumed proportional to the batch";
  f.source = "allocator";
  out->push_back(std::move(f));
}

// The CUDA out-of-memory error that ended a step (Session::RecordOom()).
void OutOfMemory(const Summary& s, std::vector<Finding>* out) {
  if (!s.memory.has_value() || !s.memory->oom.has_value()) return;
  const OomEvent& e = *s.memory->oom;
  Finding f;
  f.id = "oom";
  f.severity = Severity::kHigh;
  f.title = absl::StrCat(
      "CUDA out of memory", e.step >= 0 ? absl::StrCat(" in step ", e.step) : std::string(),
      e.phase_path.empty() ? std::string() : absl::StrCat(", phase \"", e.phase_path, "\""));
  if (e.requested_bytes >= 0) absl::StrAppend(&f.title, ": asked for ", GiB(e.requested_bytes));
  if (e.allocated_bytes >= 0) {
    absl::StrAppend(&f.title, " with ", GiB(e.allocated_bytes), " allocated",
                    e.total_bytes > 0 ? absl::StrCat(" of ", GiB(e.total_bytes)) : "");
  }
  f.evidence = {{"step", static_cast<double>(e.step)},  {"device", static_cast<double>(e.device)},
                {"requested_bytes", e.requested_bytes}, {"allocated_bytes", e.allocated_bytes},
                {"reserved_bytes", e.reserved_bytes},   {"total_bytes", e.total_bytes}};
  std::string peak;
  if (const GpuMemory* g = Fullest(*s.memory); g != nullptr) {
    f.evidence.emplace_back("window_peak_allocated_bytes", g->peak_allocated_bytes);
    peak = absl::StrCat(" Before it, the window's peak was ", GiB(g->peak_allocated_bytes),
                        InPhase(g->peak_phase), ".");
  }
  std::vector<std::pair<double, std::string>> phases;
  for (const auto& [name, bytes] : s.memory->peak_by_phase) phases.emplace_back(bytes, name);
  std::sort(phases.rbegin(), phases.rend());
  if (!phases.empty()) {
    absl::StrAppend(&peak, " Peak by phase:");
    for (size_t i = 0; i < phases.size() && i < 4; ++i) {
      absl::StrAppend(&peak, i == 0 ? " " : ", ", phases[i].second, " ", GiB(phases[i].first));
    }
    absl::StrAppend(&peak, ".");
  }
  f.recommendation = absl::StrCat(
      "A step ended with \"", e.message.empty() ? "CUDA out of memory" : e.message, "\".", peak,
      " Use a smaller batch (with gradient accumulation to keep the effective one), recompute "
      "activations in the phase that peaks (activation checkpointing), set "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when much memory is reserved but "
      "unallocated, and free what outlives a step (a loss kept with its graph, stored outputs). ",
      e.snapshot.empty()
          ? "To see which tensors held the memory, call "
            "torch.cuda.memory._record_memory_history() at the start and run under gpuscope run "
            "--out DIR: the allocator's snapshot is saved there at the next out-of-memory error "
            "(open it at pytorch.org/memory_viz)."
          : absl::StrCat("The allocator's snapshot is in ", e.snapshot,
                         " (open it at pytorch.org/memory_viz)."));
  f.confidence = "high: the error itself, recorded as it ended the step";
  f.source = "allocator";
  out->push_back(std::move(f));
}

}  // namespace gpuscope::internal
