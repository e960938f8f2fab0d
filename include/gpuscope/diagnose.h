// File: gpuscope/diagnose.h
// -----------------------------------------------------------------------------
//
// `Diagnose()` turns a summary into findings: what is slowing the loop, how
// much of the step time it explains, the numbers that show it, and what to do.
// Findings are ranked by the share of step time they explain; notices (which
// explain no time) come last.
//
// A rule fires only on what its data source honestly supports. With
// `Source::kHost` that is the host-side breakdown: the input pipeline's share,
// the instrumentation's health, and a notice of what a GPU source would add.
// Thresholds and their origins are listed in docs/diagnosis.md.
//
// Example:
//
//   for (const gpuscope::Finding& f : gpuscope::Diagnose(session.Summarize())) {
//     std::cout << gpuscope::SeverityName(f.severity) << ": " << f.title << "\n"
//               << "  " << f.recommendation << "\n";
//   }

#ifndef GPUSCOPE_DIAGNOSE_H_
#define GPUSCOPE_DIAGNOSE_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuscope/summary.h"

namespace gpuscope {

enum class Severity : uint8_t {
  kInfo = 0,      // a notice: nothing is wrong, but something is worth knowing
  kModerate = 1,  // worth fixing
  kHigh = 2,      // the first thing to fix
};

// "info", "moderate", "high".
std::string_view SeverityName(Severity severity);

// Finding
//
// One diagnosis. `id` is stable across releases (scripts may match on it).
struct Finding {
  std::string id;              // "input-bound", "host-only", ...
  std::string title;           // one line, for people
  Severity severity = Severity::kInfo;
  double share = 0;            // fraction of step time it explains, 0..1
  std::vector<std::pair<std::string, double>> evidence;  // the numbers it rests on
  std::string recommendation;  // what to do, naming the concrete knobs
  std::string confidence;      // "high", "medium" or "low", and why it is not higher
  std::string source;          // the data source it rests on: "host", "events", "cupti"

  bool operator==(const Finding&) const = default;
};

// Input-bound thresholds: the input pipeline's share of step time (XProf).
inline constexpr double kInputBoundModerate = 0.05;
inline constexpr double kInputBoundHigh = 0.20;

// Diagnose()
//
// The findings for `summary`, ranked. Deterministic; cheap (no allocation
// beyond the result).
std::vector<Finding> Diagnose(const Summary& summary);

// FindingsToJson()
//
// The findings as a JSON array of objects with the fields above (schema:
// docs/json-schema.md); evidence is an object of name -> number.
std::string FindingsToJson(const std::vector<Finding>& findings);

}  // namespace gpuscope

#endif  // GPUSCOPE_DIAGNOSE_H_
