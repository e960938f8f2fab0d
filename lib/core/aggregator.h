// The aggregator: the owner of a session's window and of the pieces that
// fill it, composed behind one interface for the session.
//
//   * step assembly (core/step_assembly.h): records into completed steps;
//   * device resolution (core/device_resolution.h): markers or activity
//     records into per-step device data;
//   * the telemetry window (core/telemetry_window.h): samples weighted over
//     steps;
//   * the window (core/step_window.h) they write, which the window
//     statistics, Summarize (core/summarize.h) and the series
//     (core/step_series.h) read.
//
// It runs on whoever drains the session's queue (the background worker or a
// reader), always under the session's aggregator lock; it is not
// thread-safe by itself.

#ifndef GPUSCOPE_LIB_CORE_AGGREGATOR_H_
#define GPUSCOPE_LIB_CORE_AGGREGATOR_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/activity_source.h"
#include "backends/device_timer.h"
#include "backends/telemetry.h"
#include "core/device_resolution.h"
#include "core/memory_window.h"
#include "core/phase_table.h"
#include "core/record.h"
#include "core/stalls.h"
#include "core/step_assembly.h"
#include "core/step_window.h"
#include "core/summarize.h"
#include "core/telemetry_window.h"
#include "core/trace_steps.h"
#include "gpuscope/timeline.h"

namespace gpuscope::internal {

class Aggregator {
 public:
  // Caps the phase records one step may have; beyond it the step is left
  // out (counted incomplete) rather than growing memory without bound.
  static constexpr size_t kMaxRecordsPerStep = StepAssembler::kMaxRecordsPerStep;

  using Resolution = DeviceResolver::Resolution;

  // A window of `window` steps, for phase ids below `max_phases`.
  Aggregator(int window, int max_phases);

  Aggregator(const Aggregator&) = delete;
  Aggregator& operator=(const Aggregator&) = delete;

  // The device timer whose markers records carry (null: none). Markers of
  // records that do not make a step are released at once; a step's markers
  // wait in a pending list until they all completed.
  void SetDeviceTimer(DeviceTimer* timer) { device_.SetDeviceTimer(timer); }

  // The activity source whose records give steps their device numbers (null:
  // none). Steps wait in the pending list until the record stream is
  // complete past their end. A session has a timer or a source, not both.
  void SetActivitySource(ActivitySource* source, int64_t launch_threshold_ns) {
    device_.SetActivitySource(source, launch_threshold_ns);
  }

  // Takes one record, in queue order.
  void Consume(const Record& record) { assembler_.Consume(record); }

  // Takes one telemetry sample (in time order); each step gets its
  // time-weighted share of the samples (StepRecord::telemetry), revised as
  // samples arrive until one at or after its end has (a rate describes the
  // interval before its sample, so a step's last part is known only then).
  void AddTelemetry(const TelemetrySample& sample) { telemetry_.Add(sample, &window_); }
  // What is sampled (TelemetryStats::source); empty: no telemetry.
  void SetTelemetrySource(std::string source) { telemetry_.SetSource(std::move(source)); }

  // Allocator samples (core/memory_window.h): each step gets its peak and
  // the phase that reached it. `source` names the allocator (MemoryStats::source).
  void AddMemory(const MemorySample& sample) { memory_.Add(sample); }
  void SetMemorySource(std::string source) { memory_.SetSource(std::move(source)); }
  bool memory_active() const { return memory_.active(); }
  // The out-of-memory error that ended a step (MemoryStats::oom).
  void SetOom(const OomEvent& oom) { memory_.SetOom(oom); }
  // Its step's completed-step number, once the step was assembled (-1: not kept).
  void SetOomStep(int64_t step) { memory_.SetOomStep(step); }

  // Non-blocking: for pending steps in order, asks the timer about their
  // markers; a step whose markers all completed gets its device numbers and
  // its markers back in the pool. Stops at the first step still waiting.
  // `final` (at close): the activity source flushes what it holds.
  Resolution ResolvePending(bool final = false) { return device_.Resolve(&window_, final); }

  // Releases the markers of every pending step, which then keeps its host
  // numbers only (the source was lowered, or the session closes).
  void DropPending() { device_.DropPending(); }

  // The source was lowered: drops the pending steps, and from now on returns
  // the markers of every step to the pool at once instead of waiting on them.
  void StopResolving() { device_.StopResolving(); }

  // At close: also drops the records of a step whose own record never came,
  // returning their markers.
  void Abandon() {
    assembler_.Abandon();
    device_.DropPending();
  }

  // The next `steps` completed steps are warm-up (StepWindow::Append()).
  void SetWarmup(int steps) { window_.SetWarmup(steps); }

  // Measurement restarts (Session::Reset(), StepWindow::Reset()): steps
  // completed from now on are measured, after `warmup_steps` of warm-up.
  // Records not yet consumed, and the phases of a step in flight, are
  // untouched: a step that ends after this is counted. Steps still waiting
  // for device data keep advancing the lanes' history, but their numbers
  // have nowhere to go.
  void Reset(int warmup_steps) {
    window_.Reset(warmup_steps);
    telemetry_.OnReset();
    memory_.OnReset();
  }

  // What SummarizeWindow() (core/summarize.h) reads: a view of the window
  // (valid after the aggregator changes, from any thread) and the names of
  // `phases`' ids.
  WindowSnapshot Snapshot(const PhaseTable& phases) const;

  uint64_t completed_steps() const { return window_.completed(); }
  int64_t incomplete_steps() const { return window_.incomplete_steps(); }

  // Keeps the timelines of the last `steps` completed steps for the Chrome trace
  // (0: none). Call before the first record.
  void SetTraceSteps(int steps) { window_.trace.Reset(static_cast<size_t>(std::max(0, steps))); }

  // The window's p95 step time (seconds) and GPU idle % (nullopt without
  // device data), for counter tracks; false when the window is empty.
  bool RollingCounters(double* step_p95_s, std::optional<double>* gpu_idle_pct) const;
  uint64_t completed() const { return window_.completed(); }
  // The window's step times for the stall limits (core/stalls.h).
  StallHistory StallHistoryOf() const;
  // The latest end of device activity drained (INT64_MIN: none).
  int64_t latest_activity_end_ns() const { return device_.latest_activity_end_ns(); }

  // A copy of the kept steps' timelines (oldest first) and the launch
  // threshold, for the Chrome trace to be encoded outside the lock.
  void TraceSnapshot(std::vector<TraceStep>* out, int64_t* launch_threshold_ns) const;

 private:
  // Declared before the pieces that point at them.
  StepWindow window_;
  TelemetryWindow telemetry_;
  MemoryWindow memory_;
  DeviceResolver device_;
  StepAssembler assembler_;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_AGGREGATOR_H_
