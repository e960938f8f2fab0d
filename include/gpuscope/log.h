// File: gpuscope/log.h
// -----------------------------------------------------------------------------
//
// gpuscope says what it cannot do (a data source it had to lower, a misuse
// it recovered from) once, through one sink. By default the sink writes one
// line to stderr, prefixed "gpuscope: ". The environment variable GPUSCOPE_LOG
// sets the threshold: "off", "error", "warning" (default) or "info".
//
// Example:
//
//   gpuscope::SetLogSink([](gpuscope::LogLevel level, std::string_view msg) {
//     MyLogger(level).Write(msg);
//   });

#ifndef GPUSCOPE_LOG_H_
#define GPUSCOPE_LOG_H_

#include <functional>
#include <string_view>

namespace gpuscope {

enum class LogLevel : int { kInfo = 0, kWarning = 1, kError = 2 };

using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// SetLogSink()
//
// Routes gpuscope's messages to `sink` (an empty function restores stderr).
// Thread-safe. The sink is called from the thread that noticed the problem,
// often the background worker, never from inside a scope's begin or end; it
// must not call back into gpuscope.
void SetLogSink(LogSink sink);

}  // namespace gpuscope

#endif  // GPUSCOPE_LOG_H_
