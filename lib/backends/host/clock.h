// Inline host clock read for the hot path. The public interface is
// gpuscope/clock.h; this header only adds the inline CLOCK_MONOTONIC read so
// that a session without a custom clock pays no virtual call.

#ifndef GPUSCOPE_LIB_BACKENDS_HOST_CLOCK_H_
#define GPUSCOPE_LIB_BACKENDS_HOST_CLOCK_H_

#include <time.h>

#include <cstdint>

#include "gpuscope/clock.h"

namespace gpuscope::internal {

inline int64_t ReadMonotonicNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no system call
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The wall clock, seconds since the Unix epoch (stamps a person reads, never
// durations).
inline double ReadUnixSeconds() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_HOST_CLOCK_H_
