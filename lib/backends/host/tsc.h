// The time-stamp counter as the hot path's clock.
//
// Reading CLOCK_MONOTONIC costs about 23 ns even through the vDSO; `rdtsc`
// costs a few. Where the TSC is a trustworthy clock, sessions stamp scopes in
// TSC ticks and the aggregator converts ticks to CLOCK_MONOTONIC nanoseconds
// off the hot path, with a rate calibrated against CLOCK_MONOTONIC when the
// first session starts (about 2 ms) and refined by the background worker over
// an ever longer baseline.
//
// Trustworthy means: x86-64, the kernel itself uses the TSC as its
// clocksource (it checked that the TSC is invariant and synchronized across
// CPUs), and reading it is faster than clock_gettime (it is not trapped by a
// hypervisor). Otherwise, or with GPUSCOPE_CLOCK=monotonic, sessions read
// CLOCK_MONOTONIC. GPUSCOPE_CLOCK=tsc skips the clocksource check (tests).

#ifndef GPUSCOPE_LIB_BACKENDS_HOST_TSC_H_
#define GPUSCOPE_LIB_BACKENDS_HOST_TSC_H_

#include <atomic>
#include <cstdint>
#include <string>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace gpuscope::internal {

inline int64_t ReadTsc() noexcept {
#if defined(__x86_64__)
  return static_cast<int64_t>(__rdtsc());
#else
  return 0;
#endif
}

class TscClock {
 public:
  // The process's TSC clock, calibrated on first call, or nullptr when the
  // TSC is not used here. `description` (optional) says which clock the
  // hot path reads and why.
  static const TscClock* Get(std::string* description = nullptr);

  // CLOCK_MONOTONIC nanoseconds at TSC reading `ticks`. Thread-safe.
  int64_t ToNs(int64_t ticks) const noexcept {
    const double rate = ns_per_tick_.load(std::memory_order_relaxed);
    return mono0_ + static_cast<int64_t>(static_cast<double>(ticks - tsc0_) * rate);
  }

  // Re-estimates the rate over the baseline from calibration to now: the
  // error shrinks as the baseline grows. Cheap (a few clock reads); the
  // background worker calls it. Thread-safe.
  void Refine() const noexcept;

  double ns_per_tick() const noexcept { return ns_per_tick_.load(std::memory_order_relaxed); }

  // Use Get(); public for the calibration in tsc.cc.
  TscClock(int64_t tsc0, int64_t mono0, double ns_per_tick)
      : tsc0_(tsc0), mono0_(mono0), ns_per_tick_(ns_per_tick) {}

 private:
  const int64_t tsc0_;
  const int64_t mono0_;
  mutable std::atomic<double> ns_per_tick_;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_HOST_TSC_H_
