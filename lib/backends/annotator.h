// Annotator: how steps and phases reach external timelines (NVTX, for Nsight
// Systems). gpuscope emits annotations; it never consumes them.

#ifndef GPUSCOPE_LIB_BACKENDS_ANNOTATOR_H_
#define GPUSCOPE_LIB_BACKENDS_ANNOTATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace gpuscope::internal {

class Annotator {
 public:
  virtual ~Annotator() = default;

  // Off the hot path: called once per phase id, before the id can be pushed
  // (under the phase table's registration lock).
  virtual void RegisterName(uint16_t id, std::string_view name) = 0;

  // Hot path: noexcept, no allocation, no lock. Pushes and pops nest per
  // thread and are always issued from the recording thread.
  virtual void PushStep(uint64_t step_index) noexcept = 0;
  virtual void PushPhase(uint16_t id) noexcept = 0;
  virtual void Pop() noexcept = 0;

  // Off the hot path (whoever pumps the session: its worker or a reader,
  // under its aggregator lock):
  // whether a tool that shows counters is attached, and the rolling numbers
  // to show as counter tracks (Nsight Systems): the window's p95 step time
  // and GPU idle % (nullopt: not measured).
  virtual bool WantsCounters() const { return false; }
  virtual void SampleCounters(double /*step_p95_ms*/, std::optional<double> /*gpu_idle_pct*/) {}
};

// NVTX v3 ranges in domain "gpuscope": messages are registered strings (phase
// names, "step"), steps carry their index as an int64 payload, built-in
// phases have fixed colors. With an NVTX tool attached (NVTX_INJECTION64_PATH
// set) and NVTX headers that have the counters extension, the rolling p95
// step time and GPU idle % are NVTX counters "step time p95 (ms)" and "GPU
// idle (%)" in the same domain. With GPUSCOPE_WITH_NVTX=OFF, an annotator that
// does nothing. `max_phases` bounds the ids RegisterName() will see.
std::unique_ptr<Annotator> MakeNvtxAnnotator(int max_phases);

// An annotator that does nothing.
std::unique_ptr<Annotator> MakeNullAnnotator();

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_ANNOTATOR_H_
