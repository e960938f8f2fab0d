#include "core/spikes.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/quantiles.h"
#include "gpuscope/phase.h"

namespace gpuscope::internal {
namespace {

// 1 / 0.6745: the MAD of a normal distribution is 0.6745 standard
// deviations (Iglewicz and Hoaglin's modified z-score).
constexpr double kMadToSigma = 1 / 0.6745;

// Consecutive slow steps: one spike.
struct Run {
  size_t first = 0;  // its first slow step, in the list of slow steps
  size_t end = 0;    // one past its last
  uint64_t step = 0;
  double excess_ns = 0;  // its steps' time over the median step
  // The phase charged so far: its id, or -1 for "other"; -2: none yet.
  int phase = -2;
  double growth_ns = 0;
  int64_t phase_steps = 0;  // window steps the phase occurred in
};

// Whether a phase that grew `growth` and occurred in `steps` window steps
// explains a spike better than `run`'s phase so far.
bool Better(double growth, int64_t steps, const Run& run) {
  if (run.phase == -2) return true;
  const double hi = std::max(growth, run.growth_ns);
  const double lo = std::min(growth, run.growth_ns);
  if (lo > 0 && lo >= kNestedTolerance * hi && steps != run.phase_steps) {
    return steps < run.phase_steps;  // alike: the more specific (nested) phase
  }
  return growth > run.growth_ns;
}

// The median of `values` (reordered), which is not empty.
double Median(std::vector<double>& values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

// Whether a gap of `gap` steps fits `period`: within kSpikePeriodJitter of
// it, or, for a period of at least kMinPeriodForMultiples, of up to
// kMaxPeriodMultiple times it (occurrences in between charged to another
// phase, or too short to be slow).
bool Fits(int64_t gap, int64_t period) {
  if (std::abs(gap - period) <= kSpikePeriodJitter) return true;
  if (period < kMinPeriodForMultiples) return false;
  const int64_t k = (gap + period / 2) / period;  // the nearest multiple
  return k >= 2 && k <= kMaxPeriodMultiple && std::abs(gap - k * period) <= kSpikePeriodJitter;
}

// The period that most of `gaps` (steps between spikes, not empty) fit, and
// how many fit it: tried at the median gap and one step either side, the
// median first.
int64_t Period(const std::vector<int64_t>& gaps, std::vector<int64_t>& scratch, size_t* fit) {
  scratch.assign(gaps.begin(), gaps.end());
  const size_t mid = (scratch.size() - 1) / 2;
  std::nth_element(scratch.begin(), scratch.begin() + static_cast<ptrdiff_t>(mid), scratch.end());
  const int64_t median = scratch[mid];
  int64_t best = median;
  *fit = 0;
  for (const int64_t candidate : {median, median - 1, median + 1}) {
    if (candidate < 1) continue;
    const auto n = static_cast<size_t>(
        std::count_if(gaps.begin(), gaps.end(), [&](int64_t g) { return Fits(g, candidate); }));
    if (n > *fit) {
      *fit = n;
      best = candidate;
    }
  }
  return best;
}

}  // namespace

// Long: one pipeline over the window's step times (the slow line, slow
// steps grouped into spikes, each charged to a phase, the periodic ones
// kept) whose stages hand on the durations, slow positions, runs, median
// and line; split, each stage would take most of them as parameters.
std::vector<PeriodicSpike> FindPeriodicSpikes(const WindowView& window,
                                              const std::vector<std::string>& names,
                                              const Summary& summary) {
  std::vector<PeriodicSpike> found;
  const size_t n = window.size();
  // Too few steps for three spikes with two gaps of the shortest period, or
  // no step slow enough (a steady loop): nothing to read.
  constexpr auto kMinSteps = static_cast<size_t>((kMinSpikeOccurrences - 1) * kMinSpikePeriod + 1);
  const Quantiles& q = summary.step_time;
  if (n < kMinSteps || !(q.p50 > 0) || !(q.max - q.p50 > kSpikeFloor * q.p50)) return found;

  // The steps' times and their time outside every top-level phase, oldest
  // first; the MAD.
  std::vector<int64_t> durations, other;
  durations.reserve(n);
  other.reserve(n);
  double window_ns = 0, other_sum_ns = 0;
  window.ForEachStep([&](const StepRecord& s, const StepDevices*) {
    durations.push_back(s.duration_ns());
    other.push_back(s.duration_ns() - s.top_level_ns);
    window_ns += static_cast<double>(s.duration_ns());
    other_sum_ns += static_cast<double>(s.duration_ns() - s.top_level_ns);
  });
  if (durations.size() != n || !(window_ns > 0)) return found;
  // The median step (the summary's, back in nanoseconds) and the line a
  // slow step is over: the floor, unless the MAD puts it higher. Neither
  // when too few steps clear the floor for any to be slow; and the MAD is
  // selected only when half the steps or more deviate by more than the MAD
  // at which the two lines meet (otherwise it is under that MAD).
  const double median_ns = q.p50 * 1e9;
  const double floor_ns = kSpikeFloor * median_ns;
  const double mad_at_floor_ns = floor_ns / (kSpikeModifiedZ * kMadToSigma);
  size_t over_floor = 0, wide = 0;
  for (const int64_t d : durations) {
    const double deviation = static_cast<double>(d) - median_ns;
    over_floor += deviation > floor_ns;
    wide += std::abs(deviation) > mad_at_floor_ns;
  }
  if (over_floor < static_cast<size_t>(kMinSpikeOccurrences)) return found;
  double spread_ns = floor_ns;
  if (2 * wide >= n) {
    std::vector<double> deviations(n);
    for (size_t i = 0; i < n; ++i)
      deviations[i] = std::abs(static_cast<double>(durations[i]) - median_ns);
    spread_ns = std::max(kSpikeModifiedZ * kMadToSigma * Median(deviations), floor_ns);
  }
  const double line_ns = median_ns + spread_ns;

  // The slow steps, and the spikes (runs of consecutive slow steps).
  std::vector<uint64_t> slow;    // completed-step numbers
  std::vector<size_t> slow_pos;  // positions in the window
  const uint64_t first = window.first_index();
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<double>(durations[i]) > line_ns) {
      slow.push_back(first + i);
      slow_pos.push_back(i);
    }
  }
  // Fewer than kMinSpikeOccurrences slow steps cannot make as many spikes;
  // half of them or more would have moved the median.
  if (slow.size() < static_cast<size_t>(kMinSpikeOccurrences) || 2 * slow.size() >= n) return found;
  std::vector<Run> runs;
  for (size_t k = 0; k < slow.size(); ++k) {
    if (runs.empty() || slow[k] != slow[k - 1] + 1) {
      runs.push_back(Run{.first = k, .end = k, .step = slow[k]});
    }
    Run& run = runs.back();
    run.end = k + 1;
    run.excess_ns += static_cast<double>(durations[slow_pos[k]]) - median_ns;
  }
  if (runs.size() < static_cast<size_t>(kMinSpikeOccurrences)) return found;

  // Charge each spike to the phase that grew most in it: each phase's time
  // in the slow steps against its mean over the others (0 where absent).
  const auto steady_steps = static_cast<double>(n - slow.size());
  std::vector<double> values(slow.size());
  const auto charge = [&](int phase, int64_t phase_steps, double sum_ns) {
    double slow_sum = 0;
    for (const double v : values) slow_sum += v;
    const double baseline = std::max(0.0, sum_ns - slow_sum) / steady_steps;
    for (Run& run : runs) {
      double growth = 0;
      for (size_t k = run.first; k < run.end; ++k) growth += values[k] - baseline;
      if (Better(growth, phase_steps, run)) {
        run.phase = phase;
        run.growth_ns = growth;
        run.phase_steps = phase_steps;
      }
    }
  };
  for (size_t k = 0; k < slow.size(); ++k) values[k] = static_cast<double>(other[slow_pos[k]]);
  charge(-1, static_cast<int64_t>(n), other_sum_ns);
  // A phase whose longest step time is under a quarter of the least a spike
  // adds cannot explain one: skipped, so a loop of many phases pays only for
  // those that could.
  const double least_growth_ns = (line_ns - median_ns) / 4;
  const std::vector<PhaseTotals>& totals = window.phase_totals();
  std::unordered_map<std::string_view, size_t> id_of;  // of the phases in the window
  for (size_t id = 0; id < totals.size() && id < names.size(); ++id) {
    if (totals[id].time.count() > 0) id_of.emplace(names[id], id);
  }
  for (const PhaseStats& stats : summary.phases) {
    if (stats.steps == 0 || stats.time.max / kNsToSeconds < least_growth_ns) continue;
    const auto it = id_of.find(stats.name);
    if (it == id_of.end()) continue;  // "other", charged above
    const size_t id = it->second;
    std::fill(values.begin(), values.end(), 0.0);
    window.ForEachPhaseTimeAt(static_cast<uint16_t>(id), slow,
                              [&](size_t k, int64_t ns) { values[k] = static_cast<double>(ns); });
    charge(static_cast<int>(id), totals[id].time.count(),
           static_cast<double>(totals[id].time.sum()));
  }

  // Per phase, whether its spikes recur with a period.
  std::stable_sort(runs.begin(), runs.end(),
                   [](const Run& a, const Run& b) { return a.phase < b.phase; });
  std::vector<int64_t> gaps, scratch;
  for (size_t begin = 0, end = 0; begin < runs.size(); begin = end) {
    end = begin;
    while (end < runs.size() && runs[end].phase == runs[begin].phase) ++end;
    const size_t occurrences = end - begin;
    if (occurrences < static_cast<size_t>(kMinSpikeOccurrences)) continue;
    gaps.clear();
    for (size_t i = begin + 1; i < end; ++i)
      gaps.push_back(static_cast<int64_t>(runs[i].step - runs[i - 1].step));
    size_t fit = 0;
    const int64_t period = Period(gaps, scratch, &fit);
    if (period < kMinSpikePeriod ||
        static_cast<double>(fit) < kRegularGaps * static_cast<double>(gaps.size())) {
      continue;
    }
    double excess_ns = 0;
    for (size_t i = begin; i < end; ++i) excess_ns += runs[i].excess_ns;
    PeriodicSpike spike;
    const int phase = runs[begin].phase;
    spike.phase = phase < 0 ? std::string(kOtherPhaseName) : names[static_cast<size_t>(phase)];
    spike.period_steps = period;
    spike.occurrences = static_cast<int64_t>(occurrences);
    spike.last_step = static_cast<int64_t>(runs[end - 1].step);
    spike.excess = excess_ns / static_cast<double>(occurrences) * kNsToSeconds;
    spike.share = std::clamp(excess_ns / window_ns, 0.0, 1.0);
    found.push_back(std::move(spike));
  }
  std::stable_sort(found.begin(), found.end(), [](const PeriodicSpike& a, const PeriodicSpike& b) {
    return a.share > b.share;
  });
  if (found.size() > static_cast<size_t>(kMaxPeriodicSpikes))
    found.resize(static_cast<size_t>(kMaxPeriodicSpikes));
  return found;
}

}  // namespace gpuscope::internal
