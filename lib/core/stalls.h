// Stalls: a step, or a phase outside steps, open past its limit
// (docs/definitions.md "Stalls"). What is open comes from the recorder's
// published scopes (session/recorder.h); this file holds what decides and
// keeps: the limits from the job's own history, and the watch that turns
// successive looks at the open scopes into stalls, found while they last and
// finished once they end. Pure and clock-free: the caller passes the time.
//
// The limits (seconds; the Options::stall_after_s given, or 0 for "from the
// history"):
//   * a step, once kStallHistorySteps measured steps are in the window and
//     warm-up is over: stall_after_s, or without it
//     max(kStallFloorS, kStallP99Factor x the window's p99 step time,
//         kStallMaxFactor x its longest step);
//     the longest step covers the slow steps that recur (evaluation or a
//     checkpoint every N steps inside the step) which the window has seen;
//   * a step before that (the first step: compilation, cuDNN autotuning; the
//     warm-up steps): max(kStallFirstStepsS, stall_after_s);
//   * a phase open outside steps (evaluation, a checkpoint between steps):
//     max(kStallOutsideFactor x (stall_after_s, or kStallFloorS without it),
//         kStallOutsideHistoryFactor x its longest earlier run outside steps).

#ifndef GPUSCOPE_LIB_CORE_STALLS_H_
#define GPUSCOPE_LIB_CORE_STALLS_H_

#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/phase_table.h"
#include "gpuscope/options.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

inline constexpr int kStallHistorySteps = 10;
inline constexpr double kStallFloorS = 30;
inline constexpr double kStallFirstStepsS = 300;
inline constexpr double kStallP99Factor = 10;
inline constexpr double kStallMaxFactor = 2;
inline constexpr double kStallOutsideFactor = 10;
inline constexpr double kStallOutsideHistoryFactor = 3;

// What the limits are taken from: the window's steps.
struct StallHistory {
  uint64_t measured_steps = 0;  // in the window, warm-up excluded
  bool warming_up = false;      // warm-up steps remain
  double step_p99_s = 0;
  double step_max_s = 0;
};

// The limit of an open step, seconds (+inf: never). `stall_after_s` as
// Options::stall_after_s (0: from the history; +inf: never).
double StepStallLimit(const StallHistory& history, double stall_after_s);

// The limit of a phase open outside steps whose longest earlier run outside
// steps took `longest_earlier_s` (0: none).
double OutsideStallLimit(double longest_earlier_s, double stall_after_s);

// One look at the open scopes, in the watch's terms: the outermost scope
// watched (the step, or the outermost phase when no step is open), when it
// began, and the path of phases open inside it.
struct OpenScope {
  bool is_step = false;
  uint64_t step_seq = 0;  // the step's (1-based); 0 for a phase outside steps
  uint16_t phase_id = 0;  // a phase outside steps: its id
  int64_t begin_ns = 0;   // host clock
  // Its begin as the recorder stamped it (TSC ticks or ns): what identifies
  // it from look to look (a TSC's mapping to ns may be refined meanwhile).
  int64_t begin_raw = 0;
  // The phases open inside the step (or the phase and those inside it),
  // outermost first, by id, and when the innermost of them began (begin_ns
  // when none is).
  std::vector<uint16_t> path = {};
  int64_t innermost_begin_ns = 0;
};

// What the GPU looked like at the moment the watch asks (StallWatch::Look()).
struct StallGpuState {
  double idle_seconds = std::numeric_limits<double>::quiet_NaN();
  double utilization_pct = std::numeric_limits<double>::quiet_NaN();
  std::string words = {};
};

// "4.2 s", "3 min 05 s", "2 h 07 min".
std::string StallDuration(double seconds);

// A stall in one line, as the log and the report say it: "step 41 has been
// open 3 min 05 s (its stall limit: 30.0 s), in forward/attention for
// 3 min 01 s; the GPU ...".
std::string DescribeStall(const Stall& stall);

// StallWatch
//
// Fed one look every pass; says when a stall begins (once per stall) and
// finishes it when its scope ends. Not thread-safe: the caller locks.
class StallWatch {
 public:
  // `open`: what is open now (nullopt: nothing), at `now_ns` on the host
  // clock, with `limit_s` the watched scope's limit and `unix_now_s` the
  // wall clock then. `gpu` is asked only when a stall begins. Returns the
  // stall that began at this look, if one did. `phases` names the ids.
  template <typename AskGpu>
  std::optional<Stall> Look(const std::optional<OpenScope>& open, int64_t now_ns, double limit_s,
                            double unix_now_s, const PhaseTable& phases, AskGpu&& gpu) {
    Finish(open, now_ns);
    if (!open.has_value()) return std::nullopt;
    if (current_.has_value()) {
      Update(*open, now_ns);
      return std::nullopt;
    }
    // In nanoseconds: 30 s open is not past a 30 s limit.
    if (!(static_cast<double>(now_ns - open->begin_ns) > limit_s * 1e9)) return std::nullopt;
    StallGpuState state = gpu();
    return Begin(*open, now_ns, limit_s, unix_now_s, phases, std::move(state));
  }

  // The scope of the stall in progress ended (its record came): its exact
  // duration, end_ns - begin_ns. `is_step`, `step_seq`, `phase_id` and
  // `begin_raw` (OpenScope's) identify it.
  void Ended(bool is_step, uint64_t step_seq, uint16_t phase_id, int64_t begin_raw,
             int64_t begin_ns, int64_t end_ns);

  // The stall in progress, if any.
  const std::optional<Stall>& current() const { return current_stall_; }
  // Every stall kept, oldest first, the one in progress last.
  std::vector<Stall> All() const;
  // A look found the scope that stalled closed before its record came: the
  // record is still wanted (Ended()).
  bool wants_record() const { return current_.has_value() || awaiting_.has_value(); }
  int64_t wanted_begin_raw() const {
    return current_.has_value()    ? current_->begin_raw
           : awaiting_.has_value() ? awaiting_->begin_raw
                                   : 0;
  }

 private:
  struct Key {
    bool is_step;
    uint64_t step_seq;
    uint16_t phase_id;
    int64_t begin_raw;
    bool operator==(const Key&) const = default;
  };
  static Key KeyOf(const OpenScope& o) { return {o.is_step, o.step_seq, o.phase_id, o.begin_raw}; }
  void Finish(const std::optional<OpenScope>& open, int64_t now_ns);
  void Update(const OpenScope& open, int64_t now_ns);
  std::optional<Stall> Begin(const OpenScope& open, int64_t now_ns, double limit_s,
                             double unix_now_s, const PhaseTable& phases, StallGpuState gpu);

  std::optional<Key> current_;
  std::optional<Key> awaiting_;   // finished by a look, its record not yet come
  int64_t current_begin_ns_ = 0;  // the stall in progress: its begin on the host clock
  std::optional<Stall> current_stall_;
  // Finished stalls, oldest first (at most kMaxStalls, the one in progress
  // counted), each with its key for a record that comes after the look that
  // saw its scope closed.
  std::deque<std::pair<Key, Stall>> done_;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_STALLS_H_
