// The Chrome trace encoding of the last steps' timelines (docs/trace.md).

#ifndef GPUSCOPE_LIB_EXPORT_CHROME_TRACE_H_
#define GPUSCOPE_LIB_EXPORT_CHROME_TRACE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/trace_steps.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

// ToChromeTrace()
//
// The captured steps (oldest first) as a Chrome trace JSON object; with a
// rank, its process names begin "rank N: " and otherData says the rank. Gaps
// between device activity shorter than the capture's launch threshold are
// labeled "launch".
std::string ToChromeTrace(const TraceCapture& capture);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_EXPORT_CHROME_TRACE_H_
