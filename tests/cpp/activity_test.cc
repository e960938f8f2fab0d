// The cupti source end to end on the simulated device's activity records:
// exact idle %, idle by cause with launch gaps, per-step counts (copies,
// pageable copies, syncs, host-wait gaps), dropped records, several devices,
// and the fallbacks (refused subscription, no records yet).

#include <algorithm>
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

SimulatedDevice::Config WithActivity(SimulatedDevice::Config c = {}) {
  c.activity = true;
  return c;
}

// The cupti source's loop: a simulated device that delivers activity records.
struct ActivityLoop : testing::SimLoop {
  explicit ActivityLoop(SimulatedDevice::Config config = WithActivity()) : SimLoop(config) {}
};

// The starved-loop example, exact: 30 ms of data, then a 10 ms kernel the host waits
// for (a sync): 75 % idle, all of it in data.
TEST(ActivityTest, StarvedLoopIsExact) {
  ActivityLoop loop;
  for (int i = 0; i < 20; ++i) {
    loop.Step([&] {
      {
        PhaseScope p(*loop.session, Phase::kData);
        loop.clock->Advance(30 * kMs);
      }
      PhaseScope p(*loop.session, Phase::kForward);
      loop.gpu->Launch(10 * kMs);
      loop.clock->Advance(loop.gpu->Synchronize());
    });
  }
  const Summary s = loop.DrainAndSummarize();
  EXPECT_EQ(s.source, Source::kCupti) << s.source_reason;
  EXPECT_EQ(s.gpu_steps, 20);
  ASSERT_TRUE(s.gpu_idle_pct.has_value());
  EXPECT_DOUBLE_EQ(*s.gpu_idle_pct, 75.0);
  EXPECT_EQ(s.idle_by_cause.size(), 1u);
  EXPECT_DOUBLE_EQ(s.idle_by_cause.at("data"), 75.0);
  EXPECT_DOUBLE_EQ(s.FindPhase("forward")->device.p50, 0.010);
  ASSERT_TRUE(s.activity.has_value());
  EXPECT_DOUBLE_EQ(s.activity->kernels_per_step, 1.0);
  EXPECT_DOUBLE_EQ(s.activity->kernel_time_p50, 0.010);
  EXPECT_DOUBLE_EQ(s.activity->syncs_per_step, 1.0);
  EXPECT_DOUBLE_EQ(s.activity->sync_time_per_step, 0.010);
  EXPECT_THAT(FormatReport(s), HasSubstr("GPU idle    75.0%"));
  EXPECT_THAT(FormatReport(s), ::testing::Not(HasSubstr("at least")));
}

// A launch-bound step: 200 kernels of 10 us, each launched 15 us after the
// previous launch (the host is the bottleneck), so the GPU idles 5 us
// between kernels waiting for the next launch.
TEST(ActivityTest, LaunchBoundLoopChargesGapsToLaunchAndCountsHostWaits) {
  ActivityLoop loop;
  for (int i = 0; i < 5; ++i) {
    loop.Step([&] {
      PhaseScope p(*loop.session, Phase::kForward);
      for (int k = 0; k < 200; ++k) {
        loop.gpu->Launch(10 * kUs);
        loop.clock->Advance(15 * kUs);
      }
    });
  }
  const Summary s = loop.DrainAndSummarize();
  ASSERT_EQ(s.gpu_steps, 5);
  // Per 3000 us step: 2000 us busy; 199 gaps of 5 us inside (launch); the
  // last 5 us precede the next step's first kernel (also a launch gap, but
  // the first step's trailing gap and each step's end count too).
  EXPECT_NEAR(s.idle_by_cause.at("launch"), 100.0 * 199 * 5 / 3000, 0.2);
  EXPECT_NEAR(*s.gpu_idle_pct, 100.0 / 3, 0.01);
  EXPECT_NEAR(*s.gpu_idle_pct, loop.TrueIdlePctOnDevice(0), 1e-9);
  EXPECT_NEAR(s.activity->host_wait_gaps_per_step, 200, 1.0);
  EXPECT_DOUBLE_EQ(s.activity->kernels_per_step, 200);
  EXPECT_DOUBLE_EQ(s.activity->kernel_time_p50, 10e-6);
}

// A pageable host-to-device copy and a per-step .item() (a 4-byte
// device-to-host copy, then a sync): counted per step.
TEST(ActivityTest, PageableCopiesAndItemSyncsAreCounted) {
  ActivityLoop loop;
  for (int i = 0; i < 10; ++i) {
    loop.Step([&] {
      {
        PhaseScope p(*loop.session, Phase::kH2D);
        loop.gpu->LaunchCopy(SimulatedDevice::Copy::kHostToDevice, 64 << 20, 5 * kMs,
                             /*pageable=*/true);
        loop.clock->Advance(loop.gpu->Synchronize());  // a pageable copy blocks the host
      }
      {
        PhaseScope p(*loop.session, Phase::kForward);
        loop.gpu->Launch(8 * kMs);
        loop.gpu->LaunchCopy(SimulatedDevice::Copy::kDeviceToHost, 4, 10 * kUs);
        loop.clock->Advance(kMs);
      }
      PhaseScope p(*loop.session, "loss.item");
      loop.clock->Advance(loop.gpu->Synchronize());
    });
  }
  const Summary s = loop.DrainAndSummarize();
  ASSERT_TRUE(s.activity.has_value());
  EXPECT_DOUBLE_EQ(s.activity->copies_per_step, 2);
  EXPECT_DOUBLE_EQ(s.activity->pageable_copies_per_step, 1);
  EXPECT_DOUBLE_EQ(s.activity->h2d_bytes_per_step, 64 << 20);
  EXPECT_DOUBLE_EQ(s.activity->d2h_bytes_per_step, 4);
  EXPECT_DOUBLE_EQ(s.activity->syncs_per_step, 2);
  EXPECT_NEAR(*s.gpu_idle_pct, loop.TrueIdlePctOnDevice(0), 1e-9);
  EXPECT_DOUBLE_EQ(s.FindPhase("h2d")->device.p50, 0.005);
  // The copy and kernel launched in forward run 8.01 ms.
  EXPECT_DOUBLE_EQ(s.FindPhase("forward")->device.p50, 0.00801);
  EXPECT_THAT(FormatReport(s), HasSubstr("pageable"));
}

TEST(ActivityTest, KernelNamesSplitKernelTimeIntoGemmsAndCollectives) {
  ActivityLoop loop;
  for (int i = 0; i < 4; ++i) {
    loop.Step([&] {
      loop.gpu->Launch(6 * kMs, 0, "ampere_sgemm_128x64_nn");                         // FP32 GEMM
      loop.gpu->Launch(2 * kMs, 0, "ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_tn");  // BF16 GEMM
      loop.gpu->Launch(3 * kMs, 0,
                       "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
      loop.gpu->Launch(1 * kMs, 0, "void at::native::vectorized_elementwise_kernel<4>()");
      loop.gpu->Launch(1 * kMs);  // no name: nothing said
      loop.clock->Advance(loop.gpu->Synchronize());
    });
  }
  const Summary s = loop.DrainAndSummarize();
  ASSERT_TRUE(s.activity.has_value());
  EXPECT_NEAR(s.activity->kernel_time_per_step, 0.013, 1e-12);
  EXPECT_NEAR(s.activity->gemm_time_per_step, 0.008, 1e-12);
  EXPECT_NEAR(s.activity->fp32_gemm_time_per_step, 0.006, 1e-12);
  EXPECT_NEAR(s.activity->collective_time_per_step, 0.003, 1e-12);
}

TEST(ActivityTest, OnlyCollectiveTimeNothingElseOverlapsIsExposed) {
  // DDP: a 4 ms all-reduce on a side stream under 10 ms of backward, then a
  // last 2 ms bucket after it: 6 ms of NCCL, 2 ms exposed.
  ActivityLoop loop;
  for (int i = 0; i < 4; ++i) {
    loop.Step([&] {
      loop.gpu->Launch(10 * kMs, 0, "ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_tn");
      loop.gpu->Launch(4 * kMs, 1, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
      loop.clock->Advance(loop.gpu->Synchronize(0));
      loop.gpu->Launch(2 * kMs, 1, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
      loop.clock->Advance(loop.gpu->Synchronize(1));
    });
  }
  const Summary s = loop.DrainAndSummarize();
  ASSERT_TRUE(s.activity.has_value());
  EXPECT_NEAR(s.activity->collective_time_per_step, 0.006, 1e-12);
  EXPECT_NEAR(s.activity->exposed_collective_time_per_step, 0.002, 1e-12);
}

// Device time by category, by hand. Each 11 ms step, from its begin (ms):
// a 4 ms kernel [0, 4]; a 2 ms copy [3, 5] on a copy stream, its first half
// under the kernel; a 1 ms memset alone [6, 7]; a 2 ms NCCL kernel [8, 10]
// with a 1 ms compute kernel [8, 9] over its first half; idle [5, 6],
// [7, 8], [10, 11]. So kernels 5 ms, memcpy 1, memset 1, comm 1, idle 3.
TEST(ActivityTest, DeviceTimeByCategoryGoesToTheHighestPriorityRunning) {
  ActivityLoop loop;
  constexpr uint64_t kCompute = 0, kCopy = 1, kNccl = 2, kMemset = 3;
  for (int i = 0; i < 3; ++i) {
    loop.Step([&] {
      loop.gpu->Launch(4 * kMs, kCompute, "ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_tn");
      loop.clock->Advance(3 * kMs);
      loop.gpu->LaunchCopy(SimulatedDevice::Copy::kHostToDevice, 1 << 20, 2 * kMs,
                           /*pageable=*/false, kCopy);
      loop.clock->Advance(3 * kMs);
      loop.gpu->LaunchMemset(1 << 20, kMs, kMemset);
      loop.clock->Advance(2 * kMs);
      loop.gpu->Launch(2 * kMs, kNccl, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
      loop.gpu->Launch(kMs, kCompute, "void at::native::vectorized_elementwise_kernel<4>()");
      loop.clock->Advance(3 * kMs);
    });
  }
  const Summary s = loop.DrainAndSummarize();
  ASSERT_EQ(s.gpu_steps, 3);
  ASSERT_TRUE(s.activity.has_value());
  const ActivityStats& a = *s.activity;
  ASSERT_TRUE(a.device_time_kernel.has_value());
  EXPECT_NEAR(*a.device_time_kernel, 0.005, 1e-12);
  EXPECT_NEAR(*a.device_time_memcpy, 0.001, 1e-12);
  EXPECT_NEAR(*a.device_time_memset, 0.001, 1e-12);
  EXPECT_NEAR(*a.device_time_comm, 0.001, 1e-12);
  EXPECT_NEAR(*a.device_time_idle, 0.003, 1e-12);
  EXPECT_NEAR(*a.device_time_kernel + *a.device_time_memcpy + *a.device_time_memset +
                  *a.device_time_comm + *a.device_time_idle,
              s.step_time.mean, 1e-12);
  EXPECT_NEAR(*a.device_share_kernel, 5.0 / 11, 1e-12);
  EXPECT_NEAR(*a.device_share_memcpy, 1.0 / 11, 1e-12);
  EXPECT_NEAR(*a.device_share_memset, 1.0 / 11, 1e-12);
  EXPECT_NEAR(*a.device_share_comm, 1.0 / 11, 1e-12);
  EXPECT_NEAR(*a.device_share_idle, 3.0 / 11, 1e-12);
  EXPECT_NEAR(100 * *a.device_share_idle, *s.gpu_idle_pct, 1e-9);
  EXPECT_NEAR(*s.gpu_idle_pct, loop.TrueIdlePctOnDevice(0), 1e-9);
  // The collective's exposed part is the comm category's.
  EXPECT_NEAR(a.exposed_collective_time_per_step, *a.device_time_comm, 1e-12);
  EXPECT_THAT(FormatReport(s), HasSubstr("device time: kernels 45.5%, memcpy 9.1%, memset 9.1%, "
                                         "comm 9.1%, idle 27.3%"));
  // The trace gives each step's split on the step's slice.
  EXPECT_THAT(ToChromeTrace(*loop.session),
              HasSubstr(R"("device_time_ms":{"gpu 0":{"kernel":5,"memcpy":1,"memset":1,)"
                        R"("comm":1,"idle":3}})"));
}

// Two GPUs: per device, then as gpu_idle_pct counts them (each step once
// per device).
TEST(ActivityTest, DeviceTimeByCategoryAveragesDevicesAsGpuIdleDoes) {
  ActivityLoop loop;
  loop.gpu->PlaceStream(7, /*device=*/1);
  for (int i = 0; i < 4; ++i) {
    loop.Step([&] {
      loop.gpu->Launch(6 * kMs, 0);                                              // device 0
      loop.gpu->Launch(2 * kMs, 7, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");  // device 1
      loop.clock->Advance(10 * kMs);
    });
  }
  const Summary s = loop.DrainAndSummarize();
  ASSERT_TRUE(s.activity.has_value() && s.activity->device_share_idle.has_value());
  const ActivityStats& a = *s.activity;
  EXPECT_NEAR(*a.device_time_kernel, 0.003, 1e-12);  // (6 + 0) / 2
  EXPECT_NEAR(*a.device_time_comm, 0.001, 1e-12);    // (0 + 2) / 2
  EXPECT_NEAR(*a.device_time_idle, 0.006, 1e-12);    // (4 + 8) / 2
  EXPECT_NEAR(*a.device_share_idle, 0.6, 1e-12);
  EXPECT_NEAR(100 * *a.device_share_idle, *s.gpu_idle_pct, 1e-9);
}

// Only activity records see kernels: with events the split is absent.
TEST(ActivityTest, DeviceTimeByCategoryNeedsActivityRecords) {
  auto clock = std::make_shared<ManualClock>();
  auto gpu = std::make_shared<SimulatedDevice>();  // no activity: source events
  Session session(Options{.clock = clock, .stream = 0, .simulated_device = gpu});
  for (int i = 0; i < 3; ++i) {
    StepScope step(session);
    gpu->Launch(5 * kMs);
    clock->Advance(gpu->Synchronize());
  }
  clock->Advance(1000 * kMs);
  const Summary s = session.Summarize();
  EXPECT_EQ(s.source, Source::kEvents);
  EXPECT_FALSE(s.activity.has_value());
  EXPECT_THAT(FormatReport(s), ::testing::Not(HasSubstr("device time:")));
  EXPECT_THAT(ToChromeTrace(session), ::testing::Not(HasSubstr("device_time_ms")));
}

TEST(ActivityTest, IdleMatchesTheTruthExactlyOnRandomLoops) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    ActivityLoop loop;
    loop.gpu->Launch(kUs);  // the GPU is in use before the first step (its steps all count)
    int launches = 1;
    for (int i = 0; i < 15; ++i) {
      loop.Step([&] {
        {
          PhaseScope p(*loop.session, Phase::kData);
          loop.clock->Advance(static_cast<int64_t>(rng() % 20) * kMs);
        }
        PhaseScope p(*loop.session, Phase::kForward);
        for (int k = static_cast<int>(rng() % 5); k > 0; --k) {
          loop.gpu->Launch(static_cast<int64_t>(1 + rng() % 10) * kMs, rng() % 2);
          ++launches;
          loop.clock->Advance(static_cast<int64_t>(rng() % 3) * kMs);
        }
        if (rng() % 2 == 0) loop.clock->Advance(loop.gpu->Synchronize(rng() % 2));
      });
    }
    const Summary s = loop.DrainAndSummarize();
    ASSERT_EQ(s.gpu_steps, 15) << "trial " << trial;
    if (launches == 0) continue;  // no GPU work at all: no records, no GPU numbers
    ASSERT_NEAR(*s.gpu_idle_pct, loop.TrueIdlePctOnDevice(0), 1e-6) << "trial " << trial;
    double causes = 0;
    for (const auto& [cause, pct] : s.idle_by_cause) causes += pct;
    ASSERT_NEAR(causes, *s.gpu_idle_pct, 1e-6) << "trial " << trial;
  }
}

// A kernel still running when its step ends has no record yet: the step
// must wait for it, however often the worker drains meanwhile.
TEST(ActivityTest, AStepWaitsForWorkStillRunningWhenItEnded) {
  auto clock = std::make_shared<ManualClock>();
  auto gpu = std::make_shared<SimulatedDevice>(WithActivity());
  Session session(
      Options{.clock = clock, .flush_interval_ms = 1, .stream = 0, .simulated_device = gpu});
  {
    StepScope step(session);
    gpu->Launch(20 * kMs);  // runs past the step's end
    clock->Advance(5 * kMs);
  }
  // Drains, repeatedly, before the kernel ends: each a pass of the worker's
  // (the worker may add passes of its own meanwhile; these happen for sure).
  for (int i = 0; i < 5; ++i) {
    session.Flush();
    ASSERT_EQ(session.Summarize().pending_steps, 1) << "after drain " << i;
  }
  clock->Advance(100 * kMs);
  const Summary s = session.Summarize();
  ASSERT_EQ(s.gpu_steps, 1);
  EXPECT_DOUBLE_EQ(*s.gpu_idle_pct, 0.0);  // the kernel covered the whole step
}

// A step far longer than the records' retention margin (a sync on a long
// backlog), with the worker draining while it is still open: the records of
// its first kernels must still be there when it ends.
TEST(ActivityTest, ALongStepKeepsItsEarlyRecordsWhileItIsOpen) {
  auto clock = std::make_shared<ManualClock>();
  auto gpu = std::make_shared<SimulatedDevice>(WithActivity());
  Session session(
      Options{.clock = clock, .flush_interval_ms = 1, .stream = 0, .simulated_device = gpu});
  gpu->Launch(kUs);  // the GPU is in use before the first step
  {
    StepScope step(session);
    clock->Advance(kMs);
  }  // a completed step first
  {
    StepScope step(session);
    gpu->Launch(10 * kMs);
    clock->Advance(500 * kMs);  // the kernel ended long ago; the step is still open
    // Drains, repeatedly, while the step is open: each a pass of the worker's,
    // with the kernel's record far older than the retention margin.
    for (int i = 0; i < 5; ++i) session.Flush();
    clock->Advance(kMs);
  }
  clock->Advance(kMs);
  const Summary s = session.Summarize();
  ASSERT_EQ(s.gpu_steps, 2);
  EXPECT_NEAR(*s.gpu_idle_pct, 100.0 * (1 - 10.001 / 502), 1e-9);  // steps of 1 and 501 ms
}

// ReleaseCupti with a step still waiting for its records: it loses its GPU
// numbers, nothing crashes, the loop goes on with events.
TEST(ActivityTest, ReleasingWithAStepPendingDropsItsGpuNumbers) {
  auto clock = std::make_shared<ManualClock>();
  auto gpu = std::make_shared<SimulatedDevice>(WithActivity());
  Session session(Options{.clock = clock, .stream = 0, .simulated_device = gpu});
  {
    StepScope step(session);
    gpu->Launch(100 * kMs);  // still running when the step ends
    clock->Advance(kMs);
  }
  session.ReleaseCupti();
  EXPECT_EQ(session.source(), Source::kEvents);
  clock->Advance(1000 * kMs);
  const Summary s = session.Summarize();
  EXPECT_EQ(s.total_steps, 1);
  EXPECT_EQ(s.gpu_steps, 0);
  EXPECT_EQ(s.pending_steps, 0);
}

TEST(ActivityTest, TwoDevicesEachGetExactNumbers) {
  ActivityLoop loop;
  loop.gpu->PlaceStream(7, /*device=*/1);
  for (int i = 0; i < 10; ++i) {
    loop.Step([&] {
      {
        PhaseScope p(*loop.session, Phase::kData);
        loop.clock->Advance(30 * kMs);
      }
      PhaseScope p(*loop.session, Phase::kForward);
      loop.gpu->Launch(10 * kMs, 0);
      loop.gpu->Launch(20 * kMs, 7);
      loop.clock->Advance(std::max(loop.gpu->Synchronize(0), loop.gpu->Synchronize(7)));
    });
  }
  const Summary s = loop.DrainAndSummarize();
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_DOUBLE_EQ(*s.devices[0].gpu_idle_pct, 80.0);  // 10 of 50 ms
  EXPECT_DOUBLE_EQ(*s.devices[1].gpu_idle_pct, 60.0);  // 20 of 50 ms
  EXPECT_DOUBLE_EQ(*s.gpu_idle_pct, 70.0);
}

TEST(ActivityTest, ADeviceThatStoppedWorkingLeavesTheAverageAfterTenSeconds) {
  ActivityLoop loop;
  loop.gpu->PlaceStream(7, /*device=*/1);
  loop.Step([&] {
    loop.gpu->LaunchMemset(4, kUs, 7);  // a stray memset on device 1, once
    loop.gpu->Launch(kMs);
    loop.clock->Advance(loop.gpu->Synchronize());
  });
  loop.clock->Advance(11'000 * kMs);
  for (int i = 0; i < 3; ++i) {
    loop.Step([&] {
      loop.gpu->Launch(kMs);
      loop.clock->Advance(loop.gpu->Synchronize());
    });
  }
  const Summary s = loop.DrainAndSummarize();
  ASSERT_EQ(s.gpu_steps, 4);
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[1].gpu_steps, 1);  // only the step it worked in
  EXPECT_EQ(s.devices[0].gpu_steps, 4);
}

// Steps before the GPU was first used have no GPU numbers, whatever the
// worker had drained when it resolved them.
TEST(ActivityTest, StepsBeforeTheFirstGpuWorkHaveNoGpuNumbers) {
  ActivityLoop loop;
  loop.Step([&] { loop.clock->Advance(kMs); });
  loop.Step([&] {
    loop.gpu->Launch(kMs);
    loop.clock->Advance(loop.gpu->Synchronize());
  });
  const Summary s = loop.DrainAndSummarize();
  EXPECT_EQ(s.steps, 2);
  EXPECT_EQ(s.gpu_steps, 1);
  EXPECT_DOUBLE_EQ(*s.gpu_idle_pct, 0.0);
}

TEST(ActivityTest, DroppedRecordsAreCountedAndReported) {
  SimulatedDevice::Config c = WithActivity();
  c.activity_capacity = 10;  // fewer than one step's kernels between drains
  ActivityLoop loop(c);
  loop.Step([&] {
    PhaseScope p(*loop.session, Phase::kForward);
    for (int k = 0; k < 50; ++k) loop.gpu->Launch(kUs);
    loop.clock->Advance(kMs);
  });
  const Summary s = loop.DrainAndSummarize();
  EXPECT_EQ(loop.gpu->activity_dropped(), 40);
  ASSERT_TRUE(s.activity.has_value());
  EXPECT_EQ(s.activity->dropped_records, 40);
  EXPECT_THAT(FormatReport(s), HasSubstr("40 activity records were dropped"));
}

TEST(ActivityTest, ARefusedSubscriptionFallsBackToEventsAndSaysWhy) {
  auto gpu = std::make_shared<SimulatedDevice>(WithActivity());
  gpu->InjectFault(SimulatedDevice::Fault::kActivityRefused);
  auto clock = std::make_shared<ManualClock>();
  Session session(Options{.clock = clock, .stream = 0, .simulated_device = gpu});
  EXPECT_EQ(session.source(), Source::kEvents);
  {
    StepScope step(session);
    {
      PhaseScope p(session, Phase::kData);
      clock->Advance(30 * kMs);
    }
    PhaseScope p(session, Phase::kForward);
    gpu->Launch(10 * kMs);
    clock->Advance(10 * kMs);
  }
  clock->Advance(kMs);
  const Summary s = session.Summarize();
  EXPECT_EQ(s.source, Source::kEvents);
  EXPECT_THAT(s.source_reason, HasSubstr("MULTIPLE_SUBSCRIBERS"));
  const std::vector<Finding> findings = Diagnose(s);
  EXPECT_TRUE(std::any_of(findings.begin(), findings.end(), [](const Finding& f) {
    return f.id == "events-only" &&
           f.recommendation.find("MULTIPLE_SUBSCRIBERS") != std::string::npos;
  }));
}

TEST(ActivityTest, NoRecordsYetMeansNoGpuNumbersAndSaysWhy) {
  ActivityLoop loop;
  loop.Step([&] { loop.clock->Advance(kMs); });  // no GPU work at all
  const Summary s = loop.DrainAndSummarize();
  EXPECT_EQ(loop.session->source(), Source::kCupti);
  EXPECT_EQ(s.source, Source::kHost);
  EXPECT_FALSE(s.gpu_idle_pct.has_value());
  EXPECT_THAT(s.source_reason, HasSubstr("no activity records have arrived"));
  const std::vector<Finding> findings = Diagnose(s);
  EXPECT_TRUE(std::any_of(findings.begin(), findings.end(), [](const Finding& f) {
    return f.id == "host-only" && f.recommendation.find("no activity records") != std::string::npos;
  }));
}

TEST(ActivityTest, ReleasingCuptiLowersToEventsAndTheLoopGoesOn) {
  ActivityLoop loop;
  const auto step = [&] {
    loop.Step([&] {
      {
        PhaseScope p(*loop.session, Phase::kData);
        loop.clock->Advance(30 * kMs);
      }
      PhaseScope p(*loop.session, Phase::kForward);
      loop.gpu->Launch(10 * kMs);
      loop.clock->Advance(loop.gpu->Synchronize());
    });
  };
  for (int i = 0; i < 3; ++i) step();
  loop.clock->Advance(kMs);
  EXPECT_EQ(loop.session->Summarize().source, Source::kCupti);
  loop.session->ReleaseCupti();
  EXPECT_EQ(loop.session->source(), Source::kEvents);
  for (int i = 0; i < 3; ++i) step();
  const Summary s = loop.DrainAndSummarize();
  EXPECT_EQ(s.source, Source::kEvents);
  EXPECT_THAT(s.source_reason, HasSubstr("CUPTI released"));
  EXPECT_EQ(s.gpu_steps, 6);  // three exact, three from events (75 % is exact for both here)
  EXPECT_DOUBLE_EQ(*s.gpu_idle_pct, 75.0);
  EXPECT_EQ(loop.gpu->live_markers(), 0);
  loop.session->ReleaseCupti();  // again: nothing to do
  EXPECT_EQ(loop.session->source(), Source::kEvents);
}

TEST(ActivityTest, SummaryWithActivityRoundTripsThroughJson) {
  ActivityLoop loop;
  loop.Step([&] {
    PhaseScope p(*loop.session, Phase::kForward);
    loop.gpu->LaunchCopy(SimulatedDevice::Copy::kHostToDevice, 1024, kMs, true);
    loop.clock->Advance(2 * kMs);
  });
  const Summary s = loop.DrainAndSummarize();
  ASSERT_TRUE(s.activity.has_value());
  absl::StatusOr<Summary> back = SummaryFromJson(ToJson(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
}

}  // namespace
}  // namespace gpuscope
