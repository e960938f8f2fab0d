// The rule about work that runs every N steps inside the step (evaluation,
// a checkpoint, logging that syncs): the summary's periodic spikes
// (Summary::periodic_spikes, found in lib/core/spikes.cc), named with their
// phase, period and cost, with the fix for that kind of work. Declared in
// rules.h; Diagnose() runs it.

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/rules.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/phase.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {
namespace {

// A duration with three significant digits and a unit: "950 ms", "1.20 s".
std::string Seconds(double seconds) {
  if (!std::isfinite(seconds)) return "?";
  const auto fmt = [](double v, const char* unit) {
    if (v >= 100) return absl::StrFormat("%.0f %s", v, unit);
    if (v >= 10) return absl::StrFormat("%.1f %s", v, unit);
    return absl::StrFormat("%.2f %s", v, unit);
  };
  if (seconds >= 1) return fmt(seconds, "s");
  if (seconds >= 1e-3) return fmt(seconds * 1e3, "ms");
  return fmt(seconds * 1e6, "us");
}

enum class Kind { kCheckpoint, kEval, kData, kAccumulation, kUntimed, kOther };

// What kind of work a phase name says it is (case-insensitive): the fix
// depends on it.
Kind KindOf(std::string_view phase) {
  if (phase == kOtherPhaseName) return Kind::kUntimed;
  const std::string name = absl::AsciiStrToLower(std::string(phase));
  for (const char* word : {"checkpoint", "ckpt", "save"}) {
    if (absl::StrContains(name, word)) return Kind::kCheckpoint;
  }
  for (const char* word : {"eval", "valid"}) {
    if (absl::StrContains(name, word)) return Kind::kEval;
  }
  if (phase == PhaseName(Phase::kData)) return Kind::kData;
  // What runs once per optimizer step: every N steps when the steps are
  // micro-batches of gradient accumulation.
  if (phase == PhaseName(Phase::kOptimizer) || phase == PhaseName(Phase::kComm)) {
    return Kind::kAccumulation;
  }
  return Kind::kOther;
}

// "phase "eval"", or what "other" means.
std::string What(const PeriodicSpike& p) {
  return p.phase == kOtherPhaseName ? std::string("untimed work (outside every phase)")
                                    : absl::StrCat("phase \"", p.phase, "\"");
}

std::string Fix(const PeriodicSpike& p) {
  const std::string every = absl::StrCat("every ", p.period_steps, " steps");
  switch (KindOf(p.phase)) {
    case Kind::kCheckpoint:
      return absl::StrCat(
          "Checkpointing ", every,
          " stops training while it writes. Save asynchronously "
          "(torch.distributed.checkpoint.async_save, or copy the state to CPU and write it on a "
          "background thread), save less often, and save only what a restart needs (sharded "
          "state, no duplicate copies per rank).");
    case Kind::kEval:
      return absl::StrCat(
          "Evaluation ", every,
          " stops training while it runs. Evaluate less often (a larger eval interval), on "
          "fewer batches (eval_iters, a fixed validation subset), under torch.inference_mode() "
          "with a larger batch, or off the training step: in another process or on another GPU "
          "from saved checkpoints.");
    case Kind::kData:
      return absl::StrCat(
          "The next batch takes much longer ", every,
          ": with as many DataLoader workers as that, one worker (or the shard it reads) is "
          "slower than the others; otherwise something in the dataset runs every N batches "
          "(opening a file, a cache refill). Raise prefetch_factor so batches are ready ahead, "
          "balance the shards, or move that work out of __getitem__.");
    case Kind::kAccumulation:
      return absl::StrCat(
          "Phase \"", p.phase, "\" runs much longer ", every,
          ". If each step is a micro-batch of gradient accumulation, this is the optimizer step "
          "(and its gradient all-reduce) every ",
          p.period_steps,
          " micro-batches, not waste: count a step per optimizer step (a StepScope around the "
          "accumulation; gpuscope run does) to see the loop's real step time. Otherwise find "
          "what it does then (logging, a scheduler or EMA update) and make it cheaper or less "
          "frequent.");
    case Kind::kUntimed:
      return absl::StrCat(
          "Something outside every phase runs ", every,
          ": find it (logging that calls .item() or prints tensors, a metrics reduction, "
          "gc.collect(), a profiler or scheduler step), wrap it in a phase (s.phase(\"...\")) "
          "to name it, and move it off the step, make it asynchronous or do it less often.");
    case Kind::kOther: break;
  }
  return absl::StrCat("Phase \"", p.phase, "\" runs much longer ", every,
                      ": find what it does then (logging that calls .item(), a metrics "
                      "reduction, an evaluation or a save), and move it off the step, make it "
                      "asynchronous or do it less often.");
}

}  // namespace

// Work every N steps that makes those steps far slower than the rest: its
// phase, period and share of step time (Summary::periodic_spikes).
void PeriodicSpikeRule(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  if (s.periodic_spikes.empty()) return;
  // The largest share (the first, in a summary a session made).
  const auto largest = std::max_element(
      s.periodic_spikes.begin(), s.periodic_spikes.end(),
      [](const PeriodicSpike& a, const PeriodicSpike& b) { return a.share < b.share; });
  const PeriodicSpike& p = *largest;
  if (!(p.share >= o.periodic_spike_moderate)) return;
  Finding f;
  f.id = "periodic-spike";
  f.severity = Grade(p.share, o.periodic_spike_moderate, o.periodic_spike_high);
  f.share = p.share;
  f.title = absl::StrCat("Every ", p.period_steps, " steps, ", What(p), " adds ", Seconds(p.excess),
                         ": ", Pct(p.share), " of step time");
  f.evidence = {{"period_steps", static_cast<double>(p.period_steps)},
                {"occurrences", static_cast<double>(p.occurrences)},
                {"excess_per_spike_s", p.excess},
                {"spike_share", p.share},
                {"last_step", static_cast<double>(p.last_step)},
                {"step_p50_s", s.step_time.p50},
                {"step_p95_s", s.step_time.p95}};
  if (s.step_time.p50 > 0)
    f.evidence.emplace_back("step_p95_over_p50", s.step_time.p95 / s.step_time.p50);
  if (const PhaseStats* phase = s.FindPhase(p.phase); phase != nullptr) {
    f.evidence.emplace_back("phase_p50_s", phase->time.p50);
    f.evidence.emplace_back("phase_max_s", phase->time.max);
  }
  f.recommendation = Fix(p);
  // Other periodic work that is worth fixing too.
  for (auto q = s.periodic_spikes.begin(); q != s.periodic_spikes.end(); ++q) {
    if (q == largest || !(q->share >= o.periodic_spike_moderate)) continue;
    absl::StrAppend(&f.recommendation, " Also every ", q->period_steps, " steps, ", What(*q),
                    " adds ", Seconds(q->excess), " (", Pct(q->share), " of step time): ", Fix(*q));
  }
  if (p.phase == kOtherPhaseName) {
    f.confidence = absl::StrCat(
        "medium: the slow steps recur every ", p.period_steps,
        " steps, but their extra time is outside every phase, so what it is is not measured");
  } else if (p.occurrences < 5) {
    f.confidence = absl::StrCat("medium: only ", p.occurrences,
                                " spikes in the window; a longer window (Options::window) "
                                "would show more of them");
  } else {
    f.confidence = absl::StrCat("high: ", p.occurrences, " spikes, every ", p.period_steps,
                                " steps, in which phase \"", p.phase, "\" grew the most");
  }
  f.source = "host";  // step times are host times, whatever the GPU source
  out->push_back(std::move(f));
}

}  // namespace gpuscope::internal
