#include "base/log.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"

namespace gpuscope {
namespace {

// Minimum level that reaches the sink; kError + 1 means "off".
int ThresholdFromEnvironment() {
  const char* env = std::getenv("GPUSCOPE_LOG");
  if (env == nullptr) return static_cast<int>(LogLevel::kWarning);
  std::string value = absl::AsciiStrToLower(env);
  if (value == "off" || value == "none" || value == "0")
    return static_cast<int>(LogLevel::kError) + 1;
  if (value == "error") return static_cast<int>(LogLevel::kError);
  if (value == "info" || value == "debug" || value == "all")
    return static_cast<int>(LogLevel::kInfo);
  return static_cast<int>(LogLevel::kWarning);
}

struct LogState {
  // Protects `sink` and `seen_keys`. Leaf lock: nothing else is taken while
  // it is held, and the sink is called outside it.
  std::mutex mu;
  std::shared_ptr<const LogSink> sink;
  std::set<std::string, std::less<>> seen_keys;
  const int threshold = ThresholdFromEnvironment();
};

// Leaked on purpose: messages may be logged from the background worker while
// static destructors run at exit.
LogState& State() {
  static LogState* state = new LogState();
  return *state;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}

}  // namespace

void SetLogSink(LogSink sink) {
  LogState& state = State();
  std::shared_ptr<const LogSink> next;
  if (sink) next = std::make_shared<const LogSink>(std::move(sink));
  std::lock_guard<std::mutex> lock(state.mu);
  state.sink = std::move(next);
}

namespace internal {

void Log(LogLevel level, std::string_view message) {
  LogState& state = State();
  if (static_cast<int>(level) < state.threshold) return;
  std::shared_ptr<const LogSink> sink;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    sink = state.sink;
  }
  if (sink) {
    (*sink)(level, message);
    return;
  }
  std::fprintf(stderr, "gpuscope: %s: %.*s\n", LevelName(level), static_cast<int>(message.size()),
               message.data());
}

void LogOnce(std::string_view key, LogLevel level, std::string_view message) {
  LogState& state = State();
  {
    std::lock_guard<std::mutex> lock(state.mu);
    if (!state.seen_keys.emplace(key).second) return;
  }
  Log(level, message);
}

}  // namespace internal
}  // namespace gpuscope

namespace gpuscope::internal {

// Called in a forked child: a parent thread may have held the log lock at
// the fork, and it would never be released in the child.
void ResetLogAfterFork() {
  LogState& state = State();
  new (&state.mu) std::mutex();
}

}  // namespace gpuscope::internal
