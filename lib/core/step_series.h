// The step series: the window's steps one by one (Session::StepSeries(),
// for plots), each with its phase breakdown, GPU idle by cause and
// telemetry. A pure function of the window (core/step_window.h); the caller
// keeps the window still meanwhile (the session's aggregator lock).

#ifndef GPUSCOPE_LIB_CORE_STEP_SERIES_H_
#define GPUSCOPE_LIB_CORE_STEP_SERIES_H_

#include <vector>

#include "core/phase_table.h"
#include "core/step_window.h"
#include "gpuscope/timeline.h"

namespace gpuscope::internal {

// FillSeries()
//
// Replaces `*out` with the window's steps, oldest first; phase names come
// from `table`.
void FillSeries(const StepWindow& window, const PhaseTable& table, std::vector<StepPoint>* out);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_STEP_SERIES_H_
