// The aggregator turns the records of ended scopes into completed steps and
// keeps what summaries are made of: a ring of the last `window` steps, a
// lifetime histogram of step time, and per phase a ring of its per-step
// times. It runs on whoever drains the session's queue (the background
// worker or a reader), always under the session's aggregator lock; it is not
// thread-safe by itself.

#ifndef GPUSCOPE_LIB_CORE_AGGREGATOR_H_
#define GPUSCOPE_LIB_CORE_AGGREGATOR_H_

#include <cstdint>
#include <vector>

#include "backends/telemetry.h"
#include "core/log_histogram.h"
#include "core/record.h"
#include "core/ring.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

class PhaseTable;

// One completed step. Device, idle and telemetry fields are filled by the
// GPU sources when a session has them; -1 / NaN mean "not measured".
struct StepRecord {
  uint64_t index = 0;        // completed-step number, 0-based
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t samples = -1;
  int64_t tokens = -1;
  int64_t top_level_ns = 0;  // sum of top-level phase host time

  int64_t device_busy_ns = -1;    // union of device activity within the step
  int64_t device_span_ns = -1;    // events: first to last completion
  int64_t backlog_begin_ns = -1;  // events: device lag at the step's begin
  int64_t idle_other_ns = -1;     // idle with no phase open
  int64_t idle_launch_ns = -1;    // idle gaps shorter than the launch threshold
  TelemetrySample telemetry;      // time-weighted over the step

  int64_t duration_ns() const { return end_ns - begin_ns; }
};

// One phase's share of one step.
struct PhaseSample {
  uint64_t step_index = 0;
  int64_t total_ns = 0;   // union of the phase's intervals in the step
  int64_t top_ns = 0;     // its top-level intervals' time (part of the breakdown)
  int64_t device_ns = -1; // device time (events/CUPTI), -1: not measured
  int64_t idle_ns = -1;   // GPU idle charged to this phase
  uint32_t count = 0;     // occurrences
  uint32_t top_count = 0; // top-level occurrences
};

class Aggregator {
 public:
  // Caps the phase records one step may have; beyond it the step is left
  // out (counted incomplete) rather than growing memory without bound.
  static constexpr size_t kMaxRecordsPerStep = 1 << 16;

  Aggregator(int window, int max_phases);

  // Takes one record, in queue order.
  void Consume(const Record& record);

  // Fills the step, phase and throughput fields of `out`. Names come from
  // `phases`. Does not touch source, misuse or version fields.
  void Fill(const PhaseTable& phases, Summary* out) const;

  uint64_t completed_steps() const { return completed_; }
  int64_t incomplete_steps() const { return incomplete_steps_; }
  const Ring<StepRecord>& steps() const { return steps_; }

 private:
  struct PhaseHistory {
    Ring<PhaseSample> window;  // allocated when the phase first completes in a step
    int64_t outside_count = 0;
    int64_t outside_total_ns = 0;
  };

  void FinishStep(const Record& step);
  void DropScratch() {
    scratch_.clear();
    scratch_overflow_ = false;
  }

  const size_t window_;
  Ring<StepRecord> steps_;
  LogHistogram lifetime_;
  uint64_t completed_ = 0;
  int64_t incomplete_steps_ = 0;
  std::vector<PhaseHistory> phases_;  // indexed by phase id

  // Phase records of the step being assembled (`scratch_seq_`).
  std::vector<Record> scratch_;
  uint64_t scratch_seq_ = 0;
  bool scratch_overflow_ = false;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_AGGREGATOR_H_
