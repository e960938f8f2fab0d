// The TSC clock: converted times agree with CLOCK_MONOTONIC, and a session
// stamping in TSC ticks reports durations a CLOCK_MONOTONIC bracket confirms.
// main() sets GPUSCOPE_CLOCK=tsc so the TSC path runs wherever the CPU has
// one that is faster to read than clock_gettime; otherwise the tests skip.

#include "backends/host/tsc.h"

#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>

#include "backends/host/clock.h"
#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

const TscClock* TscOrSkip() {
  std::string why;
  const TscClock* tsc = TscClock::Get(&why);
  if (tsc == nullptr) std::fprintf(stderr, "no TSC clock here: %s\n", why.c_str());
  return tsc;
}

TEST(TscTest, ConvertedTimeMatchesMonotonicClock) {
  const TscClock* tsc = TscOrSkip();
  if (tsc == nullptr) GTEST_SKIP() << "the TSC is not usable as a clock on this machine";
  for (int i = 0; i < 5; ++i) {
    const int64_t before = ReadMonotonicNs();
    const int64_t converted = tsc->ToNs(ReadTsc());
    const int64_t after = ReadMonotonicNs();
    // Within the bracket, give or take calibration error (tens of microseconds at most).
    EXPECT_GE(converted, before - 50'000);
    EXPECT_LE(converted, after + 50'000);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST(TscTest, RefinementKeepsTheRateAndImprovesLongIntervals) {
  const TscClock* tsc = TscOrSkip();
  if (tsc == nullptr) GTEST_SKIP() << "the TSC is not usable as a clock on this machine";
  const double initial = tsc->ns_per_tick();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  tsc->Refine();
  EXPECT_NEAR(tsc->ns_per_tick(), initial, initial * 1e-3);
  // A 100 ms interval measured both ways agrees within 0.1 %.
  const int64_t t0 = ReadTsc(), m0 = ReadMonotonicNs();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int64_t t1 = ReadTsc(), m1 = ReadMonotonicNs();
  const double tsc_ns = static_cast<double>(tsc->ToNs(t1) - tsc->ToNs(t0));
  EXPECT_NEAR(tsc_ns, static_cast<double>(m1 - m0), 1e-3 * static_cast<double>(m1 - m0) + 2000);
}

TEST(TscTest, SessionDurationsAgreeWithAMonotonicBracket) {
  if (TscOrSkip() == nullptr) GTEST_SKIP() << "the TSC is not usable as a clock on this machine";
  Session session;
  int64_t bracket = 0;
  for (int i = 0; i < 3; ++i) {
    const int64_t m0 = MonotonicNowNs();
    {
      StepScope step(session);
      PhaseScope p(session, Phase::kData);
      std::this_thread::sleep_for(std::chrono::milliseconds(15));
    }
    bracket = std::max(bracket, MonotonicNowNs() - m0);
  }
  const Summary s = session.Summarize();
  ASSERT_EQ(s.steps, 3);
  EXPECT_GE(s.step_time.min, 0.015);  // the sleep is a lower bound
  EXPECT_LE(s.step_time.max * 1e9, static_cast<double>(bracket) * 1.001 + 2000);
  EXPECT_LE(s.FindPhase("data")->time.max, s.step_time.max);
  EXPECT_GE(s.FindPhase("data")->time.min, 0.015);
}

}  // namespace
}  // namespace gpuscope::internal

int main(int argc, char** argv) {
  setenv("GPUSCOPE_CLOCK", "tsc", 1);  // before the first session calibrates
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
