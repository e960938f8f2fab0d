// The Summary types' own functions, and the relations between a summary's
// fields that every summary keeps.

#include "gpuscope/summary.h"

#include <cmath>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/strings.h"
#include "base/text.h"
#include "core/summarize.h"
#include "gpuscope/ranks.h"

namespace gpuscope {

std::string_view SourceName(Source source) {
  switch (source) {
    case Source::kHost: return "host";
    case Source::kEvents: return "events";
    case Source::kCupti: return "cupti";
  }
  return "host";
}

const PhaseStats* Summary::FindPhase(std::string_view name) const {
  for (const PhaseStats& p : phases) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

namespace internal {

absl::Status CheckConsistency(const Summary& s) {
  const auto fail = [](std::string_view what) {
    return absl::InvalidArgumentError(internal::ToAbsl(what));
  };
  const auto at_most = [](double a, double b) { return a <= b * (1 + 0.02) + 1e-12; };
  const auto ordered = [&](const Quantiles& q) {
    if (q.count == 0) return true;
    return at_most(q.min, q.p50) && at_most(q.p50, q.p90) && at_most(q.p90, q.p95) &&
           at_most(q.p95, q.p99) && at_most(q.p99, q.max) && at_most(q.min, q.mean) &&
           at_most(q.mean, q.max);
  };
  if (!ordered(s.step_time))
    return fail("step_time quantiles are not ordered (min <= p50 <= ... <= max)");
  if (!ordered(s.lifetime_step_time)) return fail("lifetime_step_time quantiles are not ordered");
  if (!ordered(s.device_step_time)) return fail("device_step_time quantiles are not ordered");
  if (s.window > 0 && s.steps > s.window) return fail("steps exceeds window");
  if (s.total_steps < s.steps) return fail("total_steps is less than steps");
  if (s.step_time.count != s.steps) return fail("step_time.count differs from steps");
  if (s.lifetime_step_time.count != s.total_steps) {
    return fail("lifetime_step_time.count differs from total_steps");
  }
  if (s.gpu_steps > s.steps) return fail("gpu_steps exceeds steps");
  if (!at_most(s.warmup.max, s.warmup.total) || (s.warmup.steps == 0 && s.warmup.total > 0)) {
    return fail("warmup.max exceeds warmup.total, or warm-up time without warm-up steps");
  }
  double shares = 0;
  for (const PhaseStats& p : s.phases) {
    if (!ordered(p.time) || !ordered(p.device)) {
      return fail(
          absl::StrCat("phase '", internal::TerminalSafe(p.name), "' quantiles are not ordered"));
    }
    if (p.share > p.inclusive_share + 1e-9) {
      return fail(absl::StrCat("phase '", internal::TerminalSafe(p.name),
                               "' share exceeds its inclusive_share"));
    }
    shares += p.share;
  }
  if (shares > 1 + 1e-6) return fail(absl::StrCat("phase shares sum to ", shares, ", more than 1"));
  double idle = 0;
  for (const auto& [cause, pct] : s.idle_by_cause) idle += pct;
  if (!s.gpu_idle_pct.has_value() && !s.idle_by_cause.empty()) {
    return fail("idle_by_cause without gpu_idle_pct");
  }
  if (s.gpu_idle_pct.has_value() && idle > *s.gpu_idle_pct + 0.01) {
    return fail(absl::StrCat("idle_by_cause sums to ", idle, " %, more than gpu_idle_pct"));
  }
  if (s.activity.has_value()) {
    const ActivityStats& a = *s.activity;
    const auto within = [](double part, double whole) {
      return part <= whole * (1 + 1e-6) + 1e-12;
    };
    if (!within(a.fp32_gemm_time_per_step, a.gemm_time_per_step) ||
        !within(a.gemm_time_per_step, a.kernel_time_per_step) ||
        !within(a.collective_time_per_step, a.kernel_time_per_step) ||
        !within(a.exposed_collective_time_per_step, a.collective_time_per_step)) {
      return fail(
          "activity kernel times are inconsistent (fp32 GEMM <= GEMM <= kernel time, "
          "exposed collective <= collective <= kernel time)");
    }
    if (!within(a.pageable_h2d_copies_per_step, a.pageable_copies_per_step) ||
        !within(a.pageable_copies_per_step, a.copies_per_step)) {
      return fail("activity copy counts are inconsistent (pageable H2D <= pageable <= copies)");
    }
    const std::optional<double> category_shares[] = {a.device_share_kernel, a.device_share_memcpy,
                                                     a.device_share_memset, a.device_share_comm,
                                                     a.device_share_idle};
    const std::optional<double> category_times[] = {a.device_time_kernel, a.device_time_memcpy,
                                                    a.device_time_memset, a.device_time_comm,
                                                    a.device_time_idle};
    int present = 0;
    double share_sum = 0;
    for (int i = 0; i < 5; ++i) {
      present += category_shares[i].has_value() + category_times[i].has_value();
      if (category_shares[i].has_value()) share_sum += *category_shares[i];
    }
    if (present != 0 && (present != 10 || std::abs(share_sum - 1) > 1e-6)) {
      return fail(
          "activity device time by category is inconsistent (all ten fields or none, the five "
          "shares summing to 1)");
    }
  }
  if (s.periodic_spikes.size() > static_cast<size_t>(kMaxPeriodicSpikes)) {
    return fail(absl::StrCat("periodic_spikes has more than ", kMaxPeriodicSpikes, " entries"));
  }
  double spike_shares = 0;
  for (const PeriodicSpike& p : s.periodic_spikes) {
    if (p.occurrences > s.steps || p.period_steps < 1) {
      return fail("periodic_spikes: a spike with more occurrences than steps, or no period");
    }
    spike_shares += p.share;
  }
  if (spike_shares > 1 + 1e-6) return fail("periodic_spikes: shares sum to more than 1");
  if (s.rank.has_value() && (s.rank->rank >= s.rank->world_size || s.rank->host.size() > 63)) {
    return fail("rank is not below world_size, or its host name is over 63 bytes");
  }
  if (s.ranks.has_value()) {
    const RanksStats& r = *s.ranks;
    for (const RankRecord& record : r.ranks) {
      if (absl::Status valid = ValidateRankRecord(record); !valid.ok()) {
        return fail(absl::StrCat("ranks: ", std::string(valid.message())));
      }
    }
    if (r.straggler_exchanges > r.recent_exchanges || r.recent_exchanges > r.exchanges ||
        r.recent_exchanges > kRankHistory) {
      return fail("ranks: straggler_exchanges <= recent_exchanges <= exchanges does not hold");
    }
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace gpuscope
