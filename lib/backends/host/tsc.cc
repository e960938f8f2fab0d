#include "backends/host/tsc.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "backends/host/clock.h"

namespace gpuscope::internal {
namespace {

struct Pair {
  int64_t tsc;
  int64_t mono;
};

// A (TSC, CLOCK_MONOTONIC) pair read as close together as this machine
// allows: the monotonic read bracketed by two TSC reads, best of several.
Pair ReadPair() {
  Pair best{0, 0};
  int64_t best_width = INT64_MAX;
  for (int i = 0; i < 7; ++i) {
    const int64_t a = ReadTsc();
    const int64_t mono = ReadMonotonicNs();
    const int64_t b = ReadTsc();
    if (b - a < best_width) {
      best_width = b - a;
      best = {a + (b - a) / 2, mono};
    }
  }
  return best;
}

std::string ClockSource() {
  std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  std::getline(in, source);
  return std::string(absl::StripAsciiWhitespace(source));
}

// Nanoseconds per call of `read`, over a short loop.
template <typename Fn>
double CostNs(Fn read) {
  int64_t sink = 0;
  const int64_t t0 = ReadMonotonicNs();
  for (int i = 0; i < 256; ++i) sink += read();
  const int64_t t1 = ReadMonotonicNs();
  volatile int64_t keep = sink;
  (void)keep;
  return static_cast<double>(t1 - t0) / 256.0;
}

// The cost of each clock, the best of several interleaved loops: one loop
// that an interrupt or a preemption lands in (a loaded machine, a profiler
// sampling) would otherwise make the TSC look no faster than
// clock_gettime, and the process would read CLOCK_MONOTONIC for good.
struct Costs {
  double tsc = 1e9;
  double mono = 1e9;
};
Costs ClockCosts() {
  Costs best;
  for (int i = 0; i < 9; ++i) {
    best.tsc = std::min(best.tsc, CostNs([] { return ReadTsc(); }));
    best.mono = std::min(best.mono, CostNs([] { return ReadMonotonicNs(); }));
  }
  return best;
}

const TscClock* Calibrate(std::string* description);

struct Calibrated {
  const TscClock* clock = nullptr;
  std::string description;
};

}  // namespace

const TscClock* TscClock::Get(std::string* description) {
  static const Calibrated* calibrated = [] {
    auto* c = new Calibrated();  // leaked on purpose: used until the process ends
    c->clock = Calibrate(&c->description);
    return c;
  }();
  if (description != nullptr) *description = calibrated->description;
  return calibrated->clock;
}

void TscClock::Refine() const noexcept {
  const Pair now = ReadPair();
  const int64_t ticks = now.tsc - tsc0_;
  const int64_t ns = now.mono - mono0_;
  if (ticks <= 0 || ns < 10'000'000) return;  // keep the calibration until the baseline is longer
  const double rate = static_cast<double>(ns) / static_cast<double>(ticks);
  const double old = ns_per_tick_.load(std::memory_order_relaxed);
  if (rate > old * 0.9 && rate < old * 1.1) ns_per_tick_.store(rate, std::memory_order_relaxed);
}

namespace {

const TscClock* Calibrate(std::string* description) {
#if !defined(__x86_64__)
  *description = "CLOCK_MONOTONIC (no usable cycle counter on this architecture)";
  return nullptr;
#else
  const char* env = std::getenv("GPUSCOPE_CLOCK");
  const std::string choice = env == nullptr ? "" : absl::AsciiStrToLower(env);
  if (choice == "monotonic") {
    *description = "CLOCK_MONOTONIC (GPUSCOPE_CLOCK=monotonic)";
    return nullptr;
  }
  if (choice != "tsc") {
    const std::string source = ClockSource();
    if (source != "tsc") {
      *description = absl::StrFormat(
          "CLOCK_MONOTONIC (the kernel's clocksource is '%s', not 'tsc': the TSC may not be "
          "invariant or synchronized here)",
          source.empty() ? "unknown" : source);
      return nullptr;
    }
  }
  const Costs costs = ClockCosts();
  if (costs.tsc >= costs.mono) {
    *description = absl::StrFormat(
        "CLOCK_MONOTONIC (reading the TSC costs %.0f ns here, no less than clock_gettime)",
        costs.tsc);
    return nullptr;
  }
  // Calibrate over about 2 ms: with pairs accurate to tens of nanoseconds the
  // rate is within about 1e-5 at once, and Refine() improves it from there.
  const Pair p0 = ReadPair();
  Pair p1 = ReadPair();
  while (p1.mono - p0.mono < 2'000'000) p1 = ReadPair();
  if (p1.tsc <= p0.tsc) {
    *description = "CLOCK_MONOTONIC (the TSC did not advance during calibration)";
    return nullptr;
  }
  const double ns_per_tick =
      static_cast<double>(p1.mono - p0.mono) / static_cast<double>(p1.tsc - p0.tsc);
  if (ns_per_tick < 0.05 || ns_per_tick > 10) {  // outside 0.1 to 20 GHz: not a clock we trust
    *description =
        absl::StrFormat("CLOCK_MONOTONIC (implausible TSC rate %.3f GHz)", 1 / ns_per_tick);
    return nullptr;
  }
  *description =
      absl::StrFormat("TSC at %.3f GHz, calibrated against CLOCK_MONOTONIC", 1 / ns_per_tick);
  return new TscClock(p0.tsc, p0.mono, ns_per_tick);
#endif
}

}  // namespace
}  // namespace gpuscope::internal
