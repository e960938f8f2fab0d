#include "core/summarize.h"

#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/spikes.h"
#include "core/telemetry_window.h"
#include "core/top_kernels.h"
#include "core/window_stats.h"
#include "gpuscope/version.h"

namespace gpuscope::internal {
namespace {

// NVML's entry for this process, on the GPU whose memory the allocator
// reported: taken where that is unambiguous (one GPU each side; NVML's
// index and the CUDA ordinal need not agree), with its total where the
// allocator gave none.
void AddProcessMemory(const std::optional<TelemetryStats>& telemetry, MemoryStats* memory) {
  if (!telemetry.has_value() || memory->gpus.size() != 1) return;
  const GpuTelemetry* mine = nullptr;
  for (const GpuTelemetry& g : telemetry->gpus) {
    if (std::isnan(g.process_memory_bytes)) continue;
    if (mine != nullptr) return;  // this process is on several GPUs
    mine = &g;
  }
  if (mine == nullptr) return;
  GpuMemory& gpu = memory->gpus.front();
  gpu.process_used_bytes = mine->process_memory_bytes;
  if (std::isnan(gpu.total_bytes)) gpu.total_bytes = mine->memory_total_bytes;
}

}  // namespace

Summary SummarizeWindow(const WindowSnapshot& snapshot, const SummaryInputs& facts) {
  const WindowView& window = snapshot.window;
  Summary s;
  s.version = GPUSCOPE_VERSION;
  s.window = facts.window;
  s.pending_steps = snapshot.pending_steps;
  WindowTotals totals = FillStepStats(window, &s);
  const int64_t gpu_window_ns = FillDeviceStats(window, snapshot.activity_dropped, &s);
  FillPhaseStats(window, snapshot.phase_names, &totals, gpu_window_ns, &s);
  if (snapshot.activity_dropped.has_value()) FillTopKernels(window, snapshot.phase_names, &s);
  s.periodic_spikes = FindPeriodicSpikes(window, snapshot.phase_names, s);
  if (snapshot.telemetry.has_value()) {
    s.telemetry = snapshot.telemetry;
    AddStepTelemetry(window, &*s.telemetry);
  }
  if (snapshot.memory.has_value()) {
    s.memory = MemoryStatsOf(*snapshot.memory, window.first_index(), window.completed(),
                             s.step_time.p50, snapshot.phase_names);
    AddProcessMemory(s.telemetry, &*s.memory);
  }

  s.misuse = facts.misuse;
  s.misuse.incomplete_steps = window.incomplete_steps();
  s.source = facts.source;
  s.source_reason = facts.source_reason;
  s.simulated = facts.simulated;
  s.gpu_clock_error = facts.gpu_clock_error;
  if (facts.awaiting_activity) {
    // Subscribed, but nothing has arrived: no GPU work yet, or another tool
    // holds the activity API. Not "cupti" until records come.
    s.source = Source::kHost;
    s.source_reason = absl::StrCat(
        facts.source_reason,
        "; but no activity records have arrived yet: no GPU work ran, or another tool holds "
        "CUPTI's activity API (GPU numbers start with the first record)");
  }
  if (s.source == Source::kHost) {  // lowered: what was measured before stays, labeled host
    s.simulated = false;
    s.gpu_idle_pct.reset();
    s.idle_by_cause.clear();
    s.devices.clear();
    s.activity.reset();
    s.top_kernels.clear();
    for (PhaseStats& p : s.phases) p.top_kernels.clear();
  }
  s.efficiency = ComputeEfficiency(s, facts.efficiency);
  s.overhead = facts.overhead;
  s.rank = facts.rank;
  s.ranks = facts.ranks;
  s.stalls = facts.stalls;
  s.step_in_progress = facts.step_in_progress;
  return s;
}

}  // namespace gpuscope::internal
