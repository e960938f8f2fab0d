// File: gpuscope/clock.h
// -----------------------------------------------------------------------------
//
// The host clock every gpuscope time is read from. By default a session
// stamps scopes with the CPU's time-stamp counter where it is a trustworthy
// clock (x86-64 with the kernel using it as clocksource), converted to
// CLOCK_MONOTONIC nanoseconds off the hot path; elsewhere, or with
// GPUSCOPE_CLOCK=monotonic, it reads CLOCK_MONOTONIC (through the vDSO: no
// system call). Every time in a Summary is on CLOCK_MONOTONIC either way. A
// session can be given another `Clock` in `Options::clock`; tests use
// `ManualClock` to make step times exact.
//
// Example:
//
//   auto clock = std::make_shared<gpuscope::ManualClock>();
//   gpuscope::Session session(gpuscope::Options{.window = 64, .clock = clock});
//   {
//     gpuscope::StepScope step(session);
//     clock->Advance(30'000'000);   // this step lasts exactly 30 ms
//   }

#ifndef GPUSCOPE_CLOCK_H_
#define GPUSCOPE_CLOCK_H_

#include <atomic>
#include <cstdint>

namespace gpuscope {

// Clock
//
// A source of monotonic nanoseconds. `NowNs()` is called on the recording
// thread's hot path and by the background worker, so implementations must be
// thread-safe, must not block, allocate or throw, and must never go backwards.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNs() const noexcept = 0;
};

// MonotonicNowNs()
//
// CLOCK_MONOTONIC in nanoseconds: the clock a session uses when
// `Options::clock` is null. About 20-25 ns per call on current x86 Linux.
int64_t MonotonicNowNs() noexcept;

// ManualClock
//
// A clock that only moves when told to. Thread-safe. Meant for tests and
// simulations; starts at `start_ns`.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ns = 1'000'000'000) : now_ns_(start_ns) {}

  int64_t NowNs() const noexcept override { return now_ns_.load(std::memory_order_acquire); }

  // ManualClock::Advance()
  //
  // Moves the clock forward by `delta_ns` (negative values are ignored: a
  // clock never goes backwards).
  void Advance(int64_t delta_ns) noexcept {
    if (delta_ns > 0) now_ns_.fetch_add(delta_ns, std::memory_order_acq_rel);
  }

 private:
  std::atomic<int64_t> now_ns_;
};

}  // namespace gpuscope

#endif  // GPUSCOPE_CLOCK_H_
