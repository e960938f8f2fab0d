// The Summary types' own functions, and the relations between a summary's
// fields that every summary keeps.

#include "gpuscope/summary.h"

#include <cmath>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/kernel_names.h"
#include "base/strings.h"
#include "base/text.h"
#include "core/summarize.h"
#include "gpuscope/phase.h"
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

namespace {
bool Same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }
}  // namespace

bool GpuMemory::operator==(const GpuMemory& o) const {
  return device == o.device && Same(allocated_bytes, o.allocated_bytes) &&
         Same(reserved_bytes, o.reserved_bytes) &&
         Same(peak_allocated_bytes, o.peak_allocated_bytes) &&
         Same(peak_reserved_bytes, o.peak_reserved_bytes) && peak_exact == o.peak_exact &&
         peak_step == o.peak_step && peak_phase == o.peak_phase &&
         Same(min_allocated_bytes, o.min_allocated_bytes) && Same(fragmentation, o.fragmentation) &&
         alloc_retries == o.alloc_retries && retry_steps == o.retry_steps &&
         Same(retry_time, o.retry_time) && ooms == o.ooms && Same(total_bytes, o.total_bytes) &&
         Same(process_used_bytes, o.process_used_bytes);
}

bool OomEvent::operator==(const OomEvent& o) const {
  return step == o.step && phase == o.phase && phase_path == o.phase_path && device == o.device &&
         Same(requested_bytes, o.requested_bytes) && Same(allocated_bytes, o.allocated_bytes) &&
         Same(reserved_bytes, o.reserved_bytes) && Same(total_bytes, o.total_bytes) &&
         message == o.message && snapshot == o.snapshot;
}

bool Stall::operator==(const Stall& o) const {
  return step == o.step && phase == o.phase && phase_path == o.phase_path && began == o.began &&
         seconds == o.seconds && phase_seconds == o.phase_seconds && limit == o.limit &&
         ongoing == o.ongoing && Same(last_gpu_work_seconds, o.last_gpu_work_seconds) &&
         Same(gpu_utilization_pct, o.gpu_utilization_pct) && gpu == o.gpu;
}

namespace internal {

namespace {

absl::Status Fail(std::string_view what) { return absl::InvalidArgumentError(ToAbsl(what)); }

// a <= b, give or take 2 %.
bool AtMost(double a, double b) { return a <= b * (1 + 0.02) + 1e-12; }

// min <= p50 <= p90 <= p95 <= p99 <= max, and min <= mean <= max.
bool Ordered(const Quantiles& q) {
  if (q.count == 0) return true;
  return AtMost(q.min, q.p50) && AtMost(q.p50, q.p90) && AtMost(q.p90, q.p95) &&
         AtMost(q.p95, q.p99) && AtMost(q.p99, q.max) && AtMost(q.min, q.mean) &&
         AtMost(q.mean, q.max);
}

// The step times' quantiles, and the step counts against one another.
absl::Status CheckSteps(const Summary& s) {
  if (!Ordered(s.step_time))
    return Fail("step_time quantiles are not ordered (min <= p50 <= ... <= max)");
  if (!Ordered(s.lifetime_step_time)) return Fail("lifetime_step_time quantiles are not ordered");
  if (!Ordered(s.device_step_time)) return Fail("device_step_time quantiles are not ordered");
  if (s.window > 0 && s.steps > s.window) return Fail("steps exceeds window");
  if (s.total_steps < s.steps) return Fail("total_steps is less than steps");
  if (s.step_time.count != s.steps) return Fail("step_time.count differs from steps");
  if (s.lifetime_step_time.count != s.total_steps) {
    return Fail("lifetime_step_time.count differs from total_steps");
  }
  if (s.gpu_steps > s.steps) return Fail("gpu_steps exceeds steps");
  if (!AtMost(s.warmup.max, s.warmup.total) || (s.warmup.steps == 0 && s.warmup.total > 0)) {
    return Fail("warmup.max exceeds warmup.total, or warm-up time without warm-up steps");
  }
  return absl::OkStatus();
}

// Each phase's quantiles and shares; the shares sum to at most 1.
absl::Status CheckPhases(const Summary& s) {
  double shares = 0;
  for (const PhaseStats& p : s.phases) {
    if (!Ordered(p.time) || !Ordered(p.device)) {
      return Fail(
          absl::StrCat("phase '", internal::TerminalSafe(p.name), "' quantiles are not ordered"));
    }
    if (p.share > p.inclusive_share + 1e-9) {
      return Fail(absl::StrCat("phase '", internal::TerminalSafe(p.name),
                               "' share exceeds its inclusive_share"));
    }
    shares += p.share;
  }
  if (shares > 1 + 1e-6) return Fail(absl::StrCat("phase shares sum to ", shares, ", more than 1"));
  return absl::OkStatus();
}

// The GPU's idle time by cause sums to at most its idle time.
absl::Status CheckIdle(const Summary& s) {
  double idle = 0;
  for (const auto& [cause, pct] : s.idle_by_cause) idle += pct;
  if (!s.gpu_idle_pct.has_value() && !s.idle_by_cause.empty()) {
    return Fail("idle_by_cause without gpu_idle_pct");
  }
  if (s.gpu_idle_pct.has_value() && idle > *s.gpu_idle_pct + 0.01) {
    return Fail(absl::StrCat("idle_by_cause sums to ", idle, " %, more than gpu_idle_pct"));
  }
  return absl::OkStatus();
}

// Activity: kernel times nest, copy counts nest, device time by category
// is all there or absent.
absl::Status CheckActivity(const Summary& s) {
  if (!s.activity.has_value()) return absl::OkStatus();
  const ActivityStats& a = *s.activity;
  const auto within = [](double part, double whole) { return part <= whole * (1 + 1e-6) + 1e-12; };
  if (!within(a.fp32_gemm_time_per_step, a.gemm_time_per_step) ||
      !within(a.gemm_time_per_step, a.kernel_time_per_step) ||
      !within(a.collective_time_per_step, a.kernel_time_per_step) ||
      !within(a.exposed_collective_time_per_step, a.collective_time_per_step)) {
    return Fail(
        "activity kernel times are inconsistent (fp32 GEMM <= GEMM <= kernel time, "
        "exposed collective <= collective <= kernel time)");
  }
  if (!within(a.pageable_h2d_copies_per_step, a.pageable_copies_per_step) ||
      !within(a.pageable_copies_per_step, a.copies_per_step)) {
    return Fail("activity copy counts are inconsistent (pageable H2D <= pageable <= copies)");
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
    return Fail(
        "activity device time by category is inconsistent (all ten fields or none, the five "
        "shares summing to 1)");
  }
  if (a.sync_idle_share.has_value() &&
      (*a.sync_idle_share < 0 || !a.device_share_idle.has_value() ||
       !within(*a.sync_idle_share, *a.device_share_idle))) {
    return Fail("activity sync_idle_share is inconsistent (0 <= it <= device_share_idle)");
  }
  return absl::OkStatus();
}

// Periodic spikes: bounded in number, occurrences and shares.
absl::Status CheckPeriodicSpikes(const Summary& s) {
  if (s.periodic_spikes.size() > static_cast<size_t>(kMaxPeriodicSpikes)) {
    return Fail(absl::StrCat("periodic_spikes has more than ", kMaxPeriodicSpikes, " entries"));
  }
  double spike_shares = 0;
  for (const PeriodicSpike& p : s.periodic_spikes) {
    if (p.occurrences > s.steps || p.period_steps < 1) {
      return Fail("periodic_spikes: a spike with more occurrences than steps, or no period");
    }
    spike_shares += p.share;
  }
  if (spike_shares > 1 + 1e-6) return Fail("periodic_spikes: shares sum to more than 1");
  return absl::OkStatus();
}

// Top kernels: bounded lists of bounded names, with a known class.
absl::Status CheckKernelList(const std::vector<KernelStats>& kernels, int max, double* shares) {
  if (kernels.size() > static_cast<size_t>(max)) {
    return Fail(absl::StrCat("top_kernels has more than ", max, " entries"));
  }
  for (const KernelStats& k : kernels) {
    if (k.name.size() > internal::kMaxKernelNameBytes ||
        k.phase.size() > static_cast<size_t>(kMaxPhaseNameLength)) {
      return Fail("top_kernels: a kernel or phase name is too long");
    }
    if (k.kernel_class != "gemm_fp32" && k.kernel_class != "gemm_reduced" &&
        k.kernel_class != "gemm" && k.kernel_class != "collective" && k.kernel_class != "other") {
      return Fail(absl::StrCat("top_kernels: unknown kernel_class \"", k.kernel_class, "\""));
    }
    *shares += k.share;
  }
  return absl::OkStatus();
}

absl::Status CheckTopKernels(const Summary& s) {
  double shares = 0;
  if (absl::Status st = CheckKernelList(s.top_kernels, kMaxTopKernels, &shares); !st.ok())
    return st;
  if (shares > 1 + 1e-6) return Fail("top_kernels: shares sum to more than 1");
  for (const PhaseStats& p : s.phases) {
    double phase_shares = 0;
    if (absl::Status st = CheckKernelList(p.top_kernels, kMaxPhaseTopKernels, &phase_shares);
        !st.ok())
      return st;
  }
  return absl::OkStatus();
}

// This rank's identity and the ranks' records and exchange counts.
absl::Status CheckRanks(const Summary& s) {
  if (s.rank.has_value() && (s.rank->rank >= s.rank->world_size || s.rank->host.size() > 63)) {
    return Fail("rank is not below world_size, or its host name is over 63 bytes");
  }
  if (s.ranks.has_value()) {
    const RanksStats& r = *s.ranks;
    for (const RankRecord& record : r.ranks) {
      if (absl::Status valid = ValidateRankRecord(record); !valid.ok()) {
        return Fail(absl::StrCat("ranks: ", std::string(valid.message())));
      }
    }
    if (r.straggler_exchanges > r.recent_exchanges || r.recent_exchanges > r.exchanges ||
        r.recent_exchanges > kRankHistory) {
      return Fail("ranks: straggler_exchanges <= recent_exchanges <= exchanges does not hold");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckConsistency(const Summary& s) {
  for (absl::Status (*check)(const Summary&) : {CheckSteps, CheckPhases, CheckIdle, CheckActivity,
                                                CheckTopKernels, CheckPeriodicSpikes, CheckRanks}) {
    if (absl::Status st = check(s); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace gpuscope
