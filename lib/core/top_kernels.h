// The summary's top kernels: the window's steps' largest kernels (each step
// keeps kKernelsPerStep by device time, core/activity_timeline.h) summed by
// name over the window, overall and per launching phase (docs/definitions.md
// "Top kernels"). A pure function of a view of the window, as the other
// window statistics (core/window_stats.h).

#ifndef GPUSCOPE_LIB_CORE_TOP_KERNELS_H_
#define GPUSCOPE_LIB_CORE_TOP_KERNELS_H_

#include <string>
#include <vector>

#include "core/step_window.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

// FillTopKernels()
//
// Over the window steps with activity records: `top_kernels` (at most
// kMaxTopKernels, largest first) and each of `out->phases`' `top_kernels`
// (at most kMaxPhaseTopKernels; `phase_names` by phase id names them, a
// kernel launched outside every phase goes to "other"). Times are per step
// and GPU; shares are of the window's kernel time, every kernel counted.
void FillTopKernels(const WindowView& window, const std::vector<std::string>& phase_names,
                    Summary* out);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_TOP_KERNELS_H_
