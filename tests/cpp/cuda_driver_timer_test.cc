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

#include "fakes/fake_cuda.h"
#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"

namespace gpuscope {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

void SleepMs(int ms) { std::this_thread::sleep_for(milliseconds(ms)); }

// Waits until the worker has armed the timer (it needs one pass after the
// recording thread has a context).
void RecordUntilArmed(Session& s) {
  for (int i = 0; i < 2000 && s.Summarize().gpu_steps == 0; ++i) {
    {
      StepScope step(s);
    }
    SleepMs(1);
  }
}

// One test with several stages, in order: the fake driver is process-wide
// state (ctest runs each TEST in a process of its own).
TEST(CudaDriverTimerTest, EndToEndAgainstAFakeDriver) {
  // Before any context exists on the recording thread: events source chosen,
  // but nothing to mark yet.
  // A window of 8: the starved steps below push the empty arming steps out.
  Session session(Options{.window = 8, .flush_interval_ms = 1, .stream = 0});
  EXPECT_EQ(session.source(), Source::kEvents) << session.Summarize().source_reason;
  {
    StepScope step(session);
  }
  EXPECT_EQ(fake_cuda_records(), 0);

  // "torch creates its context": the next scopes note it, the worker arms.
  fake_cuda_create_context();
  RecordUntilArmed(session);
  ASSERT_GT(session.Summarize().gpu_steps, 0) << "the timer never armed";

  // A starved loop: 20 ms of data, then a 10 ms kernel the host waits for.
  for (int i = 0; i < 8; ++i) {
    StepScope step(session);
    {
      PhaseScope p(session, Phase::kData);
      SleepMs(20);
    }
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
  // The GPU is idle during data (20 of about 32 ms a step) and never in
  // forward, which waits for its kernel: the idle time is charged to data,
  // and most of data's time is idle. (Sleeps overrun on a loaded machine, so
  // only ratios are checked.)
  ASSERT_EQ(s.gpu_steps, 8);
  const double data_idle_s = s.idle_by_cause.at("data") / 100 * s.window_time;
  EXPECT_GT(data_idle_s, 0.8 * s.FindPhase("data")->total);
  EXPECT_EQ(s.idle_by_cause.count("forward"), 0u);
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
  EXPECT_EQ(fake_cuda_init_calls(), 0) << "gpuscope must never initialize CUDA itself";
  EXPECT_EQ(fake_cuda_push_balance(), 0) << "every context push is popped";
}

// A process that drives two GPUs from one thread: the session's stream is
// device 0's default stream; a phase names a stream of device 1 while device
// 0 is still current. Each context gets its own events (an event recorded on
// another context's stream fails), and the summary has both devices.
TEST(CudaDriverTimerTest, StreamsOfTwoDevicesInOneSession) {
  fake_cuda_set_device(1);     // the framework touched device 1 ...
  fake_cuda_create_context();  // ... and device 0 is current again
  const uintptr_t stage2 = fake_cuda_create_stream(1);
  Session session(Options{.window = 8, .flush_interval_ms = 1, .stream = 0});
  for (int i = 0; i < 2000 && session.Summarize().devices.size() < 2; ++i) {
    StepScope step(session);
    PhaseScope p(session, "stage2", Stream(stage2));
    SleepMs(1);
  }
  ASSERT_EQ(session.Summarize().devices.size(), 2u) << "device 1's context was never armed";
  for (int i = 0; i < 8; ++i) {
    StepScope step(session);
    {
      PhaseScope p(session, Phase::kData);
      SleepMs(10);
    }
    {
      PhaseScope p(session, "stage2", Stream(stage2));
      fake_cuda_launch(stage2, 10'000'000);  // device 1 works 10 ms; the host waits
      SleepMs(12);
    }
  }
  // Until the worker has resolved every step's events on both devices (a
  // fixed wait was too short under TSan with other tests running: device 0
  // then had unresolved steps).
  Summary s = session.Summarize();
  for (int i = 0; i < 1000; ++i) {
    if (s.devices.size() == 2 && s.devices[0].gpu_steps == 8 && s.devices[1].gpu_steps == 8) break;
    SleepMs(5);
    s = session.Summarize();
  }
  EXPECT_EQ(s.source, Source::kEvents) << s.source_reason;
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0].device, 0);
  EXPECT_EQ(s.devices[1].device, 1);
  EXPECT_EQ(s.devices[0].gpu_steps, 8);
  EXPECT_EQ(s.devices[1].gpu_steps, 8);
  // Both devices idle through data (about 10 of 22 ms a step); device 1
  // then works 10 ms. (Device 0's bound cannot tell its stream's quiet tail
  // from work: the step spans it.) Loose bounds: sleeps overrun.
  const double data_pct = 100 * s.FindPhase("data")->total / s.window_time;
  for (const DeviceStats& d : s.devices) {
    EXPECT_GT(*d.gpu_idle_pct, 0.8 * data_pct) << "device " << d.device;
  }
  EXPECT_LT(*s.devices[1].gpu_idle_pct, 100 - 100 * 8 * 0.010 / s.window_time);
  const PhaseStats* stage = s.FindPhase("stage2");
  ASSERT_NE(stage, nullptr);
  EXPECT_GT(stage->device.p50, 0.009);
  EXPECT_LT(stage->device.p50, 0.030);
  EXPECT_EQ(fake_cuda_wrong_context_records(), 0)
      << "an event was recorded on another context's stream";
  session.Close();
  EXPECT_EQ(fake_cuda_push_balance(), 0);
}

TEST(CudaDriverTimerTest, ClosingDestroysEveryEventOfEveryContext) {
  fake_cuda_set_device(1);
  fake_cuda_create_context();
  const uintptr_t other = fake_cuda_create_stream(1);
  {
    Session session(Options{.flush_interval_ms = 1, .stream = 0});
    for (int i = 0; i < 2000 && session.Summarize().devices.size() < 2; ++i) {
      StepScope step(session);
      PhaseScope p(session, Phase::kForward, Stream(other));
      SleepMs(1);
    }
    ASSERT_EQ(session.Summarize().devices.size(), 2u);
    EXPECT_GT(fake_cuda_live_events(), 0);
  }
  EXPECT_EQ(fake_cuda_live_events(), 0);
}

TEST(CudaDriverTimerTest, RecordsFailingPassAfterPassLowerTheSource) {
  fake_cuda_create_context();
  Session session(Options{.flush_interval_ms = 1, .stream = 0});
  RecordUntilArmed(session);
  ASSERT_EQ(session.source(), Source::kEvents);
  fake_cuda_fail_records(400);  // as if the stream belonged to another context
  for (int i = 0; i < 200 && session.source() == Source::kEvents; ++i) {
    {
      StepScope step(session);
    }
    SleepMs(2);
  }
  fake_cuda_fail_records(0);
  EXPECT_EQ(session.source(), Source::kHost);
  EXPECT_THAT(session.Summarize().source_reason,
              HasSubstr("cuEventRecord keeps failing (CUDA_ERROR_INVALID_HANDLE)"));
}

TEST(CudaDriverTimerTest, NoMarkersUntilTheFrameworkInitializedCuda) {
  // Nothing initializes CUDA here: gpuscope waits, and never does it itself.
  Session session(Options{.flush_interval_ms = 1, .stream = 0});
  EXPECT_EQ(session.source(), Source::kEvents);
  for (int i = 0; i < 20; ++i) {
    {
      StepScope step(session);
    }
    SleepMs(1);
  }
  EXPECT_EQ(session.Summarize().gpu_steps, 0);
  EXPECT_EQ(fake_cuda_records(), 0);
  EXPECT_EQ(fake_cuda_init_calls(), 0);
}

// MFU in C++ without Options::device_name: the peak comes from the table's
// row for the GPU the driver names, once the framework has initialized CUDA
// (before that, FLOP/s but no MFU, and the reason).
TEST(CudaDriverTimerTest, MfuTakesThePeakOfTheGpuTheDriverNames) {
  Session session(Options{.flush_interval_ms = 1, .stream = 0, .flops_per_step = 1e12});
  for (int i = 0; i < 3; ++i) StepScope step(session);
  Summary before = session.Summarize();
  ASSERT_TRUE(before.efficiency.has_value());
  EXPECT_FALSE(before.efficiency->mfu.has_value());
  EXPECT_THAT(before.efficiency->reason, HasSubstr("the GPU model is unknown"));
  fake_cuda_set_name(0, "NVIDIA H100 80GB HBM3");
  fake_cuda_create_context();
  for (int i = 0; i < 3; ++i) StepScope step(session);
  Summary after = session.Summarize();
  ASSERT_TRUE(after.efficiency.has_value());
  EXPECT_TRUE(after.efficiency->mfu.has_value()) << after.efficiency->reason;
  EXPECT_THAT(after.efficiency->peak_source, HasSubstr("table: H100 SXM, bf16 dense"));
  EXPECT_DOUBLE_EQ(*after.efficiency->peak_flops, 989.5e12);
}

TEST(CudaDriverTimerTest, ClosingDestroysEveryEvent) {
  fake_cuda_create_context();
  {
    Session session(Options{.flush_interval_ms = 1, .stream = 0});
    RecordUntilArmed(session);
    EXPECT_GT(fake_cuda_live_events(), 0);
  }
  EXPECT_EQ(fake_cuda_live_events(), 0);
}

TEST(CudaDriverTimerTest, ADriverThatFailsMeansHostAndNamesTheError) {
  fake_cuda_fail_version(100);
  Session session;
  fake_cuda_fail_version(0);
  EXPECT_EQ(session.source(), Source::kHost);
  EXPECT_THAT(
      session.Summarize().source_reason,
      HasSubstr(
          "cuDriverGetVersion(&version) failed: CUDA_ERROR_NO_DEVICE at cuda_driver_timer.cc:"));
}

TEST(CudaDriverTimerTest, AnErrorTheDriverCannotNameIsGivenByNumber) {
  // A code newer than the driver's names (within CUresult's range):
  // cuGetErrorName refuses it, as the driver does a code it does not know.
  fake_cuda_fail_version(1000);
  Session session;
  fake_cuda_fail_version(0);
  EXPECT_EQ(session.source(), Source::kHost);
  EXPECT_THAT(session.Summarize().source_reason,
              HasSubstr("cuDriverGetVersion(&version) failed: CUDA error 1000 at "));
}

}  // namespace
}  // namespace gpuscope

int main(int argc, char** argv) {
  setenv("GPUSCOPE_LIBCUDA", FAKE_LIBCUDA_PATH, 1);
  // The events timer alone: a real CUPTI (the toolkit's) must not load
  // against the fake driver. It did, found the fake's cuDevice* exports and
  // went far enough to leave LeakSanitizer's DTLS tracking corrupt at exit.
  setenv("GPUSCOPE_CUPTI", "off", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
