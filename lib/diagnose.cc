#include "gpuscope/diagnose.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpuscope/phase.h"
#include "util/json.h"
#include "util/strings.h"

namespace gpuscope {
namespace {

std::string Pct(double fraction) { return absl::StrFormat("%.0f%%", 100 * fraction); }

// The input pipeline: time in phase "data" (steps() puts next(loader) there).
void InputBound(const Summary& s, std::vector<Finding>* out) {
  const PhaseStats* data = s.FindPhase(PhaseName(Phase::kData));
  if (data == nullptr || data->steps == 0 || data->inclusive_share < kInputBoundModerate) return;
  Finding f;
  f.id = "input-bound";
  f.severity = data->inclusive_share >= kInputBoundHigh ? Severity::kHigh : Severity::kModerate;
  f.share = data->inclusive_share;
  f.title = absl::StrCat("Input-bound: ", Pct(data->inclusive_share),
                         " of step time is spent waiting for the next batch");
  f.evidence = {{"data_share", data->inclusive_share},
                {"data_p50_s", data->time.p50},
                {"data_p95_s", data->time.p95},
                {"step_p50_s", s.step_time.p50}};
  if (s.samples_per_second.has_value()) f.evidence.emplace_back("samples_per_second", *s.samples_per_second);
  if (const auto idle = s.idle_by_cause.find(data->name); idle != s.idle_by_cause.end()) {
    f.evidence.emplace_back("gpu_idle_in_data_pct", idle->second);
  }
  f.recommendation =
      "Feed the GPU faster: raise DataLoader num_workers (up to one per spare CPU core), set "
      "pin_memory=True and persistent_workers=True, raise prefetch_factor, and move decoding "
      "and augmentation out of the training process. If the workers already saturate the "
      "CPUs, make preprocessing cheaper (or do it on the GPU); if the CPUs sit idle while "
      "iowait is high, the storage is the bottleneck: cache, shard or prefetch the dataset "
      "to local disk.";
  if (s.source == Source::kHost) {
    f.confidence =
        "medium: host timing only; if the loop waits for the GPU inside the data phase (a "
        "synchronizing copy, say), that wait counts as data time. A GPU source separates them.";
  } else if (s.idle_by_cause.count(data->name) != 0) {
    f.confidence = "high: the GPU was measured idle while the host waited for data";
  } else {
    f.confidence = "medium: the GPU was not measured idle during data (it may have been "
                   "finishing earlier work): the loader's wait may be hidden";
  }
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Misused scopes make every other number suspect; say so, with the fix.
void Instrumentation(const Summary& s, std::vector<Finding>* out) {
  const MisuseCounts& m = s.misuse;
  if (m.total() == 0) return;
  Finding f;
  f.id = "instrumentation";
  f.severity = Severity::kModerate;
  f.title = absl::StrCat(m.total(), " scope calls could not be recorded as written");
  const std::pair<const char*, int64_t> counters[] = {
      {"out_of_order_end", m.out_of_order_end}, {"stale_end", m.stale_end},
      {"nested_step", m.nested_step},           {"wrong_thread", m.wrong_thread},
      {"too_deep", m.too_deep},                 {"invalid_phase", m.invalid_phase},
      {"dropped_records", m.dropped_records},   {"incomplete_steps", m.incomplete_steps}};
  for (const auto& [name, n] : counters) {
    if (n > 0) f.evidence.emplace_back(name, static_cast<double>(n));
  }
  std::string advice;
  if (m.nested_step > 0) absl::StrAppend(&advice, "Steps must not nest: end one before the next. ");
  if (m.out_of_order_end + m.stale_end > 0) {
    absl::StrAppend(&advice, "End scopes in reverse order of beginning (use with-blocks or RAII). ");
  }
  if (m.wrong_thread > 0) {
    absl::StrAppend(&advice, "Record each thread in its own Session. ");
  }
  if (m.invalid_phase > 0) {
    absl::StrAppend(&advice,
                    "Use phase names of 1-64 printable bytes, fewer than Options::max_phases. ");
  }
  if (m.too_deep > 0) absl::StrAppend(&advice, "Keep fewer than 32 scopes open at once. ");
  if (m.dropped_records + m.incomplete_steps > 0) {
    absl::StrAppend(&advice,
                    "Records were dropped: raise Options::queue_capacity or lower "
                    "flush_interval_ms. ");
  }
  if (!advice.empty()) advice.pop_back();
  f.recommendation = advice;
  f.confidence = "high: counted on every scope";
  f.source = std::string(SourceName(s.source));
  out->push_back(std::move(f));
}

// Without a GPU timeline, say what is missing and what would provide it.
void HostOnly(const Summary& s, std::vector<Finding>* out) {
  if (s.source != Source::kHost) return;
  Finding f;
  f.id = "host-only";
  f.severity = Severity::kInfo;
  f.title = "Host timing only: GPU busy and idle time are not measured";
  f.evidence = {{"window_steps", static_cast<double>(s.steps)}};
  f.recommendation = absl::StrCat(
      "Phase times are host wall-clock times. On a machine with an NVIDIA driver, CUDA events "
      "add each phase's device time and a lower bound on GPU idle %, and CUPTI adds exact GPU "
      "idle % charged to its cause (data wait, copies, syncs, launch overhead). Why not here: ",
      s.source_reason);
  f.confidence = "high";
  f.source = "host";
  out->push_back(std::move(f));
}

void EventsOnly(const Summary& s, std::vector<Finding>* out) {
  if (s.source != Source::kEvents) return;
  Finding f;
  f.id = "events-only";
  f.severity = Severity::kInfo;
  f.title = "GPU idle % is a lower bound from CUDA events, not exact from CUPTI";
  f.evidence = {{"gpu_steps", static_cast<double>(s.gpu_steps)}};
  if (s.gpu_idle_pct.has_value()) f.evidence.emplace_back("gpu_idle_pct_at_least", *s.gpu_idle_pct);
  f.recommendation = absl::StrCat(
      "CUPTI activity records give exact GPU busy time, launch gaps, copies and syncs per step. "
      "If another profiler held CUPTI, rerun without it (or release it first); on CUPTI older "
      "than 13.2, ask for it with cupti=True. Why not here: ",
      s.source_reason);
  f.confidence = "high";
  f.source = "events";
  out->push_back(std::move(f));
}

}  // namespace

std::string_view SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kModerate: return "moderate";
    case Severity::kHigh: return "high";
  }
  return "info";
}

std::vector<Finding> Diagnose(const Summary& summary) {
  std::vector<Finding> findings;
  if (summary.steps > 0) InputBound(summary, &findings);
  Instrumentation(summary, &findings);
  HostOnly(summary, &findings);
  EventsOnly(summary, &findings);
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    return std::tie(b.share, b.severity) < std::tie(a.share, a.severity);
  });
  return findings;
}

std::string FindingsToJson(const std::vector<Finding>& findings) {
  internal::JsonWriter w(/*indent=*/2);
  w.BeginArray();
  for (const Finding& f : findings) {
    w.BeginObject();
    w.Key("id"); w.String(f.id);
    w.Key("title"); w.String(f.title);
    w.Key("severity"); w.String(SeverityName(f.severity));
    w.Key("share"); w.Number(f.share);
    w.Key("evidence");
    w.BeginObject();
    for (const auto& [name, value] : f.evidence) {
      w.Key(name);
      w.Number(value);
    }
    w.EndObject();
    w.Key("recommendation"); w.String(f.recommendation);
    w.Key("confidence"); w.String(f.confidence);
    w.Key("source"); w.String(f.source);
    w.EndObject();
  }
  w.EndArray();
  return w.Take();
}

}  // namespace gpuscope
