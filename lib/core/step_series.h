// The step series: the window's steps one by one (Session::StepSeries(),
// for plots), each with its phase breakdown, GPU idle by cause and
// telemetry. A pure function of a view of the window (core/step_window.h):
// no lock needed.

#ifndef GPUSCOPE_LIB_CORE_STEP_SERIES_H_
#define GPUSCOPE_LIB_CORE_STEP_SERIES_H_

#include <string>
#include <vector>

#include "core/step_window.h"
#include "gpuscope/timeline.h"

namespace gpuscope::internal {

// FillSeries()
//
// Replaces `*out` with the window's steps, oldest first; phase names come
// from `names` (by phase id; ids beyond it are left out).
void FillSeries(const WindowView& window, const std::vector<std::string>& names,
                std::vector<StepPoint>* out);

// FillColumns()
//
// The same as FillSeries(), a column per field (SeriesColumns).
void FillColumns(const WindowView& window, const std::vector<std::string>& names,
                 SeriesColumns* out);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_STEP_SERIES_H_
