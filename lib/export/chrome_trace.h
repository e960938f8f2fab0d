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

// ChromeTraceJson()
//
// `steps` (oldest first) as a Chrome trace JSON object; with `rank`, its
// process names begin "rank N: " and otherData says the rank. `name_of` gives a
// phase id's name; gaps between device activity shorter than
// `launch_threshold_ns` are labeled "launch".
std::string ChromeTraceJson(const std::vector<const TraceStep*>& steps,
                            const std::optional<RankIdentity>& rank,
                            const std::function<std::string_view(uint16_t)>& name_of,
                            int64_t launch_threshold_ns);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_EXPORT_CHROME_TRACE_H_
