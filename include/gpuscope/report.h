// File: gpuscope/report.h
// -----------------------------------------------------------------------------
//
// `FormatReport()` renders a summary for people: step-time quantiles,
// throughput, the phase breakdown and anything that makes the numbers less
// trustworthy (misuse, dropped records, the data source), in at most 80
// columns.
//
// Example:
//
//   std::cout << gpuscope::FormatReport(session.Summarize());

#ifndef GPUSCOPE_REPORT_H_
#define GPUSCOPE_REPORT_H_

#include <string>
#include <string_view>

#include "gpuscope/summary.h"

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
// Plain text, lines of at most 80 columns (not counting colour codes),
// ending in a newline: the summary, then the findings ranked by the step
// time they explain, each with its fix. Text from the summary (phase names,
// a loaded file's fields) is escaped as EscapeForTerminal() does.
std::string FormatReport(const Summary& summary, const ReportOptions& options = {});

// EscapeForTerminal()
//
// `text` safe to print on a terminal: valid UTF-8 without control or
// invisible characters passes unchanged; C0/C1 controls (ESC, CR, NEL...),
// zero-width and bidirectional-override characters and the like are written
// as \u{XXXX} (\e, \n, \r, \t for the common ones), and each byte of invalid
// UTF-8 as \xNN. For text read from files or given by others, so that it
// cannot move the cursor, rewrite a line or hide what follows it.
std::string EscapeForTerminal(std::string_view text);

// PrometheusText()
//
// The summary in the Prometheus text exposition format (version 0.0.4):
// gauges named gpuscope_* (docs/prometheus.md), for a node exporter's
// textfile collector or a scrape endpoint. Window quantiles are gauges with a
// `quantile` label; counters end in _total.
std::string PrometheusText(const Summary& summary);

}  // namespace gpuscope

#endif  // GPUSCOPE_REPORT_H_
