// Step assembly: the records of ended scopes, in queue order, into completed
// steps in the window (core/step_window.h).
//
// Phase records wait in a per-step scratch list until their step's record
// arrives; then the step is assembled: per phase name the union of its
// intervals, the top-level sum, one StepRecord and its phases' samples appended to the window
// (which adds the step time to the lifetime histogram), and (when traces are kept) the step's
// timeline. A step some of whose records were dropped is left out and counted incomplete.
//
// Every record's device markers are handed to device resolution
// (core/device_resolution.h), which either waits on them or releases them;
// the telemetry window (core/telemetry_window.h) gives each new step its
// share of the samples. Not thread-safe: used under the session's aggregator
// lock.

#ifndef GPUSCOPE_LIB_CORE_STEP_ASSEMBLY_H_
#define GPUSCOPE_LIB_CORE_STEP_ASSEMBLY_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/device_resolution.h"
#include "core/memory_window.h"
#include "core/record.h"
#include "core/step_window.h"
#include "core/telemetry_window.h"

namespace gpuscope::internal {

class StepAssembler {
 public:
  // Caps the phase records one step may have; beyond it the step is left
  // out (counted incomplete) rather than growing memory without bound.
  static constexpr size_t kMaxRecordsPerStep = 1 << 16;

  // Appends to `window`, asks `telemetry` for each step's share and
  // `memory` for its peak, and hands markers to `device`; all four outlive
  // the assembler.
  StepAssembler(StepWindow* window, TelemetryWindow* telemetry, MemoryWindow* memory,
                DeviceResolver* device);

  StepAssembler(const StepAssembler&) = delete;
  StepAssembler& operator=(const StepAssembler&) = delete;

  // Takes one record, in queue order (host times in nanoseconds).
  void Consume(const Record& record);

  // At close: drops the records of a step whose own record never came,
  // returning their markers.
  void Abandon() { DiscardScratch(); }

 private:
  // The step's record arrived: assembles it from scratch_ into the window.
  // `no_device_numbers`: its markers go back without being waited on.
  void FinishStep(const Record& step, bool no_device_numbers);
  void DiscardScratch();  // drops the scratch records, releasing their markers
  bool ScratchHasMarkers() const;

  StepWindow* const window_;
  TelemetryWindow* const telemetry_;
  MemoryWindow* const memory_;
  DeviceResolver* const device_;

  // Phase records of the step being assembled (`scratch_seq_`), and its
  // cancelled phases (kept for their markers).
  std::vector<Record> scratch_;
  std::vector<Record> cancelled_;
  uint64_t scratch_seq_ = 0;
  bool scratch_overflow_ = false;
  uint64_t last_step_seq_ = 0;                             // the highest step sequence number seen
  std::vector<std::pair<uint16_t, PhaseSample>> samples_;  // FinishStep()'s, reused
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_STEP_ASSEMBLY_H_
