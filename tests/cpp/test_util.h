// Helpers shared by the C++ tests: sessions on a ManualClock, so that every
// duration in a test is exact.

#ifndef GPUSCOPE_TESTS_CPP_TEST_UTIL_H_
#define GPUSCOPE_TESTS_CPP_TEST_UTIL_H_

#include <cstdint>
#include <memory>

#include "gpuscope/gpuscope.h"

namespace gpuscope::testing {

inline constexpr int64_t kMs = 1'000'000;
inline constexpr int64_t kUs = 1'000;

struct ClockedSession {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::unique_ptr<Session> session;

  explicit ClockedSession(Options options = {}) {
    options.clock = clock;
    session = std::make_unique<Session>(std::move(options));
  }
  Session& operator*() { return *session; }
  Session* operator->() { return session.get(); }

  // Runs `ns` of simulated work inside phase `phase`.
  template <typename P>
  void Phase(P phase, int64_t ns) {
    PhaseScope p(*session, phase);
    clock->Advance(ns);
  }
};

}  // namespace gpuscope::testing

#endif  // GPUSCOPE_TESTS_CPP_TEST_UTIL_H_
