#include "core/step_window.h"

namespace gpuscope::internal {

PhaseSample* StepWindow::FindSample(uint16_t phase_id, uint64_t step_index) {
  Ring<PhaseSample>& ring = phases[phase_id].window;
  // Newest first: the steps looked up are the recently completed ones.
  for (size_t k = ring.size(); k-- > 0;) {
    PhaseSample& sample = ring[k];
    if (sample.step_index == step_index) return &sample;
    if (sample.step_index < step_index) break;
  }
  return nullptr;
}

TraceStep* StepWindow::FindTrace(uint64_t index) {
  for (size_t i = trace.size(); i-- > 0;) {
    if (trace[i].index == index) return &trace[i];
    if (trace[i].index < index) break;
  }
  return nullptr;
}

}  // namespace gpuscope::internal
