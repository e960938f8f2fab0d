// The aggregator turns the records of ended scopes into completed steps and
// keeps what summaries are made of: a ring of the last `window` steps, a
// lifetime histogram of step time, and per phase a ring of its per-step
// times. It runs on whoever drains the session's queue (the background
// worker or a reader), always under the session's aggregator lock; it is not
// thread-safe by itself.

#ifndef GPUSCOPE_LIB_CORE_AGGREGATOR_H_
#define GPUSCOPE_LIB_CORE_AGGREGATOR_H_

#include <array>
#include <climits>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "backends/device_timer.h"
#include "backends/telemetry.h"
#include "core/activity_timeline.h"
#include "core/device_timeline.h"
#include "core/log_histogram.h"
#include "core/record.h"
#include "base/ring.h"
#include "core/trace_steps.h"
#include "gpuscope/summary.h"
#include "gpuscope/timeline.h"

namespace gpuscope::internal {

class PhaseTable;

// One device's busy time in a step.
struct DeviceBusy {
  int device = 0;
  int64_t busy_ns = 0;  // events: an upper bound
};

// Devices a step keeps numbers for; a step on more is left without GPU
// numbers.
inline constexpr size_t kMaxDevicesPerStep = 8;

// One completed step. Device, idle and telemetry fields are filled by the
// GPU sources when a session has them; -1 / NaN mean "not measured".
struct StepRecord {
  uint64_t index = 0;        // completed-step number, 0-based
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t samples = -1;
  int64_t tokens = -1;
  int64_t top_level_ns = 0;  // sum of top-level phase host time

  int64_t device_busy_ns = -1;    // GPU busy within the step, summed over `devices`
  std::array<DeviceBusy, kMaxDevicesPerStep> devices{};
  uint8_t num_devices = 0;        // devices timed in the step
  int64_t device_span_ns = -1;    // events: first to last completion
  int64_t backlog_begin_ns = -1;  // events: device lag at the step's begin
  int64_t idle_other_ns = -1;     // idle with no phase open
  int64_t idle_launch_ns = -1;    // idle gaps shorter than the launch threshold
  ActivityCounts activity;        // cupti: per-step counts (valid when device_busy_ns >= 0)
  StepTelemetry telemetry;        // time-weighted over the step

  int64_t duration_ns() const { return end_ns - begin_ns; }
};

// One phase's share of one step.
struct PhaseSample {
  uint64_t step_index = 0;
  int64_t total_ns = 0;   // union of the phase's intervals in the step
  int64_t top_ns = 0;     // its top-level intervals' time (part of the breakdown)
  int64_t device_ns = -1; // device time (events: span; CUPTI: busy), -1: not measured
  int64_t idle_ns = -1;   // GPU idle charged to this phase
  int64_t backlog_ns = -1;  // events: device lag at the phase's first begin
  uint32_t count = 0;     // occurrences
  uint32_t top_count = 0; // top-level occurrences
};

class Aggregator {
 public:
  // Caps the phase records one step may have; beyond it the step is left
  // out (counted incomplete) rather than growing memory without bound.
  static constexpr size_t kMaxRecordsPerStep = 1 << 16;

  Aggregator(int window, int max_phases);

  // The device timer whose markers records carry (null: none). Markers of
  // records that do not make a step are released at once; a step's markers
  // wait in a pending list until they all completed.
  void SetDeviceTimer(DeviceTimer* timer) { timer_ = timer; }

  // The activity source whose records give steps their device numbers (null:
  // none). Steps wait in the pending list until the record stream is
  // complete past their end. A session has a timer or a source, not both.
  void SetActivitySource(ActivitySource* source, int64_t launch_threshold_ns) {
    activity_ = source;
    launch_threshold_ns_ = launch_threshold_ns;
  }

  // Takes one record, in queue order.
  void Consume(const Record& record);

  // Takes one telemetry sample (in time order); each step gets its
  // time-weighted share of the samples (StepRecord::telemetry), revised as
  // samples arrive until one at or after its end has (a rate describes the
  // interval before its sample, so a step's last part is known only then).
  // `source` describes what is sampled.
  void AddTelemetry(const TelemetrySample& sample);
  void SetTelemetrySource(std::string source) { telemetry_source_ = std::move(source); }

  enum class Resolution { kOk, kMarkerLost };

  // Non-blocking: for pending steps in order, asks the timer about their
  // markers; a step whose markers all completed gets its device numbers and
  // its markers back in the pool. Stops at the first step still waiting.
  // `final` (at close): the activity source flushes what it holds.
  Resolution ResolvePending(bool final = false);

  // Releases the markers of every pending step, which then keeps its host
  // numbers only (the source was lowered, or the session closes).
  void DropPending();

  // The source was lowered: drops the pending steps, and from now on returns
  // the markers of every step to the pool at once instead of waiting on them.
  void StopResolving() {
    resolving_ = false;
    DropPending();
  }

  // At close: also drops the records of a step whose own record never came,
  // returning their markers.
  void Abandon() {
    DiscardScratch();
    DropPending();
  }


  // Fills the step, phase and throughput fields of `out`. Names come from
  // `phases`. Does not touch source, misuse or version fields.
  void Fill(const PhaseTable& phases, Summary* out) const;

  uint64_t completed_steps() const { return completed_; }
  int64_t incomplete_steps() const { return incomplete_steps_; }

  // Keeps the timelines of the last `steps` completed steps for TraceJson()
  // (0: none). Call before the first record.
  void SetTraceSteps(int steps) { trace_.Reset(static_cast<size_t>(std::max(0, steps))); }

  // The window's steps, oldest first (Session::StepSeries()).
  void FillSeries(const PhaseTable& table, std::vector<StepPoint>* out) const;

  // The window's p95 step time (seconds) and GPU idle % (nullopt without
  // device data), for counter tracks; false when the window is empty.
  bool RollingCounters(double* step_p95_s, std::optional<double>* gpu_idle_pct) const;
  uint64_t completed() const { return completed_; }

  // A copy of the kept steps' timelines (oldest first) and the launch
  // threshold, for Session::TraceJson() to format outside the lock.
  void TraceSnapshot(std::vector<TraceStep>* out, int64_t* launch_threshold_ns) const;

 private:
  struct PhaseHistory {
    Ring<PhaseSample> window;  // allocated when the phase first completes in a step
    int64_t outside_count = 0;
    int64_t outside_total_ns = 0;
  };

  // A step waiting for its markers. Slot kNoEvent never appears here.
  struct PendingMarker {
    uint32_t slot = kNoEvent;
    int64_t host_ns = 0;
    int64_t device_ns = 0;
    uint16_t lane = 0;
    bool done = false;
  };
  struct PendingPhase {
    uint16_t id = 0;
    uint8_t depth = 0;
    PendingMarker begin, end;
  };
  struct PendingStep {
    enum class Kind : uint8_t {
      kAnalyze,      // a step of the window: device numbers once its markers completed
      kHistoryOnly,  // a cancelled step: its markers only tell where each lane stands
      kForget,       // markers went missing here: lane history is unknown from now on
      kNone,         // MakePending(): a step that gets no device numbers
    };
    Kind kind = Kind::kAnalyze;
    uint64_t index = 0;
    PendingMarker begin, end;
    std::vector<PendingPhase> phases;
  };

  void FinishStep(const Record& step, bool no_device_numbers);
  void ReleaseMarkers(const Record& r);
  void ReleaseMarkers(const PendingStep& p);
  void MakePending(const Record& step, PendingStep::Kind kind);
  // Forgets lane history once the steps pending now are resolved.
  void QueueForget();
  void ApplyDeviceResult(PendingStep& p);
  StepTelemetry TelemetryOver(int64_t begin_ns, int64_t end_ns) const;
  // Calls f(sample, hold_weight, rate_weight) for each sample bearing on
  // [begin_ns, end_ns]: hold_weight is the overlap of the time its state
  // holds (from it to the next sample), rate_weight that of the interval its
  // rates describe (from the previous sample to it). A window of no duration
  // weighs 1 on the sample holding at, or whose interval holds, its time.
  template <typename F>
  void ForEachSampleOver(int64_t begin_ns, int64_t end_ns, F f) const;
  void FillTelemetry(Summary* out) const;
  Resolution ResolveFromActivity(bool final);
  void ApplyActivityResult(const PendingStep& p);
  PhaseSample* FindSample(uint16_t phase_id, uint64_t step_index);
  void DiscardScratch();  // drops the scratch records, releasing their markers
  PendingMarker Pending(uint32_t slot, int64_t host_ns) const;
  // Markers went missing: what ran on each lane before is unknown.
  void ForgetLanes();
  bool ScratchHasMarkers() const;
  void RememberLanes(const PendingStep& p);  // each lane's last marker in `p`

  const size_t window_;
  Ring<StepRecord> steps_;
  Ring<TraceStep> trace_{0};  // the last steps' timelines; slots (and their vectors) reused
  TraceStep* FindTrace(uint64_t index);
  LogHistogram lifetime_;
  uint64_t completed_ = 0;
  int64_t incomplete_steps_ = 0;
  std::vector<PhaseHistory> phases_;  // indexed by phase id

  // Telemetry samples, oldest first: enough for about 100 s at 10 Hz.
  static constexpr size_t kTelemetrySamples = 1024;
  std::deque<TelemetrySample> samples_;
  std::string telemetry_source_;  // empty: no telemetry
  // The newest steps whose telemetry is not final: no sample at or after
  // their end yet (steps end in order, so they are a suffix of the ring).
  size_t telemetry_open_ = 0;

  DeviceTimer* timer_ = nullptr;
  ActivitySource* activity_ = nullptr;
  int64_t launch_threshold_ns_ = kDefaultLaunchThresholdNs;
  std::vector<DeviceInterval> acts_;  // drained, not yet behind every pending step
  int64_t acts_horizon_ = INT64_MIN;  // the record stream is complete before this
  // Devices activity was seen on, with the latest end of their activity
  // that began before `history_until_` (folded in step order, so that which
  // devices take part in a step never depends on what was drained early).
  struct SeenDevice {
    int device;
    int64_t last_ns;
  };
  std::vector<SeenDevice> seen_devices_;
  int64_t history_until_ = INT64_MIN;
  void NoteDeviceActivity(const DeviceInterval& a);
  void FoldHistoryUpTo(int64_t t);  // notes drained activity that began before t
  int64_t last_step_end_ns_ = INT64_MIN / 2;  // the latest completed step's end
  int64_t longest_activity_ns_ = 0;           // the longest record drained
  bool resolving_ = true;
  std::deque<PendingStep> pending_;
  // Per lane, its last marker before the next step to be analyzed; lanes
  // past the end are in state `lane_default_`.
  std::vector<LanePast> lane_past_;
  LanePast::State lane_default_ = LanePast::State::kNone;
  uint64_t last_step_seq_ = 0;  // the highest step sequence number seen

  // Phase records of the step being assembled (`scratch_seq_`), and its
  // cancelled phases (kept for their markers).
  std::vector<Record> scratch_;
  std::vector<Record> cancelled_;
  uint64_t scratch_seq_ = 0;
  bool scratch_overflow_ = false;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_AGGREGATOR_H_
