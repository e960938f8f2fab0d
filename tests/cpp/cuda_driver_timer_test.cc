// The CUDA events timer's own code (dlopen, entry points, context pickup,
// calibration, event pool, error mapping) against a fake driver loaded the
// way libcuda.so.1 would be: main() points GPUSCOPE_LIBCUDA at it.
//
// These tests use the real clock and sleep; assertions are bounds with wide
// margins, never exact times.

#include <dlfcn.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"

extern "C" {
void fake_cuda_create_context();
void fake_cuda_fail_init(int result);
void fake_cuda_set_sticky_error(int result);
int64_t fake_cuda_live_events();
int64_t fake_cuda_records();
void fake_cuda_launch(uintptr_t stream, int64_t duration_ns);
}

namespace gpuscope {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;

void SleepMs(int ms) { std::this_thread::sleep_for(milliseconds(ms)); }

// Waits until the worker has armed the timer (it needs one pass after the
// recording thread has a context).
void RecordUntilArmed(Session& s) {
  for (int i = 0; i < 2000 && s.Summarize().gpu_steps == 0; ++i) {
    { StepScope step(s); }
    SleepMs(1);
  }
}

// One test with several stages, in order: the fake driver is process-wide
// state (ctest runs each TEST in a process of its own).
TEST(CudaDriverTimerTest, EndToEndAgainstAFakeDriver) {
  // Before any context exists on the recording thread: events source chosen,
  // but nothing to mark yet.
  Session session(Options{.flush_interval_ms = 1});
  EXPECT_EQ(session.source(), Source::kEvents) << session.Summarize().source_reason;
  { StepScope step(session); }
  EXPECT_EQ(fake_cuda_records(), 0);

  // "torch creates its context": the next scopes note it, the worker arms.
  fake_cuda_create_context();
  RecordUntilArmed(session);
  ASSERT_GT(session.Summarize().gpu_steps, 0) << "the timer never armed";

  // A starved loop: 20 ms of data, then a 10 ms kernel the host waits for.
  for (int i = 0; i < 8; ++i) {
    StepScope step(session);
    { PhaseScope p(session, Phase::kData); SleepMs(20); }
    {
      PhaseScope p(session, Phase::kForward);
      fake_cuda_launch(0, 10'000'000);
      SleepMs(12);
    }
  }
  SleepMs(30);
  const Summary s = session.Summarize();
  EXPECT_EQ(s.source, Source::kEvents);
  ASSERT_TRUE(s.gpu_idle_pct.has_value());
  ASSERT_TRUE(s.idle_by_cause.count("data"));
  // The data phase's share of the window bounds what the truth can be; the
  // bound sits under the truth (about 60 % of these 32 ms steps, diluted by
  // the empty steps above).
  EXPECT_GT(s.idle_by_cause.at("data"), 20.0);
  EXPECT_LE(*s.gpu_idle_pct, 100.0);
  const PhaseStats* fwd = s.FindPhase("forward");
  ASSERT_NE(fwd, nullptr);
  EXPECT_GT(fwd->device.p50, 0.009);  // the kernel, seen through cuEventElapsedTime
  EXPECT_LT(fwd->device.p50, 0.030);

  // A sticky error: lowered to host once, the loop goes on.
  fake_cuda_set_sticky_error(700);
  for (int i = 0; i < 5; ++i) {
    StepScope step(session);
    PhaseScope p(session, Phase::kForward);
  }
  SleepMs(20);
  const Summary lowered = session.Summarize();
  EXPECT_EQ(lowered.source, Source::kHost);
  EXPECT_THAT(lowered.source_reason, HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  EXPECT_GT(lowered.total_steps, 8);
  fake_cuda_set_sticky_error(0);

  session.Close();
  EXPECT_EQ(session.Summarize().misuse.dropped_records, 0);
}

TEST(CudaDriverTimerTest, ClosingDestroysEveryEvent) {
  fake_cuda_create_context();
  {
    Session session(Options{.flush_interval_ms = 1});
    RecordUntilArmed(session);
    EXPECT_GT(fake_cuda_live_events(), 0);
  }
  EXPECT_EQ(fake_cuda_live_events(), 0);
}

TEST(CudaDriverTimerTest, InitFailureMeansHostAndNamesTheError) {
  fake_cuda_fail_init(100);
  Session session;
  fake_cuda_fail_init(0);
  EXPECT_EQ(session.source(), Source::kHost);
  EXPECT_THAT(session.Summarize().source_reason, HasSubstr("cuInit(0) failed: CUDA_ERROR_NO_DEVICE"));
}

}  // namespace
}  // namespace gpuscope

int main(int argc, char** argv) {
  setenv("GPUSCOPE_LIBCUDA", FAKE_LIBCUDA_PATH, 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
