// The interval math behind the events source, against hand-worked cases and
// a brute-force reference on random small timelines.

#include "core/device_timeline.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

// Times in the hand-worked cases are in milliseconds.
Boundary B(int64_t h_ms, int64_t c_ms) { return {h_ms * 1'000'000, c_ms * 1'000'000}; }
constexpr int64_t kMs = 1'000'000;

TEST(DeviceTimelineTest, IdleGpuWaitingOnDataIsIdleInData) {
  // step [0, 40]: data [0, 30] with no GPU work, forward [30, 40] waits on a
  // 10-unit kernel.
  StepTimelineInput in;
  in.begin = B(0, 0);
  in.end = B(40, 40);
  in.phases = {{0, 0, true, B(0, 0), B(30, 30)}, {2, 0, false, B(30, 30), B(40, 40)}};
  const StepTimeline t = AnalyzeStepTimeline(in);
  EXPECT_EQ(t.window_ns, 40 * kMs);
  EXPECT_EQ(t.busy_upper_ns, 10 * kMs);
  EXPECT_EQ(t.idle_lower_ns, 30 * kMs);
  EXPECT_EQ(t.phases[0].idle_ns, 30 * kMs);
  EXPECT_EQ(t.phases[1].idle_ns, 0 * kMs);
  EXPECT_EQ(t.phases[1].device_span_ns, 10 * kMs);
  EXPECT_EQ(t.idle_other_ns, 0 * kMs);
}

TEST(DeviceTimelineTest, BacklogAtTheStepsBeginIsBusy) {
  // The previous step's work runs until 15 into this one.
  StepTimelineInput in;
  in.begin = B(0, 15);
  in.end = B(40, 40);
  in.phases = {{0, 0, true, B(0, 15), B(30, 30)}, {2, 0, false, B(30, 30), B(40, 40)}};
  const StepTimeline t = AnalyzeStepTimeline(in);
  EXPECT_EQ(t.backlog_begin_ns, 15 * kMs);
  EXPECT_EQ(t.busy_upper_ns, 25 * kMs);      // [0, 15] backlog + [30, 40] forward
  EXPECT_EQ(t.phases[0].idle_ns, 15 * kMs);  // [15, 30] in data
  EXPECT_EQ(t.phases[0].backlog_begin_ns, 15 * kMs);
}

TEST(DeviceTimelineTest, WorkShownInsideDataIsNotAssumedAway) {
  // data's end marker completes after both the work before it and its own
  // record time: data enqueued GPU work, so its interval counts as busy.
  StepTimelineInput in;
  in.begin = B(0, 0);
  in.end = B(40, 50);
  in.phases = {{0, 0, true, B(0, 0), B(30, 38)}, {2, 0, false, B(30, 38), B(40, 50)}};
  const StepTimeline t = AnalyzeStepTimeline(in);
  EXPECT_EQ(t.busy_upper_ns, 40 * kMs);  // [0, 38] and [38, 50] clipped to the window
  EXPECT_EQ(t.idle_lower_ns, 0 * kMs);
}

TEST(DeviceTimelineTest, IdleOutsidePhasesIsOtherAndNestedPhasesWin) {
  StepTimelineInput in;
  in.begin = B(0, 0);
  in.end = B(100, 100);
  // forward [10, 60] with attention [20, 40] nested; GPU work only in [50, 60].
  in.phases = {{2, 0, false, B(10, 10), B(60, 60)}, {9, 1, false, B(20, 20), B(40, 40)}};
  const StepTimeline t = AnalyzeStepTimeline(in);
  // Non-data intervals all count as possibly busy: the bound is loose here.
  EXPECT_EQ(t.busy_upper_ns, 100 * kMs);
  EXPECT_EQ(t.idle_lower_ns, 0 * kMs);
  in.phases.push_back({0, 0, true, B(60, 60), B(100, 100)});  // a data phase after it
  const StepTimeline u = AnalyzeStepTimeline(in);
  EXPECT_EQ(u.busy_upper_ns, 60 * kMs);
  EXPECT_EQ(u.phases[2].idle_ns, 40 * kMs);
}

// Brute force: split the window at every marker time and classify each
// elementary segment by its midpoint, with the definition written directly
// (see device_timeline.h). Times are in 10 us units so that the marker slack
// (20 us) matters.
TEST(DeviceTimelineTest, MatchesABruteForceReferenceOnRandomTimelines) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    // Random in-order marker sequence: host times increase, completions are
    // max(host, previous completion) + a random queueing delay.
    const int n_phases = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> h, c;
    int64_t t_host = 0, t_dev = 0;
    constexpr int64_t kUnit = 10'000;
    for (int i = 0; i < 2 + 2 * n_phases; ++i) {
      t_host += static_cast<int64_t>(rng() % 20) * kUnit;
      const int64_t delay = rng() % 3 == 0 ? static_cast<int64_t>(rng() % 30) * kUnit : 0;
      t_dev = std::max(t_dev, t_host) + delay;
      h.push_back(t_host);
      c.push_back(t_dev);
    }
    // Markers 0 and last are the step; phases are consecutive pairs between,
    // some marked data.
    StepTimelineInput in;
    in.begin = Boundary{h.front(), c.front()};
    in.end = Boundary{h.back(), c.back()};
    for (int p = 0; p < n_phases; ++p) {
      const size_t b = 1 + 2 * static_cast<size_t>(p);
      in.phases.push_back(
          {p, 0, rng() % 2 == 0, Boundary{h[b], c[b]}, Boundary{h[b + 1], c[b + 1]}});
    }
    const StepTimeline got = AnalyzeStepTimeline(in);

    auto maybe_busy = [&](int64_t t) {
      if (in.begin.host_ns <= t && t < in.begin.device_ns) return true;
      for (size_t i = 0; i + 1 < h.size(); ++i) {
        const int64_t lo = std::max(c[i], h[i]);
        const int64_t hi = c[i + 1];
        if (!(lo <= t && t < hi)) continue;
        bool in_data = false;
        const int64_t mid = h[i] + (h[i + 1] - h[i]) / 2;
        for (const PhaseSpan& p : in.phases) {
          if (p.is_data && p.begin.host_ns <= mid && mid < p.end.host_ns) in_data = true;
        }
        const bool shown = c[i + 1] > std::max(c[i], h[i + 1]) + kMarkerSlackNs;
        if (h[i + 1] > h[i] && in_data && !shown) continue;
        return true;
      }
      return false;
    };
    std::vector<int64_t> cuts(h.begin(), h.end());
    cuts.insert(cuts.end(), c.begin(), c.end());
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    int64_t busy = 0, other = 0;
    std::vector<int64_t> idle(in.phases.size(), 0);
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      const int64_t lo = std::max(cuts[k], in.begin.host_ns);
      const int64_t hi = std::min(cuts[k + 1], in.end.host_ns);
      if (hi <= lo) continue;
      const int64_t t = lo;  // every marker time is a cut: the segment is uniform
      if (maybe_busy(t)) {
        busy += hi - lo;
        continue;
      }
      int inner = -1;
      for (size_t i = 0; i < in.phases.size(); ++i) {
        if (in.phases[i].begin.host_ns <= t && t < in.phases[i].end.host_ns)
          inner = static_cast<int>(i);
      }
      if (inner < 0) {
        other += hi - lo;
      } else {
        idle[static_cast<size_t>(inner)] += hi - lo;
      }
    }
    ASSERT_EQ(got.busy_upper_ns, busy) << "trial " << trial;
    ASSERT_EQ(got.idle_other_ns, other) << "trial " << trial;
    for (size_t i = 0; i < idle.size(); ++i)
      ASSERT_EQ(got.phases[i].idle_ns, idle[i]) << "trial " << trial;
  }
}

// ---- Several streams and devices.

Boundary L(int64_t h_ms, int64_t c_ms, uint16_t lane) { return {h_ms * kMs, c_ms * kMs, lane}; }

TEST(DeviceTimelineTest, CopyStreamWorkCountsOnItsDevice) {
  // step [0, 40] on lane 0: data [0, 30]; h2d [30, 32] on a copy stream
  // (lane 1, same device) whose 2 ms copy the host waits for; forward
  // [32, 40] on lane 0 with an 8 ms kernel.
  StepTimelineInput in;
  in.begin = L(0, 0, 0);
  in.end = L(40, 40, 0);
  in.phases = {{0, 0, true, L(0, 0, 0), L(30, 30, 0)},
               {1, 0, false, L(30, 30, 1), L(32, 32, 1)},
               {2, 0, false, L(32, 32, 0), L(40, 40, 0)}};
  in.lane_device = {0, 0};
  const StepTimeline t = AnalyzeStepTimeline(in);
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].device, 0);
  EXPECT_EQ(t.busy_upper_ns, 10 * kMs);
  EXPECT_EQ(t.idle_lower_ns, 30 * kMs);
  EXPECT_EQ(t.phases[0].idle_ns, 30 * kMs);
  EXPECT_EQ(t.phases[1].device_span_ns, 2 * kMs);
  EXPECT_EQ(t.lane_last.size(), 2u);
}

TEST(DeviceTimelineTest, SecondDeviceGetsItsOwnIdle) {
  // Device 1 (lane 1) works 10 ms in `stage2` [20, 30]: the host enqueues
  // and moves on, so the phase's end marker completes at 30.
  StepTimelineInput in;
  in.begin = L(0, 0, 0);
  in.end = L(40, 40, 0);
  in.phases = {{0, 0, true, L(0, 0, 0), L(20, 20, 0)},
               {9, 0, false, L(20, 20, 1), L(20, 30, 1)},
               {2, 0, false, L(20, 20, 0), L(40, 40, 0)}};
  in.phases[1].end.host_ns += 100'000;  // enqueueing took 0.1 ms
  in.lane_device = {0, 1};
  const StepTimeline t = AnalyzeStepTimeline(in);
  ASSERT_EQ(t.devices.size(), 2u);
  EXPECT_EQ(t.devices[0].device, 0);
  EXPECT_EQ(t.devices[0].idle_lower_ns, 20 * kMs);  // data [0, 20]
  EXPECT_EQ(t.devices[1].device, 1);
  EXPECT_EQ(t.devices[1].busy_upper_ns, 10 * kMs);  // [20, 30]
  EXPECT_EQ(t.devices[1].idle_lower_ns, 30 * kMs);
  EXPECT_EQ(t.idle_lower_ns, 50 * kMs);      // summed over devices
  EXPECT_EQ(t.phases[0].idle_ns, 40 * kMs);  // both devices idle in data
  EXPECT_EQ(t.phases[2].idle_ns, 10 * kMs);  // device 1 idle in forward after 30
}

TEST(DeviceTimelineTest, NamedStreamIsIdleBetweenItsScopes) {
  // A copy stream used only in h2d [30, 32]: between the previous step's
  // last marker on it (completed at -5) and this h2d, nothing ran there.
  StepTimelineInput in;
  in.begin = L(0, 0, 0);
  in.end = L(40, 40, 0);
  in.phases = {{0, 0, true, L(0, 0, 0), L(30, 30, 0)},
               {1, 0, false, L(30, 30, 1), L(32, 32, 1)},
               {2, 0, false, L(32, 32, 0), L(40, 40, 0)}};
  in.lane_device = {0, 0};
  in.past = {LanePast{LanePast::State::kKnown, L(-1, -1, 0)},
             LanePast{LanePast::State::kKnown, L(-8, -5, 1)}};
  EXPECT_EQ(AnalyzeStepTimeline(in).idle_lower_ns, 30 * kMs);
  // The previous step's copy ran 5 ms into this one.
  in.past[1].last = L(-8, 5, 1);
  EXPECT_EQ(AnalyzeStepTimeline(in).idle_lower_ns, 25 * kMs);
  // Unknown history (a step was dropped): the copy stream may have been
  // busy until its first marker here completed.
  in.past[1].state = LanePast::State::kUnknown;
  EXPECT_EQ(AnalyzeStepTimeline(in).idle_lower_ns, 0 * kMs);
}

// Soundness on random multi-stream, multi-device loops that keep the stated
// assumptions: the idle lower bound never exceeds the true idle on any
// device, step after step.
TEST(DeviceTimelineTest, BoundNeverExceedsTruthAcrossStreamsAndDevices) {
  std::mt19937 rng(11);
  constexpr int kLanes = 3;
  const std::vector<int> lane_device = {0, 0, 1};
  constexpr int64_t kUnit = 10'000;  // 10 us
  for (int trial = 0; trial < 1000; ++trial) {
    int64_t host = 0;
    int64_t busy_until[kLanes] = {0, 0, 0};
    std::vector<std::pair<int64_t, int64_t>> kernels[2];  // per device
    std::vector<LanePast> past(kLanes);
    const auto mark = [&](uint16_t lane) {
      const Boundary b{host, std::max(host, busy_until[lane]), lane};
      host += static_cast<int64_t>(rng() % 3) * kUnit;  // the record's own cost
      return b;
    };
    const auto launch = [&](uint16_t lane) {
      const int64_t begin = std::max(host, busy_until[lane]);
      const int64_t d = static_cast<int64_t>(1 + rng() % 40) * kUnit;
      busy_until[lane] = begin + d;
      kernels[lane_device[lane]].push_back({begin, begin + d});
      host += static_cast<int64_t>(rng() % 4) * kUnit;
    };
    for (int step = 0; step < 6; ++step) {
      StepTimelineInput in;
      in.lane_device = lane_device;
      in.past = past;
      in.begin = mark(0);
      const int n = 1 + static_cast<int>(rng() % 4);
      for (int p = 0; p < n; ++p) {
        const bool data = rng() % 3 == 0;
        // Any phase may name any stream, data included.
        const uint16_t lane = static_cast<uint16_t>(rng() % kLanes);
        PhaseSpan span{p, 0, data, mark(lane), {}};
        if (data) {
          host += static_cast<int64_t>(rng() % 50) * kUnit;  // waits for the loader
        } else {
          for (int k = static_cast<int>(rng() % 4); k > 0; --k) launch(lane);
          if (rng() % 3 == 0) {
            // A data phase nested in this one (on some stream), then more work.
            const uint16_t inner_lane = static_cast<uint16_t>(rng() % kLanes);
            PhaseSpan inner{100 + p, 1, true, mark(inner_lane), {}};
            host += static_cast<int64_t>(rng() % 30) * kUnit;
            inner.end = mark(inner_lane);
            in.phases.push_back(inner);
            for (int k = static_cast<int>(rng() % 3); k > 0; --k) launch(lane);
          }
          if (rng() % 2 == 0) host = std::max(host, busy_until[lane]);  // a sync
        }
        span.end = mark(lane);
        in.phases.push_back(span);
        if (rng() % 3 == 0) launch(0);  // work between phases, on the step's stream
      }
      in.end = mark(0);
      if (rng() % 8 == 0) {
        // Dropped (queue full): never analyzed, what it recorded is unknown.
        for (LanePast& p : past) {
          if (p.state != LanePast::State::kNone) p.state = LanePast::State::kUnknown;
        }
        past[0].state = LanePast::State::kUnknown;
        for (const PhaseSpan& p : in.phases) past[p.begin.lane].state = LanePast::State::kUnknown;
        continue;
      }
      const StepTimeline got = AnalyzeStepTimeline(in);
      for (const DeviceIdle& d : got.devices) {
        // True busy of the device within the window: brute force on 10 us cells.
        int64_t true_busy = 0;
        for (int64_t t = in.begin.host_ns; t < in.end.host_ns; t += kUnit) {
          for (const auto& [b, e] : kernels[d.device]) {
            if (b <= t && t < e) {
              true_busy += kUnit;
              break;
            }
          }
        }
        const int64_t true_idle = (in.end.host_ns - in.begin.host_ns) - true_busy;
        ASSERT_LE(d.idle_lower_ns, true_idle)
            << "trial " << trial << " step " << step << " device " << d.device;
      }
      for (const Boundary& b : got.lane_last) past[b.lane] = {LanePast::State::kKnown, b};
      host += static_cast<int64_t>(rng() % 5) * kUnit;  // between steps
    }
  }
}

}  // namespace
}  // namespace gpuscope::internal
