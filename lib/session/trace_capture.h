// A live session's trace as a value, for the Chrome trace encoder
// (export/chrome_trace.h), which reads this and nothing else of the session.

#ifndef GPUSCOPE_LIB_SESSION_TRACE_CAPTURE_H_
#define GPUSCOPE_LIB_SESSION_TRACE_CAPTURE_H_

#include "core/trace_steps.h"
#include "gpuscope/session.h"

namespace gpuscope::internal {

// CaptureTrace()
//
// The session's kept steps (Options::trace_steps), pumped first so that a
// step that has ended is in it, with its phase names, launch threshold and
// rank. Copied under the aggregator lock, for the caller to encode outside
// it. Thread-safe; empty in a forked child.
TraceCapture CaptureTrace(const Session& session);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_SESSION_TRACE_CAPTURE_H_
