// The interval math behind the cupti source: hand-worked steps and a
// brute-force reference on random activity.

#include "core/activity_timeline.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

constexpr int64_t kUs = 1'000;
constexpr int64_t kMs = 1'000'000;

DeviceInterval Kernel(int64_t b, int64_t e, int64_t launch = -1, uint32_t stream = 0,
                      uint32_t device = 0) {
  DeviceInterval a;
  a.begin_ns = b;
  a.end_ns = e;
  a.launch_ns = launch;
  a.stream = stream;
  a.device = device;
  return a;
}

TEST(ActivityTimelineTest, StarvedStepIsIdleInDataExactly) {
  // step [0, 40 ms]: data [0, 30], forward [30, 40] runs a 10 ms kernel.
  std::vector<DeviceInterval> acts = {Kernel(30 * kMs, 40 * kMs, 30 * kMs)};
  ActivityStepInput in;
  in.begin_ns = 0;
  in.end_ns = 40 * kMs;
  in.phases = {{0, 0, 0, 30 * kMs}, {2, 0, 30 * kMs, 40 * kMs}};
  in.activity = acts;
  const ActivityStepResult r = AnalyzeActivityStep(in);
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.busy_ns, 10 * kMs);
  EXPECT_EQ(r.idle_ns, 30 * kMs);
  EXPECT_EQ(r.phases[0].idle_ns, 30 * kMs);
  EXPECT_EQ(r.idle_launch_ns, 0);
  EXPECT_EQ(r.counts.kernels, 1);
  EXPECT_EQ(r.counts.kernel_median_ns, 10 * kMs);
}

TEST(ActivityTimelineTest, ShortGapsBetweenKernelsAreLaunchOverhead) {
  // 100 kernels of 10 us with 5 us gaps (a launch-bound loop), then a 1 ms
  // gap the host spends in `optimizer`.
  std::vector<DeviceInterval> acts;
  int64_t t = 0;
  for (int i = 0; i < 100; ++i) {
    acts.push_back(Kernel(t, t + 10 * kUs, t - 2 * kUs, 0));
    t += 15 * kUs;
  }
  const int64_t last_end = t - 5 * kUs;
  acts.push_back(Kernel(last_end + kMs, last_end + kMs + 10 * kUs, last_end + kMs - kUs, 0));
  ActivityStepInput in;
  in.begin_ns = 0;
  in.end_ns = last_end + kMs + 10 * kUs;
  in.phases = {{4, 0, last_end, last_end + kMs}};
  in.activity = acts;
  const ActivityStepResult r = AnalyzeActivityStep(in);
  EXPECT_EQ(r.busy_ns, 101 * 10 * kUs);
  EXPECT_EQ(r.idle_launch_ns, 99 * 5 * kUs);
  EXPECT_EQ(r.phases[0].idle_ns, kMs);  // the long gap is the optimizer's
  EXPECT_EQ(r.idle_other_ns, 0);
  // Each kernel's launch began after its predecessor ended (3 us later) but
  // the one after the long gap too: the GPU waited on the host every time.
  EXPECT_EQ(r.counts.host_wait_gaps, 100);
  EXPECT_EQ(r.counts.kernel_median_ns, 10 * kUs);
}

TEST(ActivityTimelineTest, KernelsQueuedAheadAreNotHostWaits) {
  // Launched long before they run: the stream never waited for the host.
  std::vector<DeviceInterval> acts;
  for (int i = 0; i < 10; ++i) acts.push_back(Kernel(i * kMs, (i + 1) * kMs, 0));
  ActivityStepInput in;
  in.end_ns = 10 * kMs;
  in.activity = acts;
  const ActivityStepResult r = AnalyzeActivityStep(in);
  EXPECT_EQ(r.counts.host_wait_gaps, 0);
  EXPECT_EQ(r.idle_ns, 0);
}

TEST(ActivityTimelineTest, CopiesSyncsAndCounts) {
  std::vector<DeviceInterval> acts;
  DeviceInterval h2d = Kernel(0, kMs, 0);
  h2d.kind = ActivityKind::kMemcpyH2D;
  h2d.bytes = 4 << 20;
  h2d.pageable = true;
  DeviceInterval d2h = Kernel(5 * kMs, 5 * kMs + 10 * kUs, 5 * kMs);
  d2h.kind = ActivityKind::kMemcpyD2H;
  d2h.bytes = 4;
  DeviceInterval sync = Kernel(2 * kMs, 5 * kMs);  // the host blocked 3 ms (.item())
  sync.kind = ActivityKind::kSync;
  DeviceInterval memset = Kernel(6 * kMs, 7 * kMs, 6 * kMs);
  memset.kind = ActivityKind::kMemset;
  acts = {h2d, d2h, sync, memset, Kernel(kMs, 5 * kMs, kMs)};
  ActivityStepInput in;
  in.end_ns = 10 * kMs;
  in.activity = acts;
  const ActivityStepResult r = AnalyzeActivityStep(in);
  EXPECT_EQ(r.counts.copies, 2);
  EXPECT_EQ(r.counts.pageable_copies, 1);
  EXPECT_EQ(r.counts.h2d_bytes, 4 << 20);
  EXPECT_EQ(r.counts.d2h_bytes, 4);
  EXPECT_EQ(r.counts.syncs, 1);
  EXPECT_EQ(r.counts.sync_ns, 3 * kMs);
  EXPECT_EQ(r.counts.kernels, 1);
  // The sync is not device activity: busy is [0, 5.01] and [6, 7].
  EXPECT_EQ(r.busy_ns, 5 * kMs + 10 * kUs + kMs);
}

TEST(ActivityTimelineTest, IdleAfterASyncIsTheSyncsUnlessTheLoaderHeldTheHost) {
  // Step [0, 20 ms]: a kernel [0, 5]; the host blocks in .item() over
  // [1, 5.02] (it returns as the queue drains), works on the host until 8,
  // launches a kernel [8, 10]; data [10, 16] with the GPU idle, a kernel
  // [16, 18] after a second sync over [15, 16]... that one returns while
  // the loader holds the host: data's idle, not the sync's. A third kernel
  // [18.01, 19] after a 10 us gap is launch overhead, not idle after a sync.
  DeviceInterval first_sync = Kernel(1 * kMs, 5 * kMs + 20 * kUs);
  first_sync.kind = ActivityKind::kSync;
  DeviceInterval loader_sync = Kernel(15 * kMs, 15 * kMs + 500 * kUs);
  loader_sync.kind = ActivityKind::kSync;
  std::vector<DeviceInterval> acts = {Kernel(0, 5 * kMs, 0),
                                      first_sync,
                                      Kernel(8 * kMs, 10 * kMs, 8 * kMs),
                                      loader_sync,
                                      Kernel(16 * kMs, 18 * kMs, 16 * kMs),
                                      Kernel(18 * kMs + 10 * kUs, 19 * kMs, 18 * kMs)};
  ActivityStepInput in;
  in.end_ns = 20 * kMs;
  in.phases = {{2, 0, 0, 10 * kMs}, {0, 0, 10 * kMs, 16 * kMs}, {4, 0, 16 * kMs, 20 * kMs}};
  in.activity = acts;
  const ActivityStepResult r = AnalyzeActivityStep(in);
  // [5, 8] follows the first sync; [10, 16] is data's; [19, 20] no sync's.
  EXPECT_EQ(r.counts.sync_idle_ns, 3 * kMs);
  EXPECT_EQ(r.phases[1].idle_ns, 6 * kMs);
  EXPECT_EQ(r.counts.syncs, 2);

  // A sync called when the device had already drained owns the idle from
  // its call, not from the drain: kernel [0, 1], sync over [3, 3.01], the
  // next kernel at 6.
  DeviceInterval late_sync = Kernel(3 * kMs, 3 * kMs + 10 * kUs);
  late_sync.kind = ActivityKind::kSync;
  std::vector<DeviceInterval> late = {Kernel(0, kMs, 0), late_sync,
                                      Kernel(6 * kMs, 7 * kMs, 6 * kMs)};
  ActivityStepInput in2;
  in2.end_ns = 7 * kMs;
  in2.activity = late;
  EXPECT_EQ(AnalyzeActivityStep(in2).counts.sync_idle_ns, 3 * kMs);
}

TEST(ActivityTimelineTest, KernelsAreTalliedByNameAndTheInnermostPhaseAtTheirLaunch) {
  // 20 names; name i runs (i + 1) x 10 us, launched in forward [0, 1 ms)
  // (and, for the largest, again in a nested "attention" [0.5, 0.6 ms) and
  // once with no phase open, after 2 ms). The step keeps its 16 largest
  // names, each with every phase it was launched in.
  std::vector<DeviceInterval> acts;
  int64_t t = 0;
  const auto run = [&](uint32_t name, int64_t launch, int64_t ns) {
    DeviceInterval k = Kernel(t, t + ns, launch);
    k.name = name;
    acts.push_back(k);
    t += ns;
  };
  for (uint32_t i = 0; i < 20; ++i) run(100 + i, 100 * kUs, (i + 1) * 10 * kUs);
  run(119, 550 * kUs, 5 * kUs);
  run(119, 2500 * kUs, 7 * kUs);
  ActivityStepInput in;
  in.end_ns = 10 * kMs;
  in.phases = {{2, 0, 0, kMs}, {12, 1, 500 * kUs, 600 * kUs}};
  in.activity = acts;
  const std::vector<KernelTally> k = AnalyzeActivityStep(in).kernels;
  ASSERT_EQ(k.size(), 18u);  // 16 names, the largest in three places
  EXPECT_EQ(k[0].name, 119u);
  EXPECT_EQ(k[0].phase_id, 2);
  EXPECT_EQ(k[0].ns, 200 * kUs);
  EXPECT_EQ(k[0].count, 1u);
  for (const KernelTally& x : k) EXPECT_GE(x.name, 104u);  // the 4 smallest names left out
  int nested = 0, none = 0;
  for (const KernelTally& x : k) {
    if (x.name == 119 && x.phase_id == 12) nested += static_cast<int>(x.ns == 5 * kUs);
    if (x.name == 119 && x.phase_id == -1) none += static_cast<int>(x.ns == 7 * kUs);
  }
  EXPECT_EQ(nested, 1);
  EXPECT_EQ(none, 1);
}

TEST(ActivityTimelineTest, KnownDevicesTakePartEvenWhenIdle) {
  std::vector<DeviceInterval> acts = {Kernel(0, kMs, 0, 0, /*device=*/0)};
  ActivityStepInput in;
  in.begin_ns = 2 * kMs;
  in.end_ns = 4 * kMs;
  in.activity = acts;
  EXPECT_TRUE(AnalyzeActivityStep(in).devices.empty());
  in.known_devices = {0, 1};
  const ActivityStepResult r = AnalyzeActivityStep(in);
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.idle_ns, 4 * kMs);
  EXPECT_EQ(r.idle_other_ns, 4 * kMs);
}

TEST(ActivityTimelineTest, LaunchedDeviceTimeCountsWorkByWhereItWasLaunched) {
  // Launched in [0, 1 ms): two overlapping kernels that run later; one
  // launched outside.
  std::vector<DeviceInterval> acts = {Kernel(5 * kMs, 7 * kMs, 100 * kUs),
                                      Kernel(6 * kMs, 8 * kMs, 200 * kUs),
                                      Kernel(8 * kMs, 9 * kMs, 2 * kMs)};
  EXPECT_EQ(LaunchedDeviceTime(acts, {{0, kMs}}), 3 * kMs);
  EXPECT_EQ(LaunchedDeviceTime(acts, {{0, kMs}, {2 * kMs, 3 * kMs}}), 4 * kMs);
  EXPECT_EQ(LaunchedDeviceTime(acts, {}), 0);
}

// Brute force on 1 us cells: busy if any device activity covers the cell;
// otherwise a launch gap if activity lies on both sides on that device and
// the whole gap is under the threshold; otherwise the innermost phase's.
TEST(ActivityTimelineTest, MatchesABruteForceReferenceOnRandomActivity) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<DeviceInterval> acts;
    for (int k = static_cast<int>(rng() % 12); k > 0; --k) {
      const int64_t b = static_cast<int64_t>(rng() % 200) * kUs;
      const int64_t d = static_cast<int64_t>(1 + rng() % 30) * kUs;
      DeviceInterval a =
          Kernel(b, b + d, b, static_cast<uint32_t>(rng() % 2), static_cast<uint32_t>(rng() % 2));
      if (rng() % 5 == 0) a.kind = ActivityKind::kMemcpyH2D;
      if (rng() % 6 == 0) a.kind = ActivityKind::kMemset;
      if (a.kind == ActivityKind::kKernel && rng() % 3 == 0) {
        a.kernel_class = KernelClass::kCollective;
      }
      if (rng() % 7 == 0) a.kind = ActivityKind::kSync;
      acts.push_back(a);
    }
    ActivityStepInput in;
    in.begin_ns = static_cast<int64_t>(rng() % 40) * kUs;
    in.end_ns = in.begin_ns + static_cast<int64_t>(20 + rng() % 150) * kUs;
    in.launch_threshold_ns = static_cast<int64_t>(1 + rng() % 25) * kUs;
    for (int p = static_cast<int>(rng() % 4); p > 0; --p) {
      const int64_t b = in.begin_ns + static_cast<int64_t>(rng() % 150) * kUs;
      in.phases.push_back(
          {p, static_cast<int>(rng() % 2), b, b + static_cast<int64_t>(rng() % 60) * kUs});
    }
    in.activity = acts;
    const ActivityStepResult got = AnalyzeActivityStep(in);
    for (const ActivityDeviceResult& d : got.devices) {
      int64_t busy = 0, launch = 0, other = 0;
      // Per cell, the highest-priority category running: kernel, memcpy,
      // memset, comm.
      int64_t by_category[4] = {0, 0, 0, 0};
      for (int64_t t = in.begin_ns; t < in.end_ns; t += kUs) {
        bool covered = false;
        int category = 4;
        int64_t prev_end = -1, next_begin = -1;
        for (const DeviceInterval& a : acts) {
          if (a.kind == ActivityKind::kSync || static_cast<int>(a.device) != d.device) continue;
          if (a.begin_ns <= t && t < a.end_ns) {
            covered = true;
            const int c = a.kind == ActivityKind::kMemset              ? 2
                          : a.kind != ActivityKind::kKernel            ? 1
                          : a.kernel_class == KernelClass::kCollective ? 3
                                                                       : 0;
            category = std::min(category, c);
          }
          if (a.end_ns <= t) prev_end = std::max(prev_end, a.end_ns);
          if (a.begin_ns > t && (next_begin < 0 || a.begin_ns < next_begin))
            next_begin = a.begin_ns;
        }
        if (covered) {
          ++busy;
          ++by_category[category];
        } else if (prev_end >= 0 && next_begin >= 0 &&
                   next_begin - prev_end < in.launch_threshold_ns) {
          ++launch;
        } else {
          int inner = -1;
          for (size_t i = 0; i < in.phases.size(); ++i) {
            const HostPhase& p = in.phases[i];
            if (p.begin_ns <= t && t < p.end_ns &&
                (inner < 0 || p.depth > in.phases[static_cast<size_t>(inner)].depth)) {
              inner = static_cast<int>(i);
            }
          }
          if (inner < 0) ++other;
        }
      }
      ASSERT_EQ(d.busy_ns, busy * kUs) << "trial " << trial;
      ASSERT_EQ(d.idle_launch_ns, launch * kUs) << "trial " << trial;
      ASSERT_EQ(d.idle_other_ns, other * kUs) << "trial " << trial;
      ASSERT_EQ(d.busy_ns + d.idle_ns, in.end_ns - in.begin_ns) << "trial " << trial;
      ASSERT_EQ(d.kernel_ns, by_category[0] * kUs) << "trial " << trial;
      ASSERT_EQ(d.memcpy_ns, by_category[1] * kUs) << "trial " << trial;
      ASSERT_EQ(d.memset_ns, by_category[2] * kUs) << "trial " << trial;
      ASSERT_EQ(d.comm_ns, by_category[3] * kUs) << "trial " << trial;
    }
    int64_t phase_idle = 0;
    for (const auto& p : got.phases) phase_idle += p.idle_ns;
    ASSERT_EQ(got.idle_ns, got.idle_launch_ns + got.idle_other_ns + phase_idle)
        << "trial " << trial;
  }
}

}  // namespace
}  // namespace gpuscope::internal
