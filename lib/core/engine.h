// The engine: a recorded run in, a Summary out.
//
// What a live session's background side does (step assembly, device
// resolution, the telemetry window, the window statistics, Summarize), run
// from recorded host ranges and device intervals that carry their own
// timestamps: no Session, no worker thread, no clock, no lock. A live
// session feeds the same pieces from its queue and its GPU source
// (session/pump.cc); a recorded trace (a torch.profiler or Nsight Systems
// export) feeds them through this class.
//
//   Engine engine({.window = 512, .device_activity = true});
//   engine.AddDeviceIntervals(kernels_and_copies);       // any order
//   PhaseId data = *engine.Phase("data");
//   engine.AddHostRange(Record{...phase...});             // in end order
//   engine.AddHostRange(Record{...step...});
//   Summary summary = engine.Summarize(inputs);
//
// Host ranges are `Record`s (core/record.h) in the order their scopes ended
// (a step's phases before the step), their times in nanoseconds on the clock
// the device intervals use; markers (`begin_event`, `end_event`) are
// kNoEvent. Not thread-safe.

#ifndef GPUSCOPE_LIB_CORE_ENGINE_H_
#define GPUSCOPE_LIB_CORE_ENGINE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/activity_source.h"
#include "backends/telemetry.h"
#include "core/aggregator.h"
#include "core/phase_table.h"
#include "core/record.h"
#include "core/summarize.h"
#include "core/trace_steps.h"
#include "gpuscope/options.h"
#include "gpuscope/phase.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

class Engine {
 public:
  struct Config {
    int window = 512;      // steps summarized (Options::window)
    int warmup_steps = 0;  // the first steps, left out (Options::warmup_steps)
    int max_phases = kMaxPhases;
    // The run has a device timeline (the intervals AddDeviceIntervals()
    // gives): steps get GPU numbers from it, as with the `cupti` source.
    // False: host numbers only.
    bool device_activity = false;
    int64_t launch_threshold_ns = kDefaultLaunchThresholdNs;
    int trace_steps = 0;  // timelines kept for TraceSnapshot()
    std::string activity_name = "recorded activity";
  };

  explicit Engine(const Config& config);
  ~Engine();

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The id of phase `name` (a built-in kind's name gives its id), registered
  // on first use; an error for a name a session would refuse, or past
  // Config::max_phases.
  absl::StatusOr<PhaseId> Phase(std::string_view name);

  // Device activity of the run, in any order and in any number of calls, all
  // before the host ranges they overlap: each step is resolved once host
  // ranges past its end have come, from the intervals given by then.
  void AddDeviceIntervals(std::vector<DeviceInterval> intervals);

  // One host range (a step or a phase), in the order the scopes ended.
  void AddHostRange(const Record& record);

  // One telemetry sample, in time order, described as `source` (what was
  // sampled: Summary::telemetry's source).
  void AddTelemetry(const TelemetrySample& sample, std::string_view source);

  // Summary of the window: every step ended so far resolved against every
  // interval given, under `inputs` (what the run's recorder knew: its
  // source, its overhead, MFU's FLOPs, ranks). May be called again after
  // more ranges.
  Summary Summarize(const SummaryInputs& inputs);

  // The window as SummarizeWindow() reads it, after resolving what can be.
  WindowSnapshot Snapshot();

  // The kept steps' timelines (Config::trace_steps), their phase names and
  // the launch threshold, as the Chrome trace encodes them
  // (export/chrome_trace.h), after resolving what can be; with `rank`.
  TraceCapture Trace(std::optional<RankIdentity> rank = std::nullopt);

  uint64_t completed_steps() const { return aggregator_.completed_steps(); }

 private:
  class RecordedActivity;

  void Resolve(bool final);

  Config config_;
  PhaseTable phases_;
  std::unique_ptr<RecordedActivity> activity_;  // null without device activity
  Aggregator aggregator_;
  int64_t host_until_ns_ = INT64_MIN;  // the latest end of a host range given
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_ENGINE_H_
