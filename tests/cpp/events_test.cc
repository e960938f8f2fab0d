// The events source end to end on the simulated device: hand-computed idle
// lower bounds, backlog, idle by cause, pending steps, faults that lower the
// source to host, and no marker ever leaked.

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gpuscope/testing.h"
#include "gtest/gtest.h"
#include "sim_loop.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using ::testing::HasSubstr;
using testing::kMs;
using testing::kUs;
using testing::SimLoop;

// The starved-loop example: the host waits 30 ms in data, then the GPU works 10 ms
// while the host waits for it: the truth is 75 % idle, the events lower
// bound at least 70 %.
TEST(EventsTest, StarvedLoopIdleLowerBoundIsNearTheTruth) {
  SimLoop loop;
  for (int i = 0; i < 20; ++i) {
    loop.Step([&] {
      loop.Phase(Phase::kData, 30 * kMs);
      loop.Phase(Phase::kForward, 10 * kMs,
                 /*kernel_ns=*/10 * kMs);  // host waits as long as the kernel runs
    });
  }
  const Summary s = loop.DrainAndSummarize();
  EXPECT_EQ(s.source, Source::kEvents) << s.source_reason;
  EXPECT_THAT(s.source_reason, HasSubstr("lower bound"));
  EXPECT_EQ(s.gpu_steps, 20);
  EXPECT_EQ(s.pending_steps, 0);
  ASSERT_TRUE(s.gpu_idle_pct.has_value());
  EXPECT_DOUBLE_EQ(loop.TrueIdlePct(), 75.0);
  EXPECT_GE(*s.gpu_idle_pct, 70.0);
  EXPECT_LE(*s.gpu_idle_pct, loop.TrueIdlePct() + 1e-9);
  // The idle time is charged to the phase the host was in: data.
  ASSERT_EQ(s.idle_by_cause.count("data"), 1u);
  EXPECT_NEAR(s.idle_by_cause.at("data"), 75.0, 1e-9);
  double sum = 0;
  for (const auto& [cause, pct] : s.idle_by_cause) sum += pct;
  EXPECT_NEAR(sum, *s.gpu_idle_pct, 1e-9);
  // The GPU had drained when data began; forward's device time is its kernel.
  EXPECT_DOUBLE_EQ(s.FindPhase("data")->backlog_p50, 0.0);
  EXPECT_DOUBLE_EQ(s.FindPhase("forward")->device.p50, 0.010);
  EXPECT_DOUBLE_EQ(s.device_step_time.p50, 0.040);
}

// A saturated stream: the host enqueues 20 ms of work per 5 ms step and
// never waits, so the GPU lags further behind at every boundary.
TEST(EventsTest, SaturatedStreamHasBacklogEverywhereAndNoIdle) {
  SimLoop loop;
  for (int i = 0; i < 20; ++i) {
    loop.Step([&] {
      loop.Phase(Phase::kData, 1 * kMs);
      loop.Phase(Phase::kForward, 4 * kMs, /*kernel_ns=*/20 * kMs);
    });
  }
  // Before the GPU catches up, the steps wait for their markers.
  const Summary before = loop.session->Summarize();
  EXPECT_GT(before.pending_steps, 0);
  EXPECT_LT(before.gpu_steps, 20);
  EXPECT_EQ(before.steps, 20);  // host numbers do not wait
  const Summary s = loop.DrainAndSummarize();
  EXPECT_EQ(s.pending_steps, 0);
  EXPECT_EQ(s.gpu_steps, 20);
  // The only idle time is the first step's data phase, before any work: 1 ms of 100.
  EXPECT_DOUBLE_EQ(loop.TrueIdlePct(), 1.0);
  EXPECT_DOUBLE_EQ(*s.gpu_idle_pct, 1.0);
  EXPECT_EQ(s.idle_by_cause.size(), 1u);
  EXPECT_DOUBLE_EQ(s.idle_by_cause.at("data"), 1.0);
  EXPECT_GT(s.FindPhase("data")->backlog_p50, 0.0);
  EXPECT_GT(s.FindPhase("forward")->backlog_p50, 0.0);
}

// Kernels launched asynchronously run into the next step's data phase: the
// bound charges that time as busy and stays under the truth.
TEST(EventsTest, AsyncWorkOverlappingTheNextDataPhaseCountsAsBusy) {
  SimLoop loop;
  for (int i = 0; i < 10; ++i) {
    loop.Step([&] {
      loop.Phase(Phase::kData, 30 * kMs);
      loop.Phase(Phase::kForward, 1 * kMs, /*kernel_ns=*/12 * kMs);  // no sync
    });
  }
  const Summary s = loop.DrainAndSummarize();
  // Step 0 sees 1 ms of its kernel; each later step 11 ms of the previous
  // one and 1 ms of its own: 109 of 310 ms busy.
  const double truth = loop.TrueIdlePct();
  EXPECT_NEAR(truth, 100.0 * 201 / 310, 1e-9);
  EXPECT_LE(*s.gpu_idle_pct, truth + 1e-9);
  EXPECT_GE(*s.gpu_idle_pct, truth - 10);
  EXPECT_GT(s.FindPhase("data")->backlog_p50, 0.010);  // the previous step's kernel is running
}

// Soundness on random loops (no GPU work enqueued inside data): the events
// idle % never exceeds the true idle %.
TEST(EventsTest, IdleLowerBoundNeverExceedsTheTruthOnRandomLoops) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 40; ++trial) {
    SimLoop loop;
    const int steps = 5 + static_cast<int>(rng() % 20);
    for (int i = 0; i < steps; ++i) {
      loop.Step([&] {
        loop.Phase(Phase::kData, static_cast<int64_t>(rng() % 20) * kMs);
        const int phases = 1 + static_cast<int>(rng() % 4);
        for (int p = 0; p < phases; ++p) {
          const int64_t kernel = rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 15) * kMs;
          int64_t host =
              static_cast<int64_t>(rng() % 8) * kMs + static_cast<int64_t>(rng() % 1000) * kUs;
          if (rng() % 3 == 0) host += kernel;  // sometimes the host waits for it
          loop.Phase(static_cast<Phase>(1 + rng() % 4), host, kernel);
        }
        if (rng() % 2) loop.clock->Advance(static_cast<int64_t>(rng() % 3) * kMs);  // "other"
      });
    }
    const Summary s = loop.DrainAndSummarize();
    ASSERT_TRUE(s.gpu_idle_pct.has_value());
    ASSERT_EQ(s.gpu_steps, steps);
    EXPECT_LE(*s.gpu_idle_pct, loop.TrueIdlePct() + 1e-6) << "trial " << trial;
    EXPECT_GE(*s.gpu_idle_pct, 0.0);
    double sum = 0;
    for (const auto& [cause, pct] : s.idle_by_cause) sum += pct;
    EXPECT_NEAR(sum, *s.gpu_idle_pct, 1e-6) << "trial " << trial;
  }
}

TEST(EventsTest, NoMarkerIsLeakedWhateverTheLoopDoes) {
  SimLoop loop;
  Session& s = *loop.session;
  loop.Step([&] { loop.Phase(Phase::kForward, kMs, 2 * kMs); });
  // Misuse, cancelled steps, phases outside steps, nested steps.
  const ScopeToken a = s.BeginStep();
  const ScopeToken b = s.BeginPhase(Phase::kData);
  s.BeginPhase(Phase::kForward);
  s.End(b);
  s.End(a);
  const ScopeToken probe = s.BeginStep();
  {
    PhaseScope p(s, Phase::kData);
  }
  s.Cancel(probe);
  {
    PhaseScope p(s, Phase::kCheckpoint);
    loop.clock->Advance(kMs);
  }
  {
    StepScope x(s);
    StepScope y(s);
  }
  loop.DrainAndSummarize();
  s.Close();
  EXPECT_GT(loop.gpu->markers_recorded(), 10);
  EXPECT_EQ(loop.gpu->live_markers(), 0);
}

// A phase nested in data may wait for the GPU (a blocking copy timed as
// h2d): the data assumption does not cover it, so the bound stays sound.
TEST(EventsTest, WorkInsideAPhaseNestedInDataIsNotAssumedAway) {
  SimLoop loop;
  for (int i = 0; i < 10; ++i) {
    loop.Step([&] {
      {
        PhaseScope data(*loop.session, Phase::kData);
        loop.clock->Advance(5 * kMs);
        loop.Phase(Phase::kH2D, 10 * kMs, /*kernel_ns=*/10 * kMs);  // the host waits for the copy
      }
      loop.Phase(Phase::kForward, 5 * kMs);
    });
  }
  const Summary s = loop.DrainAndSummarize();
  EXPECT_DOUBLE_EQ(loop.TrueIdlePct(), 50.0);
  EXPECT_LE(*s.gpu_idle_pct, 50.0 + 1e-9);
}

// Soundness with nesting: random loops whose data phases sometimes contain
// nested phases that launch work and wait for it.
TEST(EventsTest, IdleLowerBoundNeverExceedsTheTruthWithPhasesNestedInData) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 40; ++trial) {
    SimLoop loop;
    const int steps = 3 + static_cast<int>(rng() % 10);
    for (int i = 0; i < steps; ++i) {
      loop.Step([&] {
        {
          PhaseScope data(*loop.session, Phase::kData);
          loop.clock->Advance(static_cast<int64_t>(rng() % 10) * kMs);
          if (rng() % 2 == 0) {
            const int64_t kernel = static_cast<int64_t>(1 + rng() % 8) * kMs;
            loop.Phase(Phase::kH2D, kernel + static_cast<int64_t>(rng() % 3) * kMs, kernel);
          }
          loop.clock->Advance(static_cast<int64_t>(rng() % 5) * kMs);
        }
        const int64_t kernel = static_cast<int64_t>(rng() % 12) * kMs;
        loop.Phase(Phase::kForward,
                   static_cast<int64_t>(rng() % 6) * kMs + (rng() % 2 ? kernel : 0), kernel);
      });
    }
    const Summary s = loop.DrainAndSummarize();
    ASSERT_EQ(s.gpu_steps, steps);
    EXPECT_LE(*s.gpu_idle_pct, loop.TrueIdlePct() + 1e-6) << "trial " << trial;
  }
}

TEST(EventsTest, ClosingWithScopesOpenLeaksNoMarker) {
  SimLoop loop;
  Session& s = *loop.session;
  loop.Step([&] { loop.Phase(Phase::kForward, kMs, kMs); });
  const ScopeToken step = s.BeginStep();
  const ScopeToken phase = s.BeginPhase(Phase::kData);
  s.Close();     // with a step and a phase open
  s.End(phase);  // after close: no new marker
  s.End(step);
  const int64_t recorded = loop.gpu->markers_recorded();
  loop.session.reset();  // the destructor returns whatever is left
  EXPECT_EQ(loop.gpu->markers_recorded(), recorded);
  EXPECT_EQ(loop.gpu->live_markers(), 0);
}

TEST(EventsTest, AFaultWithRecordsStillQueuedLeavesNothingPending) {
  SimLoop loop({}, Options{.flush_interval_ms = 10000});
  for (int i = 0; i < 5; ++i) loop.Step([&] { loop.Phase(Phase::kForward, kMs, 3 * kMs); });
  loop.gpu->InjectFault(SimulatedDevice::Fault::kStickyError);  // before anything was drained
  const Summary s = loop.DrainAndSummarize();
  EXPECT_EQ(s.source, Source::kHost);
  EXPECT_EQ(s.pending_steps, 0);
  EXPECT_EQ(s.total_steps, 5);
  EXPECT_EQ(loop.gpu->live_markers(), 0);
  EXPECT_EQ(loop.session->Summarize().pending_steps, 0);
}

TEST(EventsTest, ASimulatedDeviceServesOneSession) {
  SimLoop loop;
  Session second(Options{.clock = loop.clock, .stream = 0, .simulated_device = loop.gpu});
  EXPECT_EQ(second.source(), Source::kHost);
  EXPECT_THAT(second.Summarize().source_reason, HasSubstr("already serves another session"));
  EXPECT_EQ(loop.session->source(), Source::kEvents);
}

TEST(EventsTest, RecordsDroppedByAFullQueueStillReturnTheirMarkers) {
  SimLoop loop({}, Options{.queue_capacity = 64, .flush_interval_ms = 10000});
  loop.Step([&] {
    for (int i = 0; i < 500; ++i) loop.Phase(Phase::kForward, kUs, kUs);
  });
  const Summary s = loop.DrainAndSummarize();
  EXPECT_GT(s.misuse.dropped_records, 0);
  loop.session->Close();
  EXPECT_EQ(loop.gpu->live_markers(), 0);
}

TEST(EventsTest, StepsLeftWithoutMarkersWhenThePoolRunsOutAndThePoolGrows) {
  SimLoop loop(SimulatedDevice::Config{.initial_markers = 8, .max_markers = 64},
               Options{.flush_interval_ms = 10000});
  for (int i = 0; i < 20; ++i) {  // 6 markers per step, the GPU lagging: the pool runs dry
    loop.Step([&] {
      loop.Phase(Phase::kData, kMs);
      loop.Phase(Phase::kForward, kMs, 50 * kMs);
    });
  }
  const Summary s = loop.DrainAndSummarize();
  EXPECT_EQ(s.steps, 20);
  EXPECT_LT(s.gpu_steps, 20);  // some steps have host numbers only
  EXPECT_GT(s.gpu_steps, 0);
  EXPECT_GT(loop.gpu->markers_created(), 8u);  // grown off the hot path
  EXPECT_LE(loop.gpu->markers_created(), 64u);
  loop.session->Close();
  EXPECT_EQ(loop.gpu->live_markers(), 0);
}

TEST(EventsTest, NoDriverMeansHostSourceAndSaysWhy) {
  auto gpu = std::make_shared<SimulatedDevice>();
  gpu->InjectFault(SimulatedDevice::Fault::kNoDriver);
  auto clock = std::make_shared<ManualClock>();
  Session session(Options{.clock = clock, .stream = 0, .simulated_device = gpu});
  {
    StepScope step(session);
    clock->Advance(kMs);
  }
  const Summary s = session.Summarize();
  EXPECT_EQ(s.source, Source::kHost);
  EXPECT_THAT(s.source_reason, HasSubstr("libcuda.so.1"));
  EXPECT_FALSE(s.gpu_idle_pct.has_value());
  EXPECT_EQ(s.total_steps, 1);
  EXPECT_EQ(gpu->markers_recorded(), 0);
}

class FaultTest : public ::testing::TestWithParam<SimulatedDevice::Fault> {};

TEST_P(FaultTest, AFaultMidRunLowersTheSourceOnceAndTheLoopGoesOn) {
  std::vector<std::string> warnings;
  SetLogSink([&](LogLevel level, std::string_view m) {
    if (level == LogLevel::kWarning) warnings.emplace_back(m);
  });
  SimLoop loop;
  for (int i = 0; i < 5; ++i) loop.Step([&] { loop.Phase(Phase::kForward, 2 * kMs, kMs); });
  EXPECT_EQ(loop.DrainAndSummarize().source, Source::kEvents);
  loop.gpu->InjectFault(GetParam());
  for (int i = 0; i < 5; ++i) loop.Step([&] { loop.Phase(Phase::kForward, 2 * kMs, kMs); });
  Summary s = loop.DrainAndSummarize();
  for (int i = 0; i < 5; ++i) loop.Step([&] { loop.Phase(Phase::kForward, 2 * kMs, kMs); });
  s = loop.DrainAndSummarize();
  SetLogSink(nullptr);
  EXPECT_EQ(s.source, Source::kHost);
  EXPECT_THAT(s.source_reason, HasSubstr("lowered to host"));
  EXPECT_THAT(s.source_reason, HasSubstr("CUDA_ERROR"));
  EXPECT_FALSE(s.gpu_idle_pct.has_value());
  EXPECT_EQ(s.total_steps, 15);  // the loop went on
  EXPECT_EQ(s.pending_steps, 0);
  EXPECT_EQ(std::count_if(warnings.begin(), warnings.end(),
                          [](const std::string& w) {
                            return w.find("lowered to host") != std::string::npos;
                          }),
            1);
  loop.session->Close();
  EXPECT_EQ(loop.gpu->live_markers(), 0);
}

INSTANTIATE_TEST_SUITE_P(Faults, FaultTest,
                         ::testing::Values(SimulatedDevice::Fault::kStickyError,
                                           SimulatedDevice::Fault::kContextDestroyed));

TEST(EventsTest, MarkersFollowTheSessionsStream) {
  SimLoop loop;
  loop.session->SetStream(7);
  for (int i = 0; i < 5; ++i) {
    loop.Step([&] {
      loop.Phase(Phase::kData, 10 * kMs);
      PhaseScope p(*loop.session, Phase::kForward);
      loop.gpu->Launch(20 * kMs, /*stream=*/7);  // on the session's stream: markers wait for it
      loop.gpu->Launch(50 * kMs, /*stream=*/0);  // another stream: markers do not see it
      loop.clock->Advance(kMs);
    });
  }
  const Summary s = loop.DrainAndSummarize();
  EXPECT_GT(s.FindPhase("data")->backlog_p50, 0.005);  // stream 7 lags: 20 ms per 11 ms step
}

// A copy stream and a second device, hand-computed. Per 50 ms step: data
// 30 ms (no GPU work); h2d on copy stream 1 (device 0), a 2 ms copy the host
// waits for; forward on the session's stream 0, an 8 ms kernel the host
// waits for; stage2 on stream 7 of device 1, a 10 ms kernel the host waits
// for. Truth: each device is busy 10 of 50 ms, 80 % idle.
//   device 0: the bound sees data's 30 ms idle; [40, 50] on stream 0 cannot
//             be told from work (the step spans it): 60 % idle at least.
//   device 1: its stream's markers show exactly [40, 50]: 80 %.
TEST(EventsTest, CopyStreamAndSecondDeviceGivePerDeviceNumbers) {
  SimLoop loop;
  loop.gpu->PlaceStream(7, /*device=*/1);
  for (int i = 0; i < 10; ++i) {
    loop.Step([&] {
      loop.Phase(Phase::kData, 30 * kMs);
      {
        PhaseScope p(*loop.session, Phase::kH2D, Stream(1));
        loop.gpu->Launch(2 * kMs, /*stream=*/1);
        loop.clock->Advance(2 * kMs);
      }
      loop.Phase(Phase::kForward, 8 * kMs, /*kernel_ns=*/8 * kMs);
      {
        PhaseScope p(*loop.session, "stage2", Stream(7));
        loop.gpu->Launch(10 * kMs, /*stream=*/7);
        loop.clock->Advance(10 * kMs);
      }
    });
  }
  const Summary s = loop.DrainAndSummarize();
  ASSERT_EQ(s.source, Source::kEvents);
  ASSERT_EQ(s.gpu_steps, 10);
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0].device, 0);
  EXPECT_EQ(s.devices[0].gpu_steps, 10);
  EXPECT_NEAR(*s.devices[0].gpu_idle_pct, 60.0, 1e-9);
  EXPECT_EQ(s.devices[1].device, 1);
  EXPECT_NEAR(*s.devices[1].gpu_idle_pct, 80.0, 1e-9);
  // Never above the truth, per device.
  for (const DeviceStats& d : s.devices) {
    int64_t window = 0, busy = 0;
    for (const auto& [b, e] : loop.windows) {
      window += e - b;
      busy += loop.gpu->DeviceBusyBetween(b, e, d.device);
    }
    EXPECT_LE(*d.gpu_idle_pct,
              100.0 * static_cast<double>(window - busy) / static_cast<double>(window) + 1e-9);
  }
  // The session's numbers are over both devices' time: their mean, and the
  // causes sum to it (device 1 idles in data, h2d and forward too).
  EXPECT_NEAR(*s.gpu_idle_pct, 70.0, 1e-9);
  EXPECT_NEAR(s.idle_by_cause.at("data"), 60.0, 1e-9);
  EXPECT_NEAR(s.idle_by_cause.at("h2d"), 2.0, 1e-9);
  EXPECT_NEAR(s.idle_by_cause.at("forward"), 8.0, 1e-9);
  EXPECT_EQ(s.idle_by_cause.count("stage2"), 0u);
  // Each phase's device time is its own stream's.
  EXPECT_NEAR(s.FindPhase("h2d")->device.p50, 0.002, 1e-9);
  EXPECT_NEAR(s.FindPhase("stage2")->device.p50, 0.010, 1e-9);
  EXPECT_EQ(loop.gpu->live_markers(), 0);
}

// As steps() ends a loop: a probe step whose data phase never got an item
// is cancelled, while the steps before it still wait to be analyzed. That
// must not change their numbers (the worker never pumps here: one drain
// sees the steps and the cancelled probe together).
TEST(EventsTest, ACancelledProbeStepLeavesPendingStepsAlone) {
  SimLoop loop(SimulatedDevice::Config{}, Options{.flush_interval_ms = 10000});
  loop.gpu->PlaceStream(7, /*device=*/1);
  for (int i = 0; i < 10; ++i) {
    loop.Step([&] {
      loop.Phase(Phase::kData, 30 * kMs);
      loop.Phase(Phase::kForward, 10 * kMs, /*kernel_ns=*/10 * kMs);
      PhaseScope p(*loop.session, "stage2", Stream(7));
      loop.gpu->Launch(10 * kMs, /*stream=*/7);
      loop.clock->Advance(10 * kMs);
    });
  }
  const ScopeToken probe = loop.session->BeginStep();
  loop.session->BeginPhase(Phase::kData, Stream(7));
  loop.clock->Advance(kMs);
  EXPECT_EQ(loop.session->Cancel(probe), ScopeStatus::kEndedOutOfOrder);
  const Summary s = loop.DrainAndSummarize();
  ASSERT_EQ(s.gpu_steps, 10);
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_NEAR(*s.devices[0].gpu_idle_pct, 60.0, 1e-9);  // data 30 of 50 ms
  EXPECT_NEAR(*s.devices[1].gpu_idle_pct, 80.0, 1e-9);  // busy 10 of 50 ms
  EXPECT_EQ(loop.gpu->live_markers(), 0);
}

// Work on a copy stream that no analyzed scope brackets: a phase cancelled
// inside a kept step, or a phase between steps. Each enqueues a 30 ms copy
// that runs into the next step's data phase; the bound must not call that
// time idle.
struct CopyLoop : SimLoop {
  void NormalStep(const std::function<void()>& extra = [] {}) {
    Step([&] {
      Phase(Phase::kData, 30 * kMs);
      {
        PhaseScope p(*session, gpuscope::Phase::kH2D, Stream(1));
        gpu->Launch(2 * kMs, /*stream=*/1);
        clock->Advance(2 * kMs);
      }
      Phase(Phase::kForward, 8 * kMs, /*kernel_ns=*/8 * kMs);
      extra();
    });
  }
  // True idle % on device 0 over the steps `timed` says were analyzed.
  double TrueIdle(const std::vector<bool>& timed) const {
    int64_t window = 0, busy = 0;
    for (size_t i = 0; i < windows.size(); ++i) {
      if (!timed[i]) continue;
      window += windows[i].second - windows[i].first;
      busy += gpu->DeviceBusyBetween(windows[i].first, windows[i].second, 0);
    }
    return 100.0 * static_cast<double>(window - busy) / static_cast<double>(window);
  }
};

TEST(EventsTest, ACancelledCopyPhaseInAKeptStepCostsThatStepItsGpuNumbers) {
  CopyLoop loop;
  for (int i = 0; i < 6; ++i) {
    loop.NormalStep([&] {
      if (i != 2) return;
      const ScopeToken q = loop.session->BeginPhase("prefetch", Stream(1));
      loop.gpu->Launch(30 * kMs, /*stream=*/1);  // not waited for
      loop.session->Cancel(q);
    });
  }
  const Summary s = loop.DrainAndSummarize();
  EXPECT_EQ(s.gpu_steps, 5);  // step 2 cannot place the cancelled copy
  EXPECT_LE(*s.gpu_idle_pct, loop.TrueIdle({true, true, false, true, true, true}) + 1e-9);
  EXPECT_EQ(loop.gpu->live_markers(), 0);
}

TEST(EventsTest, ANamedStreamPhaseBetweenStepsMakesTheNextStepCautious) {
  CopyLoop loop;
  for (int i = 0; i < 6; ++i) {
    loop.NormalStep();
    if (i == 2) {
      PhaseScope p(*loop.session, "prefetch", Stream(1));  // outside any step: no markers
      loop.gpu->Launch(30 * kMs, /*stream=*/1);
    }
  }
  const Summary s = loop.DrainAndSummarize();
  EXPECT_EQ(s.gpu_steps, 6);
  EXPECT_LE(*s.gpu_idle_pct, loop.TrueIdle(std::vector<bool>(6, true)) + 1e-9);
  EXPECT_EQ(loop.gpu->live_markers(), 0);
}

TEST(EventsTest, ACopyStreamBacklogCarriesIntoTheNextStep) {
  // The copy stream's 40 ms transfer, enqueued without waiting, runs 25 ms
  // into the next step's data phase: that part of data is not idle.
  SimLoop loop;
  for (int i = 0; i < 4; ++i) {
    loop.Step([&] {
      loop.Phase(Phase::kData, 30 * kMs);
      {
        PhaseScope p(*loop.session, Phase::kH2D, Stream(1));
        loop.gpu->Launch(40 * kMs, /*stream=*/1);
        loop.clock->Advance(kMs);
      }
      loop.Phase(Phase::kForward, 14 * kMs);
    });
  }
  const Summary s = loop.DrainAndSummarize();
  ASSERT_EQ(s.gpu_steps, 4);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_LE(*s.gpu_idle_pct, loop.TrueIdlePctOnDevice(0) + 1e-9);
  EXPECT_GT(*s.gpu_idle_pct, 20.0);  // data's first 30 ms of step 1 at least
}

TEST(EventsTest, PhasesInAStepWithoutMarkersRecordNone) {
  SimLoop loop(SimulatedDevice::Config{}, Options{.stream = kNoStream});
  loop.session->SetStream(kNoStream);
  loop.Step([&] {
    PhaseScope p(*loop.session, Phase::kH2D, Stream(1));
    loop.clock->Advance(kMs);
  });
  EXPECT_EQ(loop.gpu->markers_recorded(), 0);
  EXPECT_EQ(loop.session->Summarize().gpu_steps, 0);
}

}  // namespace
}  // namespace gpuscope

namespace gpuscope {
namespace {

TEST(EventsReportTest, SaysWhyThereAreNoGpuNumbersYet) {
  auto gpu = std::make_shared<SimulatedDevice>();
  auto clock = std::make_shared<ManualClock>();
  Session session(Options{.clock = clock, .simulated_device = gpu});  // no stream given
  {
    StepScope step(session);
    clock->Advance(testing::kMs);
  }
  const Summary s = session.Summarize();
  EXPECT_EQ(s.source, Source::kEvents);
  EXPECT_EQ(s.gpu_steps, 0);
  EXPECT_EQ(gpu->markers_recorded(), 0);  // nothing marked without a stream
  EXPECT_THAT(FormatReport(s), ::testing::HasSubstr("is a stream set"));
}

}  // namespace
}  // namespace gpuscope
