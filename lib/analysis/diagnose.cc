// Diagnose(): checks the thresholds it was given, runs the rules (rules.h;
// host_rules.cc, gpu_rules.cc, rank_rules.cc, periodic_rules.cc) in a fixed
// order, makes every finding's numbers safe to print and compare, and ranks
// the findings. Also DiagnoseOptions::Validate() and SeverityName(). The
// findings' JSON is the export layer's (lib/export/findings_json.cc).

#include "gpuscope/diagnose.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/rules.h"
#include "gpuscope/summary.h"

namespace gpuscope {
namespace {

constexpr double kUnbounded = std::numeric_limits<double>::infinity();

// One threshold and the values that make sense for it. Shares are fractions
// (0..1) and percentages 0..100 because a rule compares them with measured
// fractions and percentages, which never leave those ranges: a threshold
// outside them would silently turn its rule off, or on for everything.
struct Field {
  const char* name;
  double DiagnoseOptions::* member;
  double lo;
  double hi;
};

constexpr Field kFields[] = {
    {"input_bound_moderate", &DiagnoseOptions::input_bound_moderate, 0, 1},
    {"input_bound_high", &DiagnoseOptions::input_bound_high, 0, 1},
    {"h2d_bound_moderate", &DiagnoseOptions::h2d_bound_moderate, 0, 1},
    {"h2d_bound_high", &DiagnoseOptions::h2d_bound_high, 0, 1},
    {"copy_exposed_moderate", &DiagnoseOptions::copy_exposed_moderate, 0, 1},
    {"copy_exposed_high", &DiagnoseOptions::copy_exposed_high, 0, 1},
    {"sync_bound_moderate", &DiagnoseOptions::sync_bound_moderate, 0, 1},
    {"sync_bound_high", &DiagnoseOptions::sync_bound_high, 0, 1},
    {"sync_min_syncs_per_step", &DiagnoseOptions::sync_min_syncs_per_step, 0, kUnbounded},
    {"launch_bound_moderate", &DiagnoseOptions::launch_bound_moderate, 0, 1},
    {"launch_bound_high", &DiagnoseOptions::launch_bound_high, 0, 1},
    {"tiny_kernel_seconds", &DiagnoseOptions::tiny_kernel_seconds, 0, kUnbounded},
    {"comm_bound_moderate", &DiagnoseOptions::comm_bound_moderate, 0, 1},
    {"comm_bound_high", &DiagnoseOptions::comm_bound_high, 0, 1},
    {"periodic_spike_moderate", &DiagnoseOptions::periodic_spike_moderate, 0, 1},
    {"periodic_spike_high", &DiagnoseOptions::periodic_spike_high, 0, 1},
    {"cpu_saturated_share", &DiagnoseOptions::cpu_saturated_share, 0, 1},
    {"cpu_saturated_pct", &DiagnoseOptions::cpu_saturated_pct, 0, 100},
    {"cpu_contention_moderate", &DiagnoseOptions::cpu_contention_moderate, 0, 1},
    {"cpu_contention_high", &DiagnoseOptions::cpu_contention_high, 0, 1},
    {"storage_iowait_pct", &DiagnoseOptions::storage_iowait_pct, 0, 100},
    {"storage_cpu_pct", &DiagnoseOptions::storage_cpu_pct, 0, 100},
    {"gemm_share_of_kernels", &DiagnoseOptions::gemm_share_of_kernels, 0, 1},
    {"fp32_gemm_share", &DiagnoseOptions::fp32_gemm_share, 0, 1},
    {"precision_high", &DiagnoseOptions::precision_high, 0, 1},
    {"throttled_steps_share", &DiagnoseOptions::throttled_steps_share, 0, 1},
    {"power_cap_clock_ratio", &DiagnoseOptions::power_cap_clock_ratio, 0, 1},
    {"pcie_busy_utilization_pct", &DiagnoseOptions::pcie_busy_utilization_pct, 0, 100},
    {"high_reported_utilization_pct", &DiagnoseOptions::high_reported_utilization_pct, 0, 100},
    {"low_busy_pct", &DiagnoseOptions::low_busy_pct, 0, 100},
    {"gpu_bound_idle_pct", &DiagnoseOptions::gpu_bound_idle_pct, 0, 100},
    {"memory_pressure_share", &DiagnoseOptions::memory_pressure_share, 0, 1},
    {"memory_fragmentation", &DiagnoseOptions::memory_fragmentation, 0, 1},
    {"memory_usable_share", &DiagnoseOptions::memory_usable_share, 0, 1},
    {"batch_headroom_factor", &DiagnoseOptions::batch_headroom_factor, 1, kUnbounded},
    {"memory_thrash_high", &DiagnoseOptions::memory_thrash_high, 0, 1},
};

// A rule's two severity lines: a moderate line above the high one would make
// a finding high before it is moderate.
struct Pair {
  double DiagnoseOptions::* moderate;
  double DiagnoseOptions::* high;
};

constexpr Pair kPairs[] = {
    {&DiagnoseOptions::input_bound_moderate, &DiagnoseOptions::input_bound_high},
    {&DiagnoseOptions::cpu_contention_moderate, &DiagnoseOptions::cpu_contention_high},
    {&DiagnoseOptions::h2d_bound_moderate, &DiagnoseOptions::h2d_bound_high},
    {&DiagnoseOptions::copy_exposed_moderate, &DiagnoseOptions::copy_exposed_high},
    {&DiagnoseOptions::sync_bound_moderate, &DiagnoseOptions::sync_bound_high},
    {&DiagnoseOptions::launch_bound_moderate, &DiagnoseOptions::launch_bound_high},
    {&DiagnoseOptions::comm_bound_moderate, &DiagnoseOptions::comm_bound_high},
    {&DiagnoseOptions::periodic_spike_moderate, &DiagnoseOptions::periodic_spike_high},
};

const char* NameOf(double DiagnoseOptions::* member) {
  for (const Field& field : kFields) {
    if (field.member == member) return field.name;
  }
  return "?";
}

// `options` with every invalid field replaced by its default, in
// `*resolved`; returns what was wrong, one sentence each, and the replaced
// fields' names in `*replaced`. A pair out of order is checked after the
// range checks (a NaN is reported as a NaN, not as an order) and both of its
// fields are replaced, since either may be the mistake.
std::vector<std::string> Resolve(const DiagnoseOptions& options, DiagnoseOptions* resolved,
                                 std::vector<const char*>* replaced) {
  static const DiagnoseOptions kDefaults;
  *resolved = options;
  std::vector<std::string> problems;
  for (const Field& field : kFields) {
    const double value = options.*field.member;
    if (std::isfinite(value) && value >= field.lo && value <= field.hi) continue;
    problems.push_back(
        std::isinf(field.hi)
            ? absl::StrCat("DiagnoseOptions::", field.name, " = ", value,
                           " is out of range: use a finite value of at least ", field.lo)
            : absl::StrCat("DiagnoseOptions::", field.name, " = ", value,
                           " is out of range: use a value from ", field.lo, " to ", field.hi));
    resolved->*field.member = kDefaults.*field.member;
    replaced->push_back(field.name);
  }
  for (const Pair& pair : kPairs) {
    const double moderate = resolved->*pair.moderate;
    const double high = resolved->*pair.high;
    if (moderate <= high) continue;
    problems.push_back(absl::StrCat("DiagnoseOptions::", NameOf(pair.moderate), " = ", moderate,
                                    " is above ", NameOf(pair.high), " = ", high,
                                    ": use a moderate line no higher than the high one"));
    resolved->*pair.moderate = kDefaults.*pair.moderate;
    resolved->*pair.high = kDefaults.*pair.high;
    replaced->push_back(NameOf(pair.moderate));
    replaced->push_back(NameOf(pair.high));
  }
  return problems;
}

// A notice that the caller's thresholds were not all used: without it, a
// typo'd threshold would silently diagnose with another value.
Finding InvalidOptions(const Summary& s, const std::vector<std::string>& problems,
                       const std::vector<const char*>& replaced) {
  Finding f;
  f.id = "invalid-options";
  f.severity = Severity::kInfo;
  f.title = absl::StrCat("Invalid diagnosis thresholds replaced by their defaults: ",
                         absl::StrJoin(replaced, ", "));
  f.evidence = {{"invalid_options", static_cast<double>(replaced.size())}};
  f.recommendation =
      absl::StrCat(absl::StrJoin(problems, ". "),
                   ". Check options with DiagnoseOptions::Validate() before diagnosing.");
  f.confidence = "high: the thresholds were checked as DiagnoseOptions::Validate() checks them";
  f.source = std::string(SourceName(s.source));
  return f;
}

}  // namespace

absl::Status DiagnoseOptions::Validate() const {
  DiagnoseOptions resolved;
  std::vector<const char*> replaced;
  const std::vector<std::string> problems = Resolve(*this, &resolved, &replaced);
  return problems.empty() ? absl::OkStatus() : absl::InvalidArgumentError(problems.front());
}

std::string_view SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kModerate: return "moderate";
    case Severity::kHigh: return "high";
  }
  return "info";
}

std::vector<Finding> Diagnose(const Summary& summary, const DiagnoseOptions& options) {
  std::vector<Finding> findings;
  DiagnoseOptions o;
  std::vector<const char*> replaced;
  if (const std::vector<std::string> problems = Resolve(options, &o, &replaced);
      !problems.empty()) {
    findings.push_back(InvalidOptions(summary, problems, replaced));
  }
  if (summary.steps > 0) {
    internal::InputBound(summary, o, &findings);
    internal::CpuContention(summary, o, &findings);
    internal::CopyBound(summary, o, &findings);
    internal::CopyExposed(summary, o, &findings);
    internal::SyncBound(summary, o, &findings);
    internal::LaunchBound(summary, o, &findings);
    internal::Precision(summary, o, &findings);
    internal::CommBound(summary, o, &findings);
    internal::StragglerRule(summary, o, &findings);
    internal::PeriodicSpikeRule(summary, o, &findings);
    internal::Throttling(summary, o, &findings);
    internal::PcieLink(summary, o, &findings);
    internal::UtilizationLies(summary, o, &findings);
    internal::MemoryThrash(summary, o, &findings);
    internal::MemoryPressure(summary, o, &findings);
    internal::BatchHeadroom(summary, o, findings, &findings);
    internal::OutOfMemory(summary, &findings);  // before GpuBound: a run with an OOM is not healthy
    internal::GpuBound(summary, o, findings, &findings);
  } else {
    internal::OutOfMemory(summary, &findings);  // an OOM before any step completed
  }
  internal::StallRule(summary, &findings);
  internal::Instrumentation(summary, &findings);
  internal::HostOnly(summary, &findings);
  internal::EventsOnly(summary, &findings);
  // Whatever a summary holds (a hand-edited file, a bug), findings carry
  // numbers: a share in [0, 1] and finite evidence, so that ranking, JSON and
  // every reader can rely on them.
  for (Finding& f : findings) {
    f.share = std::isfinite(f.share) ? std::clamp(f.share, 0.0, 1.0) : 0.0;
    std::erase_if(f.evidence, [](const auto& e) { return !std::isfinite(e.second); });
  }
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    return std::tie(b.share, b.severity) < std::tie(a.share, a.severity);
  });
  // The out-of-memory error that ended the run comes first, then a stall:
  // they explain little step time, but nothing else matters until they are
  // fixed.
  std::stable_partition(findings.begin(), findings.end(),
                        [](const Finding& f) { return f.id == "stall"; });
  std::stable_partition(findings.begin(), findings.end(),
                        [](const Finding& f) { return f.id == "oom"; });
  return findings;
}

}  // namespace gpuscope
