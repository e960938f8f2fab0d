// The rule about the other ranks of a distributed job: a straggler, named on
// every rank from the last exchange of rank records (Summary::ranks), and
// the wait it explains, which the comm-bound rule no longer blames on
// communication. Declared in rules.h; Diagnose() runs it.

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/rules.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/phase.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {
namespace {

// What a telemetry difference must be to explain a straggler: its SM clock
// 10 points of the maximum below the others' median, or throttled in a
// tenth of its steps (the throttling rule's line) while the others' median
// is under it; its host's CPUs at least 85 % busy (the input-bound.cpu
// line) while the others' median is 10 points under that.
constexpr double kClockGap = 0.10;
constexpr double kThrottledSteps = 0.10;
constexpr double kHostCpuBusy = 85.0;
constexpr double kHostCpuGap = 10.0;
// Its input phase counts as longer at 1.5 times the others' median (and at
// least 5 % of the others' step time, the straggler line itself).
constexpr double kInputSlowdown = 1.5;

// The median of `values` (NaN left out); NaN when none are left.
double Median(std::vector<double> values) {
  std::erase_if(values, [](double v) { return std::isnan(v); });
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

const RankRecord* Find(const RanksStats& r, int rank) {
  for (const RankRecord& x : r.ranks) {
    if (x.rank == rank) return &x;
  }
  return nullptr;
}

double PhaseHost(const RankRecord& r, std::string_view phase) {
  for (const RankPhase& p : r.phases) {
    if (p.name == phase) return p.host_p50;
  }
  return std::nan("");
}

// The others' median of `field` of every record but the straggler's.
template <typename Fn>
double OthersMedian(const RanksStats& r, int straggler, Fn field) {
  std::vector<double> values;
  for (const RankRecord& x : r.ranks) {
    if (x.rank != straggler) values.push_back(field(x));
  }
  return Median(std::move(values));
}

// Telemetry that explains why `slow` is slow, one clause each.
std::vector<std::string> Explanations(const RanksStats& r, const RankRecord& slow,
                                      const DiagnoseOptions& o,
                                      std::vector<std::pair<std::string, double>>* ev) {
  std::vector<std::string> out;
  // Near its memory limit, or retrying allocations: the allocator's retries
  // (a device-wide synchronization each) slow that rank alone.
  if (slow.memory_alloc_retries > 0 || slow.memory_peak_share >= o.memory_pressure_share) {
    std::string clause =
        absl::StrFormat("its GPU memory peaks at %s of the GPU", Pct(slow.memory_peak_share));
    if (slow.memory_alloc_retries > 0) {
      absl::StrAppendFormat(&clause, " with %.0f allocation retries in its window",
                            slow.memory_alloc_retries);
    }
    out.push_back(clause + " (its memory-thrash and memory-pressure findings say what to change)");
    ev->emplace_back("straggler_memory_peak_share", slow.memory_peak_share);
    ev->emplace_back("straggler_alloc_retries", slow.memory_alloc_retries);
  }
  const double clock =
      OthersMedian(r, slow.rank, [](const RankRecord& x) { return x.sm_clock_ratio; });
  const double throttled =
      OthersMedian(r, slow.rank, [](const RankRecord& x) { return x.throttled_steps; });
  const bool clock_low = !std::isnan(slow.sm_clock_ratio) && !std::isnan(clock) &&
                         slow.sm_clock_ratio < clock - kClockGap;
  const bool throttled_more = !std::isnan(slow.throttled_steps) &&
                              slow.throttled_steps >= kThrottledSteps &&
                              !(throttled >= kThrottledSteps);
  if (clock_low || throttled_more) {
    out.push_back(absl::StrFormat(
        "its GPU clocks are held down (SM clock %s of maximum against %s on the others; "
        "throttled in %s of its steps)",
        Pct(slow.sm_clock_ratio), Pct(clock), Pct(slow.throttled_steps)));
    ev->emplace_back("straggler_sm_clock_ratio", slow.sm_clock_ratio);
    ev->emplace_back("others_sm_clock_ratio", clock);
  }
  const double cpu = OthersMedian(r, slow.rank, [](const RankRecord& x) { return x.host_cpu_pct; });
  if (!std::isnan(slow.host_cpu_pct) && slow.host_cpu_pct >= kHostCpuBusy &&
      !(cpu >= slow.host_cpu_pct - kHostCpuGap)) {
    out.push_back(absl::StrFormat("its host's CPUs are saturated (%.0f%% busy against %.0f%%)",
                                  slow.host_cpu_pct, cpu));
    ev->emplace_back("straggler_host_cpu_pct", slow.host_cpu_pct);
    ev->emplace_back("others_host_cpu_pct", cpu);
  }
  const std::string_view data = PhaseName(Phase::kData);
  const double own = PhaseHost(slow, data);
  const double others =
      OthersMedian(r, slow.rank, [&](const RankRecord& x) { return PhaseHost(x, data); });
  const double others_step =
      OthersMedian(r, slow.rank, [](const RankRecord& x) { return x.step_p50; });
  if (!std::isnan(own) && !std::isnan(others) && own >= kInputSlowdown * others &&
      own - others >= 0.05 * others_step) {
    out.push_back(absl::StrFormat("its input phase is longer (%s per step against %s)",
                                  absl::StrFormat("%.3g ms", 1e3 * own),
                                  absl::StrFormat("%.3g ms", 1e3 * others)));
    ev->emplace_back("straggler_data_s", own);
    ev->emplace_back("others_data_s", others);
  }
  return out;
}

}  // namespace

double StragglerWaitShare(const Summary& s) {
  if (!s.ranks.has_value() || s.ranks->stragglers.empty() || !s.rank.has_value()) return 0;
  const Straggler& top = s.ranks->stragglers.front();
  if (top.rank == s.rank->rank) return 0;  // the straggler itself does not wait for itself
  return std::isfinite(top.others_wait_share) ? std::clamp(top.others_wait_share, 0.0, 1.0) : 0;
}

void StragglerRule(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out) {
  if (!s.ranks.has_value() || s.ranks->stragglers.empty()) return;
  const RanksStats& r = *s.ranks;
  const Straggler& top = r.stragglers.front();
  const bool self = s.rank.has_value() && s.rank->rank == top.rank;
  // Chronic: slow in most of at least two recent exchanges; transient: in
  // fewer; with one exchange so far, neither can be told yet.
  const bool first = r.recent_exchanges <= 1;
  const bool chronic = !first && 2 * r.straggler_exchanges > r.recent_exchanges;
  const std::string persistence = first
                                      ? std::string("in the one exchange so far")
                                      : absl::StrFormat("%s: slow in %d of the last %d exchanges",
                                                        chronic ? "chronic" : "transient",
                                                        r.straggler_exchanges, r.recent_exchanges);
  const double share =
      std::isfinite(top.others_wait_share) ? std::clamp(top.others_wait_share, 0.0, 1.0) : 0.0;
  Finding f;
  f.id = "straggler";
  f.severity = Grade(share, o.input_bound_moderate, o.input_bound_high);
  f.share = share;
  const std::string who =
      self ? absl::StrCat("this rank (", top.rank, ")") : absl::StrCat("rank ", top.rank);
  const std::string where = top.host.empty() ? "" : absl::StrCat(" on ", top.host);
  f.title = absl::StrFormat(
      "Straggler: %s%s is %.2gx slower than the median rank in %s (%s time; %s); the other "
      "ranks wait %s of step time for it",
      who, where, top.slowdown, top.phase, top.device ? "device" : "host", persistence, Pct(share));
  f.evidence = {{"rank", static_cast<double>(top.rank)},
                {"slowdown", top.slowdown},
                {"score", top.score},
                {"excess_s", top.excess},
                {"others_wait_share", share},
                {"device_time", top.device ? 1.0 : 0.0},
                {"chronic", chronic ? 1.0 : 0.0},
                {"transient", !first && !chronic ? 1.0 : 0.0},
                {"straggler_exchanges", static_cast<double>(r.straggler_exchanges)},
                {"recent_exchanges", static_cast<double>(r.recent_exchanges)},
                {"ranks_compared", static_cast<double>(r.ranks.size())},
                {"ranks_missing", static_cast<double>(r.missing.size())},
                {"stragglers", static_cast<double>(r.stragglers.size())}};
  std::vector<std::string> because;
  if (const RankRecord* slow = Find(r, top.rank); slow != nullptr) {
    because = Explanations(r, *slow, o, &f.evidence);
  }
  const std::string explained =
      because.empty() ? std::string()
                      : absl::StrCat("On that rank, ", absl::StrJoin(because, "; "), ". ");
  f.recommendation = absl::StrCat(
      explained, "Every collective waits for the slowest rank, so the job runs at rank ", top.rank,
      "'s pace in ", top.phase, ". ",
      top.device ? "Its GPU work there takes longer: check that GPU's clocks, temperature and "
                   "power (nvidia-smi -q -d PERFORMANCE,CLOCK on "
                 : "Its host side there takes longer: check that host for other processes "
                   "competing for CPU (top, /proc/pressure/cpu on ",
      top.host.empty() ? std::string("its host") : top.host,
      "), then whether it gets more work (uneven shards, longer sequences: bucket batches by "
      "length). ",
      chronic ? "It is slow in most exchanges: if the host is at fault, exclude it from the job."
      : first ? "Later exchanges will tell whether it stays slow."
              : "It was slow only recently: look at what else ran on that host then.");
  f.confidence =
      absl::StrCat(top.device ? "high: " : "medium: ", "per-phase medians of ", r.ranks.size(),
                   " ranks compared", top.device ? " on device time" : " on host time",
                   r.missing.empty() ? "" : absl::StrCat("; ", r.missing.size(), " ranks missing"));
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

}  // namespace gpuscope::internal
