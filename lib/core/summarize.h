// Summarize: a Summary from a snapshot of the window and what the session
// knows about itself. A pure function: no locks, no side effects, nothing
// kept. The snapshot is an immutable view (core/step_window.h), so the
// summary is computed outside the session's locks while the window moves on.

#ifndef GPUSCOPE_LIB_CORE_SUMMARIZE_H_
#define GPUSCOPE_LIB_CORE_SUMMARIZE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/efficiency.h"
#include "core/memory_window.h"
#include "core/step_window.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

// What a summary is made of on the aggregator's side (Aggregator::Snapshot()),
// taken under the session's aggregator lock and read without it.
struct WindowSnapshot {
  WindowView window;
  std::vector<std::string> phase_names;  // by phase id: the ids registered
  // The samples' part of the window's telemetry
  // (TelemetryWindow::SampleStats()); nullopt: no telemetry.
  std::optional<TelemetryStats> telemetry;
  // The memory window's part (core/memory_window.h); nullopt: no allocator
  // samples.
  std::optional<MemorySnapshot> memory = std::nullopt;
  int64_t pending_steps = 0;  // completed steps whose device data is not in yet
  // Set while the steps' device data come from activity records (source
  // cupti): the records the source lost to full buffers.
  std::optional<int64_t> activity_dropped = std::nullopt;
};

// What the recorder of the steps knows that the window does not: a live
// session's facts (its source, misuse counted on the hot path, its own
// overhead, its rank exchange) or a recorded run's. Inputs only: the
// summary takes them as they are.
struct SummaryInputs {
  int64_t window = 0;  // Options::window
  Source source = Source::kHost;
  std::string source_reason;
  bool simulated = false;      // the GPU sources are the simulated device
  double gpu_clock_error = 0;  // seconds (Summary::gpu_clock_error)
  // Subscribed to activity records, but none has arrived yet: the summary
  // says `host` (with why) until the first one does.
  bool awaiting_activity = false;
  // Counted on the hot path. `incomplete_steps` is ignored: the window
  // counts those.
  MisuseCounts misuse;
  OverheadStats overhead;
  // MFU (Summary::efficiency, docs/mfu.md): the FLOPs and peak as the
  // options give them, and the GPU's model name for the peak table.
  EfficiencyInputs efficiency;
  std::optional<RankIdentity> rank;
  std::optional<RanksStats> ranks;  // age already set
  std::vector<Stall> stalls;        // Summary::stalls
  double step_in_progress = 0;      // Summary::step_in_progress
};

// SummarizeWindow()
//
// The finished summary of `snapshot` under `inputs`. A `host` summary (the
// recorder's source, or one still awaiting activity records) keeps what was
// measured on the host but no GPU idle, devices or activity counts, and is
// never labelled simulated.
Summary SummarizeWindow(const WindowSnapshot& snapshot, const SummaryInputs& inputs);

// CheckConsistency()
//
// The relations between fields that no summary breaks (quantiles ordered,
// shares summing to at most 1, idle by cause within the idle, counts within
// their totals, ...): OkStatus(), or InvalidArgumentError naming the first
// one broken. Tolerances cover rounding, and the lifetime histogram's 1 %
// error. SummaryFromJson() refuses a summary that breaks one.
absl::Status CheckConsistency(const Summary& summary);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_SUMMARIZE_H_
