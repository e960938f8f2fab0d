// The CUPTI source's own code (dlopen, subscription policy, buffer pool,
// record parsing, correlation of launches, timestamps, clean detach) against
// a fake CUPTI loaded the way libcupti.so would be (GPUSCOPE_LIBCUPTI), with
// the fake CUDA driver for "is CUDA initialized". Built twice: against a
// CUPTI 13 fake (cuptiSubscribe_v2, timestamp callback) and, with
// FAKE_CUPTI_V1, an older one (neither).
//
// These tests use the real clock; assertions leave margins for sleeps that
// overrun, except where the numbers follow from the records alone.

#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>

#include "backends/host/clock.h"
#include "fakes/fake_cuda.h"
#include "fakes/fake_cupti.h"
#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"

namespace gpuscope {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
constexpr int64_t kMs = 1'000'000;

void SleepMs(int ms) { std::this_thread::sleep_for(milliseconds(ms)); }
int64_t Now() { return internal::ReadMonotonicNs(); }

// Runs `steps` steps: data sleeps 10 ms; forward launches a 5 ms kernel
// (an API record, then the kernel record it correlates with) and waits for
// it (a 5 ms sync record). Returns when every step has GPU numbers.
Summary StarvedLoop(Session& s, int steps) {
  static uint32_t correlation = 100;
  for (int i = 0; i < steps; ++i) {
    StepScope step(s);
    {
      PhaseScope p(s, Phase::kData);
      SleepMs(10);
    }
    PhaseScope p(s, Phase::kForward);
    // 1 ms into the phase: the older CUPTI's calibrated clock may be off by
    // microseconds (more under sanitizers), which must not move the launch
    // out of the phase.
    SleepMs(1);
    const int64_t launch = Now();
    fake_cupti_emit_api(++correlation, launch, launch + 10'000);
    fake_cupti_emit_kernel(launch + 20'000, launch + 20'000 + 5 * kMs, 0, 7, correlation);
    SleepMs(6);
    fake_cupti_emit_sync(launch + 20'000, launch + 20'000 + 5 * kMs, /*stream sync*/ 3);
    fake_cupti_emit_sync(launch, launch + 10'000,
                         /*stream waits on an event*/ 2);  // not a host sync
  }
  Summary sm;
  for (int i = 0; i < 400; ++i) {
    sm = s.Summarize();
    if (sm.gpu_steps == steps) break;
    SleepMs(5);
  }
  return sm;
}

#ifndef FAKE_CUPTI_V1

TEST(CuptiActivityTest, SubscribesByNameAndGivesExactNumbers) {
  fake_cuda_create_context();
  fake_cupti_set_kernel_name("ampere_sgemm_128x64_nn");
  Session session(Options{.window = 5, .flush_interval_ms = 1});
  ASSERT_EQ(session.source(), Source::kCupti) << session.Summarize().source_reason;
  EXPECT_STREQ(fake_cupti_subscriber_name(), "gpuscope");
  EXPECT_EQ(fake_cupti_last_allow_multiple(), 1) << "gpuscope asks to share CUPTI";
  EXPECT_EQ(fake_cupti_enabled_kinds(), 6);  // kernels, copies, memsets, syncs, runtime, driver
  const Summary s = StarvedLoop(session, 5);
  ASSERT_EQ(s.source, Source::kCupti) << s.source_reason;
  ASSERT_EQ(s.gpu_steps, 5);
  // Busy is exactly the five 5 ms kernels, whatever the sleeps took.
  const double truth = 100.0 * (1 - 5 * 0.005 / s.window_time);
  EXPECT_NEAR(*s.gpu_idle_pct, truth, 1e-6);
  EXPECT_GT(s.idle_by_cause.at("data"), 0.8 * 100 * s.FindPhase("data")->total / s.window_time);
  // The kernel is charged to forward, which launched it (correlation id).
  EXPECT_NEAR(s.FindPhase("forward")->device.p50, 0.005, 1e-9);
  ASSERT_TRUE(s.activity.has_value());
  EXPECT_DOUBLE_EQ(s.activity->kernels_per_step, 1);
  EXPECT_DOUBLE_EQ(s.activity->syncs_per_step, 1);
  EXPECT_NEAR(s.activity->sync_time_per_step, 0.005, 1e-9);
  // The kernel's name (read from the record) makes it an FP32 GEMM.
  EXPECT_NEAR(s.activity->kernel_time_per_step, 0.005, 1e-9);
  EXPECT_NEAR(s.activity->gemm_time_per_step, 0.005, 1e-9);
  EXPECT_NEAR(s.activity->fp32_gemm_time_per_step, 0.005, 1e-9);
  EXPECT_DOUBLE_EQ(s.activity->collective_time_per_step, 0);
  // The name is kept: the top kernel, launched in forward.
  ASSERT_EQ(s.top_kernels.size(), 1u);
  EXPECT_EQ(s.top_kernels[0].name, "ampere_sgemm_128x64_nn");
  EXPECT_EQ(s.top_kernels[0].kernel_class, "gemm_fp32");
  EXPECT_EQ(s.top_kernels[0].phase, "forward");
  EXPECT_NEAR(s.top_kernels[0].time_per_step, 0.005, 1e-9);
  EXPECT_DOUBLE_EQ(s.top_kernels[0].share, 1);
  // gpuscope's own cost counts the buffers CUPTI handed back.
  EXPECT_GT(s.overhead.activity_buffers, 0);
}

TEST(CuptiActivityTest, CopiesArePagedOrPinnedAndDropsAreCounted) {
  fake_cuda_create_context();
  Session session(Options{.window = 3, .flush_interval_ms = 1});
  ASSERT_EQ(session.source(), Source::kCupti);
  fake_cupti_drop(7);
  for (int i = 0; i < 3; ++i) {
    StepScope step(session);
    // 1 ms into the step: scopes are stamped on the TSC and mapped onto
    // CLOCK_MONOTONIC (the records' clock) within microseconds, so a copy
    // stamped the moment the step begins may fall just before it.
    SleepMs(1);
    const int64_t t = Now();
    fake_cupti_emit_memcpy(t, t + kMs, /*HtoD*/ 1, /*pageable*/ 1, /*device*/ 3, 4096, 0);
    fake_cupti_emit_memcpy(t + kMs, t + 2 * kMs, /*DtoH*/ 2, /*device*/ 3, /*pinned*/ 2, 4, 0);
    SleepMs(3);
  }
  Summary s;
  for (int i = 0; i < 400 && s.gpu_steps < 3; ++i, SleepMs(5)) s = session.Summarize();
  ASSERT_EQ(s.gpu_steps, 3);
  ASSERT_TRUE(s.activity.has_value());
  EXPECT_DOUBLE_EQ(s.activity->copies_per_step, 2);
  EXPECT_DOUBLE_EQ(s.activity->pageable_copies_per_step, 1);
  EXPECT_DOUBLE_EQ(s.activity->h2d_bytes_per_step, 4096);
  EXPECT_DOUBLE_EQ(s.activity->d2h_bytes_per_step, 4);
  EXPECT_EQ(s.activity->dropped_records, 7);
}

TEST(CuptiActivityTest, AProfilerHoldingCuptiMeansEventsAndItIsNamed) {
  fake_cuda_create_context();
  fake_cupti_hold("CUPTI for torch.profiler");
  Session session(Options{.flush_interval_ms = 1, .stream = 0});
  EXPECT_EQ(session.source(), Source::kEvents);
  EXPECT_THAT(
      session.Summarize().source_reason,
      HasSubstr("MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (CUPTI is held by CUPTI for torch.profiler)"));
  fake_cupti_release();
}

TEST(CuptiActivityTest, AFailedCallIsNamedInCuptisWordsAndLeavesCuptiAsItWas) {
  fake_cuda_create_context();
  fake_cupti_fail_enable(15);  // CUPTI_ERROR_NOT_INITIALIZED
  {
    Session session(Options{.flush_interval_ms = 1, .stream = 0});
    EXPECT_EQ(session.source(), Source::kEvents);
    // The call (with the kind it enabled), CUPTI's name for the error, and
    // where: the convention every vendor call follows.
    EXPECT_THAT(
        session.Summarize().source_reason,
        HasSubstr(
            "cuptiActivityEnable(10) failed: CUPTI_ERROR_NOT_INITIALIZED at cupti_activity.cc:"));
    EXPECT_EQ(fake_cupti_subscribed(), 0) << "a start that failed half way unsubscribes";
    EXPECT_EQ(fake_cupti_enabled_kinds(), 0);
  }
  fake_cupti_fail_enable(12345);  // a code CUPTI cannot name: its number
  Session unnamed(Options{.flush_interval_ms = 1, .stream = 0});
  EXPECT_THAT(unnamed.Summarize().source_reason,
              HasSubstr("cuptiActivityEnable(10) failed: CUPTI error 12345 at "));
  fake_cupti_fail_enable(0);
}

TEST(CuptiActivityTest, AnInjectedProfilerIsLeftAlone) {
  fake_cuda_create_context();
  setenv("CUDA_INJECTION64_PATH", "/opt/nsight/libToolsInjection64.so", 1);
  Session session(Options{.flush_interval_ms = 1, .stream = 0});
  unsetenv("CUDA_INJECTION64_PATH");
  EXPECT_EQ(session.source(), Source::kEvents);
  EXPECT_THAT(session.Summarize().source_reason, HasSubstr("CUDA_INJECTION64_PATH is set"));
  EXPECT_EQ(fake_cupti_subscribed(), 0);
}

TEST(CuptiActivityTest, CuptiThirteenOhCannotShareSoOnlyWhenAsked) {
  fake_cuda_create_context();
  fake_cupti_set_version(130001);  // has cuptiSubscribe_v2, but one subscriber only
  {
    Session session(Options{.flush_interval_ms = 1, .stream = 0});
    EXPECT_EQ(session.source(), Source::kEvents);
    EXPECT_THAT(session.Summarize().source_reason,
                HasSubstr("allows one subscriber (sharing needs 13.2"));
    EXPECT_EQ(fake_cupti_subscribed(), 0);
  }
  Session asked(Options{.flush_interval_ms = 1, .cupti = Cupti::kOn});
  EXPECT_EQ(asked.source(), Source::kCupti);
  EXPECT_STREQ(fake_cupti_subscriber_name(), "gpuscope");
  EXPECT_EQ(fake_cupti_last_params_size(), 32u) << "13.0's CUpti_SubscriberParams";
}

TEST(CuptiActivityTest, CloseDetachesEvenWhileTheSessionLives) {
  fake_cuda_create_context();
  Session session(Options{.flush_interval_ms = 1});
  ASSERT_EQ(session.source(), Source::kCupti);
  StarvedLoop(session, 2);
  session.Close();
  EXPECT_EQ(fake_cupti_subscribed(), 0);
  EXPECT_EQ(fake_cupti_enabled_kinds(), 0);
  EXPECT_EQ(session.Summarize().gpu_steps, 2);  // what was measured stays
}

TEST(CuptiActivityTest, ClosingDetachesSoThatAProfilerCanSubscribe) {
  fake_cuda_create_context();
  {
    Session session(Options{.flush_interval_ms = 1});
    ASSERT_EQ(session.source(), Source::kCupti);
    EXPECT_EQ(fake_cupti_subscribed(), 1);
    // While gpuscope holds CUPTI, a profiler that subscribes is refused
    // (what torch.profiler meets on CUPTI before 13.2).
    CUpti_SubscriberHandle other = nullptr;
    EXPECT_EQ(cuptiSubscribe(&other, nullptr, nullptr), 39);
  }
  EXPECT_EQ(fake_cupti_subscribed(), 0);
  EXPECT_EQ(fake_cupti_enabled_kinds(), 0);
  EXPECT_EQ(fake_cupti_finalize_calls(), 0) << "never cuptiFinalize: another subscriber may exist";
  CUpti_SubscriberHandle profiler = nullptr;
  EXPECT_EQ(cuptiSubscribe(&profiler, nullptr, nullptr), 0)
      << "a profiler can subscribe after close";
  // ... and while it holds CUPTI, a new gpuscope session steps aside.
  Session later(Options{.flush_interval_ms = 1, .stream = 0});
  EXPECT_EQ(later.source(), Source::kEvents);
  fake_cupti_release();
}

TEST(CuptiActivityTest, ReleaseCuptiHandsItBackAndGoesOnWithEvents) {
  fake_cuda_create_context();
  Session session(Options{.window = 4, .flush_interval_ms = 1, .stream = 0});
  ASSERT_EQ(session.source(), Source::kCupti);
  StarvedLoop(session, 2);
  session.ReleaseCupti();
  EXPECT_EQ(session.source(), Source::kEvents);
  EXPECT_EQ(fake_cupti_subscribed(), 0);
  EXPECT_EQ(fake_cupti_enabled_kinds(), 0);
  CUpti_SubscriberHandle profiler = nullptr;
  EXPECT_EQ(cuptiSubscribe(&profiler, nullptr, nullptr), 0) << "a profiler can subscribe now";
  // The loop goes on, timed by CUDA events once the timer is armed.
  Summary s;
  for (int i = 0; i < 400 && s.gpu_steps < 4; ++i) {
    {
      StepScope step(session);
      PhaseScope p(session, Phase::kData);
      SleepMs(2);
    }
    s = session.Summarize();
  }
  EXPECT_EQ(s.source, Source::kEvents);
  EXPECT_THAT(s.source_reason, HasSubstr("CUPTI released"));
  EXPECT_EQ(s.gpu_steps, 4);
  fake_cupti_release();
}

TEST(CuptiActivityTest, NotBeforeTheFrameworkInitializedCuda) {
  Session session(Options{.flush_interval_ms = 1, .stream = 0});  // no context yet
  EXPECT_EQ(session.source(), Source::kEvents);
  EXPECT_THAT(session.Summarize().source_reason, HasSubstr("CUDA was not initialized"));
  EXPECT_EQ(fake_cupti_subscribed(), 0);
}

TEST(CuptiActivityTest, OffMeansOff) {
  fake_cuda_create_context();
  Session session(Options{.flush_interval_ms = 1, .stream = 0, .cupti = Cupti::kOff});
  EXPECT_EQ(session.source(), Source::kEvents);
  EXPECT_THAT(session.Summarize().source_reason, HasSubstr("CUPTI is off"));
  setenv("GPUSCOPE_CUPTI", "off", 1);
  Session by_env(Options{.flush_interval_ms = 1, .stream = 0});
  unsetenv("GPUSCOPE_CUPTI");
  EXPECT_EQ(by_env.source(), Source::kEvents);
}

TEST(CuptiActivityTest, OneGpuscopeSessionAtATime) {
  fake_cuda_create_context();
  Session first(Options{.flush_interval_ms = 1});
  Session second(Options{.flush_interval_ms = 1, .stream = 0});
  EXPECT_EQ(first.source(), Source::kCupti);
  EXPECT_EQ(second.source(), Source::kEvents);
}

#else  // FAKE_CUPTI_V1: CUPTI 12.8, no cuptiSubscribe_v2, no timestamp callback

TEST(CuptiV1Test, OlderCuptiOnlyWhenAsked) {
  fake_cuda_create_context();
  Session session(Options{.flush_interval_ms = 1, .stream = 0});
  EXPECT_EQ(session.source(), Source::kEvents);
  EXPECT_THAT(session.Summarize().source_reason, HasSubstr("allows one subscriber"));
  EXPECT_THAT(session.Summarize().source_reason, HasSubstr("cupti=True"));
  EXPECT_EQ(fake_cupti_subscribed(), 0);
}

TEST(CuptiV1Test, AskedForItUsesItAndCalibratesItsClock) {
  fake_cuda_create_context();
  Session session(Options{.window = 4, .flush_interval_ms = 1, .cupti = Cupti::kOn});
  ASSERT_EQ(session.source(), Source::kCupti) << session.Summarize().source_reason;
  // The fake stamps records on its own clock, 1 s ahead of CLOCK_MONOTONIC:
  // calibration maps them back (to within the calibration's few us).
  const Summary s = StarvedLoop(session, 4);
  ASSERT_EQ(s.gpu_steps, 4);
  const double truth = 100.0 * (1 - 4 * 0.005 / s.window_time);
  EXPECT_NEAR(*s.gpu_idle_pct, truth, 0.5);
  EXPECT_NEAR(s.FindPhase("forward")->device.p50, 0.005, 1e-6);
}

#endif

}  // namespace
}  // namespace gpuscope

int main(int argc, char** argv) {
  setenv("GPUSCOPE_LIBCUDA", FAKE_LIBCUDA_PATH, 1);
  setenv("GPUSCOPE_LIBCUPTI", FAKE_LIBCUPTI_PATH, 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
