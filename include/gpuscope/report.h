// File: gpuscope/report.h
// -----------------------------------------------------------------------------
//
// Every output format, one family of functions: `ToJson()` for each value a
// session gives (a summary, findings, a doctor report, the step series) and
// `SummaryFromJson()` / `DoctorFromJson()` to read two of them back;
// `ToChromeTrace()` for a session's last steps; `ToPrometheus()` for a
// summary's gauges; and for people, `FormatReport()` and `FormatDoctor()`.
//
// Example:
//
//   gpuscope::Summary summary = session.Summarize();
//   std::cout << gpuscope::FormatReport(summary);
//   std::ofstream("run.json") << gpuscope::ToJson(summary);
//   std::ofstream("trace.json") << gpuscope::ToChromeTrace(session);

#ifndef GPUSCOPE_REPORT_H_
#define GPUSCOPE_REPORT_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuscope/analyze.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/doctor.h"
#include "gpuscope/session.h"
#include "gpuscope/summary.h"
#include "gpuscope/timeline.h"

namespace gpuscope {

// ReportOptions
//
// How FormatReport() renders; `ReportOptions{}` is plain text.
struct ReportOptions {
  // ANSI colours for severities (for a terminal; callers decide: the Python
  // API and the command line turn it on for a TTY without NO_COLOR).
  bool color = false;
};

// FormatReport()
//
// The summary for people, in plain text, lines of at most 80 columns (not
// counting colour codes), ending in a newline: step-time quantiles,
// throughput, the phase breakdown and anything that makes the numbers less
// trustworthy (misuse, dropped records, the data source), then the findings
// ranked by the step time they explain, each with its fix. Text from the
// summary (phase names, a loaded file's fields) is escaped as
// EscapeForTerminal() does.
std::string FormatReport(const Summary& summary, const ReportOptions& options = {});

// FormatDoctor()
//
// A doctor report as a table, one line per check (status, subject, check,
// value) and the reason under every one that is not OK; at most 80 columns;
// colour only when `color`.
std::string FormatDoctor(const DoctorReport& report, bool color = false);

// EscapeForTerminal()
//
// `text` safe to print on a terminal: valid UTF-8 without control or
// invisible characters passes unchanged; C0/C1 controls (ESC, CR, NEL...),
// zero-width and bidirectional-override characters and the like are written
// as \u{XXXX} (\e, \n, \r, \t for the common ones), and each byte of invalid
// UTF-8 as \xNN. For text read from files or given by others, so that it
// cannot move the cursor, rewrite a line or hide what follows it.
std::string EscapeForTerminal(std::string_view text);

// ToJson() / SummaryFromJson()
//
// The summary as one JSON object with "schema_version": kJsonSchemaVersion.
// Numbers are written with enough digits to read back exactly. The schema is
// documented in docs/json-schema.md. SummaryFromJson() reads it back:
// InvalidArgumentError for text that is not JSON, lacks a required field or
// has one of the wrong type (the message names it), or breaks a relation
// every summary keeps; FailedPreconditionError for a schema_version this
// library does not read.
std::string ToJson(const Summary& summary);
absl::StatusOr<Summary> SummaryFromJson(std::string_view json);

// ToJson(findings)
//
// The findings as a JSON array of objects with the fields of `Finding`
// (schema: docs/json-schema.md); evidence is an object of name -> number.
std::string ToJson(const std::vector<Finding>& findings);

// ToJson(doctor report) / DoctorFromJson()
//
// Versioned JSON ("schema": "gpuscope.doctor", "schema_version": 1); what
// `--save` writes and `--baseline` reads. DoctorFromJson():
// InvalidArgumentError naming what is wrong for text that is not a doctor
// report (corrupt, truncated, a summary file), FailedPreconditionError for
// another schema version.
std::string ToJson(const DoctorReport& report);
absl::StatusOr<DoctorReport> DoctorFromJson(std::string_view json);

// ToJson(step series)
//
// `{"schema": "gpuscope.step_series", "schema_version": 1, "steps": [...]}`,
// each step an object with the fields of `StepPoint` (nullopt as null).
std::string ToJson(const std::vector<StepPoint>& series);

// ToChromeTrace()
//
// The session's last Options::trace_steps steps as a Chrome trace JSON
// object (open in chrome://tracing or https://ui.perfetto.dev; format:
// docs/trace.md): host steps and phases, device activity per stream (source
// cupti) or each phase's device span (source events), and GPU idle gaps
// labeled with their cause. Thread-safe; never blocks the recording thread.
std::string ToChromeTrace(const Session& session);

// The same for a recorded trace (gpuscope/analyze.h): its last
// AnalyzeOptions::trace_steps steps, as the engine read them (an empty trace
// when none were kept).
std::string ToChromeTrace(const TraceAnalysis& run);

// PrometheusOptions
//
// What ToPrometheus() adds for a fleet, and how many phases it names
// (docs/prometheus.md#labels-and-cardinality).
struct PrometheusOptions {
  // Labels every sample carries, after a distributed job's `rank`: the job's
  // identity (the Python package sets run_id, host and gpu). Names as
  // Prometheus spells them, [a-zA-Z_][a-zA-Z0-9_]*, not "__"-prefixed, none
  // repeated and none "rank"; values valid UTF-8 of at most
  // kMaxPrometheusLabelBytes. Where a family's sample has a label of the same
  // name (the memory gauges' `gpu`), the sample's own value wins.
  std::vector<std::pair<std::string, std::string>> labels = {};

  // Phases with series of their own (share, time, idle cause): the ones with
  // the most time in the window, "other" always among them; the rest's share
  // and idle are summed under phase (cause) "_rest". 1 to kMaxPrometheusPhases.
  // With the session's max_phases, this bounds the series a phase name a user
  // varies can make.
  int max_phases = 32;

  // OK, or InvalidArgumentError naming the label or number at fault.
  absl::Status Validate() const;
};
inline constexpr size_t kMaxPrometheusLabelBytes = 256;
inline constexpr int kMaxPrometheusPhases = 1024;

// ToPrometheus()
//
// The summary in the Prometheus text exposition format (version 0.0.4):
// gauges named gpuscope_* (docs/prometheus.md), for a node exporter's
// textfile collector, a scrape endpoint or a Pushgateway. Window quantiles
// are gauges with a `quantile` label; counters end in _total. The second form
// adds `options`' labels and phase bound (the first: PrometheusOptions{}), or
// returns their Validate() error.
std::string ToPrometheus(const Summary& summary);
absl::StatusOr<std::string> ToPrometheus(const Summary& summary, const PrometheusOptions& options);

}  // namespace gpuscope

#endif  // GPUSCOPE_REPORT_H_
