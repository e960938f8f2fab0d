// The diagnosis rules, one function per playbook entry, and the small helpers
// they share. Diagnose() (diagnose.cc) runs them in a fixed order and ranks
// what they find; the rules live in files by family:
//
//   host_rules.cc  what the host makes the GPU wait for (the loader, copies,
//                  syncs) and the notices about the recording itself (misused
//                  scopes, no GPU source, CUDA events instead of CUPTI)
//   gpu_rules.cc   the GPU and what surrounds it (launch gaps, precision,
//                  collectives, throttling, the PCIe link, nvidia-smi's
//                  utilization, and the healthy GPU-bound verdict)
//   rank_rules.cc  the other ranks of a distributed job (a straggler)
//   periodic_rules.cc  work every N steps inside the step (evaluation,
//                  a checkpoint): the summary's periodic spikes
//   stall_rules.cc  a step, or a phase outside steps, that hung (stalls)
//   memory_rules.cc  this process's GPU memory: allocation retries, memory
//                  nearly full or fragmented, room for a larger batch, and
//                  the out-of-memory error that ended a step
//
// Each rule appends at most one finding to `out` and reads its thresholds
// from `o`, which Diagnose() has already made valid.

#ifndef GPUSCOPE_LIB_ANALYSIS_RULES_H_
#define GPUSCOPE_LIB_ANALYSIS_RULES_H_

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

// `fraction` as a whole percentage for a title ("12%"); "?%" when it is not
// a number, so that a hand-edited summary cannot print "nan%".
inline std::string Pct(double fraction) {
  return std::isfinite(fraction) ? absl::StrFormat("%.0f%%", 100 * fraction) : std::string("?%");
}

// The mean step time over the window, seconds (0 without steps).
inline double MeanStepSeconds(const Summary& s) {
  return s.steps > 0 ? s.window_time / static_cast<double>(s.steps) : 0;
}

// GPU idle while the host was in `cause`, as a fraction of step time (0
// when not measured).
inline double IdleShare(const Summary& s, std::string_view cause) {
  const auto it = s.idle_by_cause.find(std::string(cause));
  return it != s.idle_by_cause.end() ? it->second / 100 : 0;
}

// The severity of a finding that explains `share` of step time.
inline Severity Grade(double share, double moderate, double high) {
  return share >= high       ? Severity::kHigh
         : share >= moderate ? Severity::kModerate
                             : Severity::kInfo;
}

// Adds `v` to `f`'s evidence as `name` when it was measured.
inline void AddIf(Finding& f, const char* name, const std::optional<double>& v) {
  if (v.has_value()) f.evidence.emplace_back(name, *v);
}

// Whether NVML reported `reason` among the window's clocks-event reasons.
inline bool HasReason(const TelemetryStats& t, std::string_view reason) {
  return std::find(t.clocks_event_reasons.begin(), t.clocks_event_reasons.end(), reason) !=
         t.clocks_event_reasons.end();
}

// host_rules.cc
void InputBound(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
void CpuContention(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
void CopyBound(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
// After CopyBound: a copy it already explains is not counted twice.
void CopyExposed(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
void SyncBound(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
void Instrumentation(const Summary& s, std::vector<Finding>* out);
void HostOnly(const Summary& s, std::vector<Finding>* out);
void EventsOnly(const Summary& s, std::vector<Finding>* out);

// gpu_rules.cc
void LaunchBound(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
void Precision(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
void CommBound(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
void Throttling(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
void PcieLink(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
void UtilizationLies(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
// rank_rules.cc
void StragglerRule(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
// The share of this rank's step time spent waiting for a straggler on
// another rank (the last exchange's), 0 when none: what CommBound() leaves
// out.
double StragglerWaitShare(const Summary& s);

// memory_rules.cc: this process's GPU memory (Summary::memory).
void MemoryThrash(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
void MemoryPressure(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);
// Reads the findings `found` so far: moderate rather than a notice when the
// loop is launch-bound.
void BatchHeadroom(const Summary& s, const DiagnoseOptions& o, const std::vector<Finding>& found,
                   std::vector<Finding>* out);
// Any summary, with or without steps: the out-of-memory error that ended a step.
void OutOfMemory(const Summary& s, std::vector<Finding>* out);

// stall_rules.cc
void StallRule(const Summary& s, std::vector<Finding>* out);

// periodic_rules.cc
void PeriodicSpikeRule(const Summary& s, const DiagnoseOptions& o, std::vector<Finding>* out);

// Runs last among the step rules: it reads the findings `found` so far, and
// stays silent when any of them is moderate or high.
void GpuBound(const Summary& s, const DiagnoseOptions& o, const std::vector<Finding>& found,
              std::vector<Finding>* out);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_ANALYSIS_RULES_H_
