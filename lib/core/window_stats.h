// Window statistics: what a summary says about the window's steps, as pure
// functions of a view of the window (core/step_window.h), so that they run
// outside the session's locks. Quantiles are exact over the window
// (core/quantiles.h, from the window's incremental totals); the lifetime
// ones come from the histogram.
//
// Each function fills its own fields of a Summary and leaves the rest; none
// keeps state.

#ifndef GPUSCOPE_LIB_CORE_WINDOW_STATS_H_
#define GPUSCOPE_LIB_CORE_WINDOW_STATS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/step_window.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

// What the phase statistics take from the steps' pass (FillStepStats()), so
// that the window's steps are walked once for both.
struct WindowTotals {
  int64_t window_ns = 0;       // the window's step time
  int64_t other_ns = 0;        // of which outside every top-level phase
  std::vector<int64_t> other;  // per step, oldest first: the phase "other"
};

// FillStepStats()
//
// Step time over the window (exact) and over the run, the window's step
// count and time, and throughput over the window steps that carried counts.
// Sets `steps`, `total_steps`, `window_time`, `step_time`,
// `lifetime_step_time`, `samples_per_second` and `tokens_per_second`.
// Returns the totals FillPhaseStats() needs.
WindowTotals FillStepStats(const WindowView& window, Summary* out);

// FillDeviceStats()
//
// The GPU side over the window steps whose device data is in, each step's
// time counted once per device timed in it: `gpu_steps`, `devices`,
// `device_step_time`, `gpu_idle_pct`, and the `idle_by_cause` entries
// "other" and "launch" (replacing `idle_by_cause`). `activity_dropped` is
// set when the steps' device data come from activity records (source cupti):
// then `activity` holds their per-step counts, with the records the source
// lost; otherwise `activity` is reset. Returns that device time (the
// denominator of every idle percentage), in ns.
int64_t FillDeviceStats(const WindowView& window, std::optional<int64_t> activity_dropped,
                        Summary* out);

// FillPhaseStats()
//
// Every phase seen in the window or outside steps (`names` by phase id:
// ids beyond it are left out),
// then "other" unless the window is empty, ordered by share, then inclusive
// share, then name (replacing `phases`); shares are of `totals->window_ns`.
// Adds each phase's share of GPU idle to `idle_by_cause`, as a percentage of
// `gpu_window_ns` (FillDeviceStats()). Reorders `totals->other`.
void FillPhaseStats(const WindowView& window, const std::vector<std::string>& names,
                    WindowTotals* totals, int64_t gpu_window_ns, Summary* out);

// RollingCounters()
//
// The window's p95 step time (seconds) and GPU idle % (nullopt without
// device data), for the NVTX counter tracks; false when the window is empty.
bool RollingCounters(const WindowView& window, double* step_p95_s,
                     std::optional<double>* gpu_idle_pct);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_WINDOW_STATS_H_
