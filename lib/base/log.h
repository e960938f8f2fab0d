// Internal logging: every message gpuscope prints goes through here, to the
// sink set with gpuscope::SetLogSink() (stderr by default), filtered by the
// GPUSCOPE_LOG threshold. Never call these from a scope's begin or end.

#ifndef GPUSCOPE_LIB_BASE_LOG_H_
#define GPUSCOPE_LIB_BASE_LOG_H_

#include <string_view>

#include "gpuscope/log.h"

namespace gpuscope::internal {

// Log()
//
// Sends `message` to the sink if `level` passes the threshold. Thread-safe.
void Log(LogLevel level, std::string_view message);

// LogOnce()
//
// As Log(), but only the first time `key` is seen in this process: for
// conditions that would otherwise repeat every step ("CUPTI is held by another
// profiler", "a scope was ended out of order").
void LogOnce(std::string_view key, LogLevel level, std::string_view message);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BASE_LOG_H_
