// Periodic spikes: steps far slower than the window's median step that recur
// every N steps (evaluation, a checkpoint, logging every N steps), each
// charged to the phase whose time grew most in them. A pure function of a
// view of the window, run by SummarizeWindow() outside the session's locks
// (docs/definitions.md states the rules for users).
//
// 1. A step is slow when its time exceeds the window's median
//    step by more than both kSpikeModifiedZ robust deviations (the
//    modified z-score of Iglewicz and Hoaglin: 0.6745 (x - median) / MAD,
//    whose 3.5 is their outlier line) and kSpikeFloor of the median. The
//    median and MAD ignore up to half the steps being slow, so the spikes do
//    not hide themselves; the floor keeps a steady loop's jitter (a MAD near
//    0) from making spikes of a few percent.
// 2. Consecutive slow steps are one spike (a checkpoint whose cost spills
//    into the next step), which begins at its first step and costs the sum
//    of its steps' time over the median.
// 3. Each spike is charged to the phase (at any depth, by its union time per
//    step), or to "other" (step time outside every top-level phase), whose
//    time over the spike's steps grew most against its mean over the steps
//    that are not slow (0 where it did not occur). Of a phase and one nested
//    in it, which grow alike, the one occurring in fewer window steps wins
//    (within kNestedTolerance of the larger growth): "checkpoint" rather
//    than the "optimizer" phase it runs in. A phase whose longest step time
//    is under a quarter of the least a spike adds over the median is not
//    looked at: it cannot be what made the step slow.
// 4. A phase's spikes recur when there are at least kMinSpikeOccurrences and
//    at least kRegularGaps of the gaps between their first steps lie within
//    kSpikePeriodJitter of one period of at least kMinSpikePeriod steps, or
//    of 2 or 3 periods when it is at least kMinPeriodForMultiples (the
//    period that fits most gaps, tried at the median gap and one either
//    side).
//
// Cost: nothing past a look at the summary's step quantiles when no step is
// kSpikeFloor over the median (a steady loop); one pass over the window's
// steps when fewer than kMinSpikeOccurrences are (a loop with a rare
// hiccup); otherwise also a selection for the MAD when half the steps or
// more deviate enough for it to raise the line above the floor, and per
// phase that could explain a spike one walk over the slow steps only. A
// window with half its steps slow or more has no typical step: no spikes.

#ifndef GPUSCOPE_LIB_CORE_SPIKES_H_
#define GPUSCOPE_LIB_CORE_SPIKES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/step_window.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

// Iglewicz and Hoaglin's outlier line on the modified z-score.
inline constexpr double kSpikeModifiedZ = 3.5;
// A spike adds at least a quarter of the median step: below that, a
// recurring spike of period 5 or more costs under 5 % of step time (the
// periodic-spike rule's lowest line, DiagnoseOptions), so nothing worth
// reporting is missed, while a steady loop's jitter of a few percent stays
// far below it.
inline constexpr double kSpikeFloor = 0.25;
// At least three spikes: two gaps that agree.
inline constexpr int kMinSpikeOccurrences = 3;
// A spike every other step makes half the steps slow: the median no longer
// tells a typical step.
inline constexpr int64_t kMinSpikePeriod = 3;
// Gaps one step off the period still count: a trigger that fires on the
// step after (a time- or sample-based interval), or a spike whose first
// step was only just under the line.
inline constexpr int64_t kSpikePeriodJitter = 1;
// Three gaps in four: one missing or extra spike among five still recurs.
inline constexpr double kRegularGaps = 0.75;
// For periods of 10 steps or more, a gap of 2 or 3 periods (within the
// jitter) fits too: the occurrences between were charged to another phase
// (a checkpoint in the same step as an evaluation: the step goes to the
// one that grew most) or were too short to be slow. Below 10 steps,
// multiples with their jitter would fit most gaps, recurring or not.
inline constexpr int64_t kMinPeriodForMultiples = 10;
inline constexpr int64_t kMaxPeriodMultiple = 3;
// A nested phase wins over its parent when its growth is at least this
// fraction of the parent's.
inline constexpr double kNestedTolerance = 0.9;

// FindPeriodicSpikes()
//
// The periodic spikes of `window`, largest share first, at most
// kMaxPeriodicSpikes. `names` by phase id (ids beyond it are left out);
// `summary` is the window's summary so far (its step quantiles, window
// time and phases: FillStepStats() and FillPhaseStats() ran).
std::vector<PeriodicSpike> FindPeriodicSpikes(const WindowView& window,
                                              const std::vector<std::string>& names,
                                              const Summary& summary);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_SPIKES_H_
