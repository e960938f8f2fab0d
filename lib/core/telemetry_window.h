// The telemetry window: the recent telemetry samples (NVML, /proc) and how
// they weigh on steps. Each step gets its time-weighted share of the samples
// (StepRecord::telemetry); a summary gets the window's means
// (TelemetryStats).
//
// State (clocks, throttle reasons, memory) holds from a sample to the next;
// rates (CPU, iowait, nvidia-smi's utilization, which NVML computes over its
// own past sample period) describe the interval from the previous sample to
// it. So a step's telemetry is final only once a sample at or after its end
// has arrived; until then it is revised with every sample.
//
// Not thread-safe: used under the session's aggregator lock.

#ifndef GPUSCOPE_LIB_CORE_TELEMETRY_WINDOW_H_
#define GPUSCOPE_LIB_CORE_TELEMETRY_WINDOW_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "backends/telemetry.h"
#include "core/step_window.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

class TelemetryWindow {
 public:
  // What is sampled (TelemetryStats::source); empty: no telemetry, and
  // Stats() says nothing.
  void SetSource(std::string source) { source_ = std::move(source); }

  // Takes one sample (in time order; an older one is ignored) and revises
  // the telemetry of the steps in `window` still open to it.
  void Add(const TelemetrySample& sample, StepWindow* window);

  // `step` was just appended to the window's step ring, which now holds
  // `steps_in_window` steps: gives it its share of the samples so far, and
  // keeps it open to later ones until one at or after its end arrives.
  // Inline: it runs for every step the worker assembles.
  void OnStepAppended(StepRecord* step, size_t steps_in_window) {
    step->telemetry = Over(step->begin_ns, step->end_ns);
    if (samples_.empty() || samples_.back().host_ns < step->end_ns) {
      open_ = std::min(open_ + 1, steps_in_window);
    }
  }

  // The window was reset (StepWindow::Reset()): no step of it is open to
  // samples any more. The samples stay (steps to come may need them).
  void OnReset() { open_ = 0; }

  // The samples' time-weighted telemetry over [begin_ns, end_ns].
  StepTelemetry Over(int64_t begin_ns, int64_t end_ns) const;

  // The window's telemetry as far as the samples say: host and per-GPU
  // means over the samples that bear on the window's span (`window`'s first
  // step's begin to its last step's end; none when it is empty). nullopt
  // without a source. AddStepTelemetry() adds the steps' part.
  std::optional<TelemetryStats> SampleStats(const StepWindow& window) const;

 private:
  // Calls f(sample, hold_weight, rate_weight) for each sample bearing on
  // [begin_ns, end_ns]: hold_weight is the overlap of the time its state
  // holds (from it to the next sample), rate_weight that of the interval its
  // rates describe (from the previous sample to it). A window of no duration
  // weighs 1 on the sample holding at, or whose interval holds, its time.
  template <typename F>
  void ForEachSampleOver(int64_t begin_ns, int64_t end_ns, F f) const;

  // Samples, oldest first: enough for about 100 s at 10 Hz.
  static constexpr size_t kMaxSamples = 1024;
  std::deque<TelemetrySample> samples_;
  std::string source_;  // empty: no telemetry
  // The newest steps whose telemetry is not final: no sample at or after
  // their end yet (steps end in order, so they are a suffix of the ring).
  size_t open_ = 0;
};

// AddStepTelemetry()
//
// The steps' part of the window's telemetry: means over `view`'s steps
// weighted by step time (each step's time-weighted share of the samples),
// the steps covered and throttled, and the clock event reasons seen. Reads
// only the view: no lock needed.
void AddStepTelemetry(const WindowView& view, TelemetryStats* stats);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_TELEMETRY_WINDOW_H_
