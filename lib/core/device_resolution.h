// Device resolution: per-step device data from a session's GPU source.
//
// With the `events` source (a DeviceTimer), a completed step's markers wait
// in a pending list until they all completed on the device; the step then
// gets its GPU numbers (core/device_timeline.h, per device over its lanes)
// written into its window slot and phase samples, and its markers go back
// to the pool. Each lane's last marker is carried to the next step; entries
// in the same list, in step order, also carry the markers of a cancelled
// step (history only) and the points where markers went missing (history
// unknown), so lane history always advances in step order.
//
// With the `cupti` source (an ActivitySource), a step waits until the record
// stream is complete past its end; then core/activity_timeline.h analyzes
// its slice of the drained records.
//
// Step assembly (core/step_assembly.h) hands over the markers of every
// record; Resolve() runs on every pass. Not thread-safe: used under the
// session's aggregator lock.

#ifndef GPUSCOPE_LIB_CORE_DEVICE_RESOLUTION_H_
#define GPUSCOPE_LIB_CORE_DEVICE_RESOLUTION_H_

#include <algorithm>
#include <climits>
#include <cstdint>
#include <deque>
#include <vector>

#include "backends/activity_source.h"
#include "backends/device_timer.h"
#include "core/activity_timeline.h"
#include "core/device_timeline.h"
#include "core/record.h"
#include "core/step_window.h"

namespace gpuscope::internal {

class DeviceResolver {
 public:
  enum class Resolution { kOk, kMarkerLost };

  // The device timer whose markers records carry (null: none).
  void SetDeviceTimer(DeviceTimer* timer) { timer_ = timer; }

  // The activity source whose records give steps their device numbers (null:
  // none). A session has a timer or a source, not both.
  void SetActivitySource(ActivitySource* source, int64_t launch_threshold_ns) {
    activity_ = source;
    launch_threshold_ns_ = launch_threshold_ns;
  }

  // The activity source (null: none), e.g. for its count of lost records.
  const ActivitySource* activity() const { return activity_; }
  // Idle gaps shorter than this are launch gaps (cupti).
  int64_t launch_threshold_ns() const { return launch_threshold_ns_; }
  // The latest end of any activity record drained (INT64_MIN: none yet).
  int64_t latest_activity_end_ns() const { return latest_activity_end_ns_; }

  // ---- From step assembly, in record order.

  // Returns the markers of a record that makes no step to the pool.
  void ReleaseMarkers(const Record& r) {
    if (timer_ == nullptr) return;
    if (r.begin_event != kNoEvent) timer_->Release(r.begin_event);
    if (r.end_event != kNoEvent) timer_->Release(r.end_event);
  }

  // Markers went missing (records dropped, work unbracketed): what ran on
  // each lane is unknown once the steps pending now are resolved.
  void QueueForget();

  // Step `index` completed with phase records `*phases` (sorted by phase id,
  // then begin). With a timer, its markers and its phases' wait for the
  // device (or, `no_device_numbers` or a marker missing, go straight back);
  // with an activity source, it waits for the records covering it. Either
  // way `*phases` is left empty, its markers no longer the caller's.
  // Inline: it runs for every step, and on the host source does no more.
  void TakeCompletedStep(const Record& step, uint64_t index, bool no_device_numbers,
                         std::vector<Record>* phases) {
    last_step_end_ns_ = std::max(last_step_end_ns_, std::max(step.end_ns, step.begin_ns));
    if (timer_ != nullptr || (activity_ != nullptr && resolving_)) {
      MakeCompletedStepPending(step, index, no_device_numbers, phases);
    }
    phases->clear();
  }

  // A cancelled step: with a timer, its markers and those of its phases and
  // cancelled phases only tell where each lane stands. `*phases` and
  // `*cancelled` are left empty, their markers no longer the caller's.
  void TakeCancelledStep(const Record& step, uint64_t index, std::vector<Record>* phases,
                         std::vector<Record>* cancelled);

  // ---- Background side.

  // Non-blocking: resolves pending steps in order, writing their device
  // numbers into `window` (steps that left it meanwhile only advance lane
  // history), and stops at the first step still waiting. `final` (at
  // close): the activity source flushes what it holds, and steps it does
  // not fully cover go without GPU numbers.
  Resolution Resolve(StepWindow* window, bool final);

  // Releases the markers of every pending step, which then keeps its host
  // numbers only (the source was lowered, or the session closes).
  void DropPending();

  // The source was lowered: drops the pending steps, and from now on returns
  // the markers of every step to the pool at once instead of waiting on them.
  void StopResolving() {
    resolving_ = false;
    DropPending();
  }

  // Completed steps of the window (from step `first_index` on) waiting for
  // their device data.
  int64_t steps_waiting(uint64_t first_index) const;

 private:
  // A marker of a pending step. Slot kNoEvent never appears here.
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
      kNone,         // a step that gets no device numbers (its markers are released)
    };
    Kind kind = Kind::kAnalyze;
    uint64_t index = 0;
    PendingMarker begin, end;
    std::vector<PendingPhase> phases;
  };

  // TakeCompletedStep() with a GPU source: queues the step on the pending
  // list (events: with its markers; cupti: its host times).
  void MakeCompletedStepPending(const Record& step, uint64_t index, bool no_device_numbers,
                                std::vector<Record>* phases);
  // Events: queues `step` and the records of `*phases` (and of `*cancelled`,
  // non-null for kHistoryOnly only) on the pending list, or releases their
  // markers when one is missing. Empties the vectors.
  void MakePending(const Record& step, PendingStep::Kind kind, uint64_t index,
                   std::vector<Record>* phases, std::vector<Record>* cancelled);
  void ReleaseMarkers(const PendingStep& p);
  PendingMarker Pending(uint32_t slot, int64_t host_ns) const;
  // Markers went missing: what ran on each lane before is unknown.
  void ForgetLanes();
  void RememberLanes(const PendingStep& p);  // each lane's last marker in `p`
  void ApplyDeviceResult(PendingStep& p, StepWindow* window);

  // Activity: drains the source, resolves the steps it covers, and trims
  // the records no pending step can need.
  Resolution ResolveFromActivity(bool final, StepWindow* window);
  void ApplyActivityResult(const PendingStep& p, StepWindow* window);
  // The step's analysis input: its host window and phases, the slice of
  // activity that can concern it, the devices that take part.
  void FillActivityInput(const PendingStep& p, ActivityStepInput* in) const;
  void NoteDeviceActivity(const DeviceInterval& a);
  void FoldHistoryUpTo(int64_t t);  // notes drained activity that began before t

  DeviceTimer* timer_ = nullptr;
  ActivitySource* activity_ = nullptr;
  int64_t launch_threshold_ns_ = kDefaultLaunchThresholdNs;
  bool resolving_ = true;
  std::deque<PendingStep> pending_;

  // Events: per lane, its last marker before the next step to be analyzed;
  // lanes past the end are in state `lane_default_`.
  std::vector<LanePast> lane_past_;
  LanePast::State lane_default_ = LanePast::State::kNone;

  // Activity.
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
  int64_t last_step_end_ns_ = INT64_MIN / 2;  // the latest completed step's end
  int64_t longest_activity_ns_ = 0;           // the longest record drained
  int64_t latest_activity_end_ns_ = INT64_MIN;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_DEVICE_RESOLUTION_H_
