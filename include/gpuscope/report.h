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

#include "gpuscope/summary.h"

namespace gpuscope {

// FormatReport()
//
// Plain text, lines of at most 80 columns, ending in a newline.
std::string FormatReport(const Summary& summary);

}  // namespace gpuscope

#endif  // GPUSCOPE_REPORT_H_
