// The compact window (core/step_window.h) against a plain model of it: a
// deque of the last `window` steps with every phase's full sample. Random
// steps (values past 32 bits, counts past what a byte holds, nested and
// repeated phases, device data set late or twice) must read back exactly,
// the incremental totals must equal sums over the model, SelectQuantiles()
// must equal ExactQuantiles() over the model's values, and a view must not
// change while the window moves on.

#include "core/step_window.h"

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "core/quantiles.h"
#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

struct ModelStep {
  StepRecord record;
  std::map<uint16_t, PhaseSample> phases;
};

bool operator==(const PhaseSample& a, const PhaseSample& b) {
  return a.total_ns == b.total_ns && a.top_ns == b.top_ns && a.count == b.count &&
         a.top_level == b.top_level && a.device_ns == b.device_ns && a.idle_ns == b.idle_ns &&
         a.backlog_ns == b.backlog_ns;
}

// A duration: mostly clustered around 1 ms (many values share a bucket),
// sometimes tiny, sometimes past 2^32 ns.
int64_t RandomNs(std::mt19937_64& rng) {
  switch (rng() % 10) {
    case 0: return static_cast<int64_t>(rng() % 200);
    case 1: return int64_t{5'000'000'000} + static_cast<int64_t>(rng() % 1'000'000);
    default: return 1'000'000 + static_cast<int64_t>(rng() % 20'000);
  }
}

// Phase `id`'s host-time quantiles as a summary finds them: through the
// chunks' cached values where they cover the buckets needed.
Quantiles SummaryQuantiles(const WindowView& view, uint16_t id) {
  return SelectQuantiles(
      view.phase_totals()[id].time, [&](auto f) { view.ForEachPhaseTime(id, f); },
      [&](const TargetBuckets& t, TargetSink& sink) { view.CollectPhaseTimes(id, t, sink); });
}

class StepWindowModelTest : public ::testing::TestWithParam<int> {};

TEST_P(StepWindowModelTest, MatchesAPlainModel) {
  const int capacity = GetParam();
  constexpr int kPhases = 6;
  StepWindow window(capacity, kPhases);
  std::deque<ModelStep> model;
  std::mt19937_64 rng(static_cast<uint64_t>(capacity) * 7919);
  int64_t t = 0;
  for (int step = 0; step < 5 * capacity + 37; ++step) {
    ModelStep m;
    m.record.begin_ns = t;
    m.record.end_ns = t + RandomNs(rng);
    m.record.samples = static_cast<int64_t>(rng() % 3) - 1;
    t = m.record.end_ns + 10;
    std::vector<std::pair<uint16_t, PhaseSample>> in;
    int64_t top_level = 0;
    for (uint16_t id = 0; id < kPhases; ++id) {
      if (rng() % 3 == 0) continue;
      PhaseSample p;
      p.total_ns = RandomNs(rng);
      switch (rng() % 3) {
        case 0: p.top_ns = 0; break;
        case 1: p.top_ns = p.total_ns; break;
        default: p.top_ns = p.total_ns / 3;
      }
      p.count = rng() % 8 == 0 ? 40 + static_cast<uint32_t>(rng() % 100)
                               : 1 + static_cast<uint32_t>(rng() % 3);
      p.top_level = p.top_ns > 0 || rng() % 2 == 0;
      top_level += p.top_ns;
      in.emplace_back(id, p);
      m.phases[id] = p;
    }
    m.record.top_level_ns = std::min(top_level, m.record.end_ns - m.record.begin_ns);
    const StepRecord& stored = window.Append(m.record, in);
    m.record.index = stored.index;
    ASSERT_EQ(stored.index, static_cast<uint64_t>(step));
    model.push_back(m);
    if (model.size() > static_cast<size_t>(capacity)) model.pop_front();

    // Device data arrives for an earlier step, sometimes twice (replaced).
    if (step >= 2 && rng() % 2 == 0) {
      const uint64_t index = static_cast<uint64_t>(step - 2);
      for (int repeat = 0; repeat < 1 + static_cast<int>(rng() % 2); ++repeat) {
        for (uint16_t id = 0; id < kPhases; ++id) {
          const int64_t device = RandomNs(rng), idle = static_cast<int64_t>(rng() % 1000);
          const int64_t backlog = rng() % 2 == 0 ? -1 : RandomNs(rng);
          window.SetPhaseDevice(id, index, device, idle, backlog);
          for (ModelStep& ms : model) {
            if (ms.record.index != index || ms.phases.count(id) == 0) continue;
            ms.phases[id].device_ns = device;
            ms.phases[id].idle_ns = idle;
            ms.phases[id].backlog_ns = backlog;
          }
        }
      }
    }
  }

  ASSERT_EQ(window.size(), model.size());
  const WindowView view = window.Snapshot();
  // Steps and samples read back exactly.
  size_t k = 0;
  view.ForEachStep([&](const StepRecord& s, const StepDevices*) {
    EXPECT_EQ(s.index, model[k].record.index);
    EXPECT_EQ(s.begin_ns, model[k].record.begin_ns);
    EXPECT_EQ(s.end_ns, model[k].record.end_ns);
    EXPECT_EQ(s.top_level_ns, model[k].record.top_level_ns);
    ++k;
  });
  EXPECT_EQ(k, model.size());
  for (uint16_t id = 0; id < kPhases; ++id) {
    std::vector<std::pair<uint64_t, PhaseSample>> seen;
    view.ForEachSample(id,
                       [&](uint64_t index, const PhaseSample& p) { seen.emplace_back(index, p); });
    std::vector<std::pair<uint64_t, PhaseSample>> want;
    for (const ModelStep& ms : model) {
      if (auto it = ms.phases.find(id); it != ms.phases.end())
        want.emplace_back(ms.record.index, it->second);
    }
    ASSERT_EQ(seen.size(), want.size()) << "phase " << id;
    for (size_t i = 0; i < seen.size(); ++i) {
      EXPECT_EQ(seen[i].first, want[i].first);
      EXPECT_TRUE(seen[i].second == want[i].second) << "phase " << id << " step " << want[i].first;
    }

    // The totals are the model's sums; the quantiles its exact ones.
    const PhaseTotals& totals = view.phase_totals()[id];
    std::vector<int64_t> times, devices;
    int64_t top = 0, count = 0, top_level = 0, idle = 0;
    for (const auto& [index, p] : want) {
      times.push_back(p.total_ns);
      top += p.top_ns;
      count += p.count;
      top_level += p.top_level ? 1 : 0;
      if (p.device_ns >= 0) {
        devices.push_back(p.device_ns);
        idle += p.idle_ns;
      }
    }
    EXPECT_EQ(totals.top_ns, top);
    EXPECT_EQ(totals.count, count);
    EXPECT_EQ(totals.top_level_steps, top_level);
    EXPECT_EQ(totals.idle_ns, idle);
    EXPECT_EQ(SelectQuantiles(totals.time, [&](auto f) { view.ForEachPhaseTime(id, f); }),
              ExactQuantiles(times));
    EXPECT_EQ(SummaryQuantiles(view, id), ExactQuantiles(times));
    EXPECT_EQ(SummaryQuantiles(view, id), ExactQuantiles(times)) << "second time, from the cache";
    EXPECT_EQ(SelectQuantiles(totals.device,
                              [&](auto f) {
                                view.ForEachSample(id, [&](uint64_t, const PhaseSample& p) {
                                  if (p.device_ns >= 0) f(p.device_ns);
                                });
                              }),
              ExactQuantiles(devices));
  }
}

INSTANTIATE_TEST_SUITE_P(Windows, StepWindowModelTest, ::testing::Values(1, 7, 64, 300, 5000));

TEST(StepWindowTest, AViewStaysAsItWasWhileTheWindowMovesOn) {
  StepWindow window(100, 4);
  const auto append = [&](int64_t ns) {
    StepRecord r;
    r.begin_ns = 0;
    r.end_ns = ns;
    window.Append(r, {{uint16_t{1}, PhaseSample{.total_ns = ns, .top_ns = ns, .count = 1}}});
  };
  for (int i = 0; i < 150; ++i) append(1000 + i);
  const WindowView before = window.Snapshot();
  const Quantiles q = SelectQuantiles(before.phase_totals()[1].time,
                                      [&](auto f) { before.ForEachPhaseTime(1, f); });
  // The window moves on, rewrites a step the view holds, takes device data.
  for (int i = 0; i < 30; ++i) append(900'000 + i);
  window.MutableStep(149)->end_ns = 123;
  window.SetPhaseDevice(1, 149, 5, 0, -1);
  EXPECT_EQ(before.size(), 100u);
  EXPECT_EQ(before.first_index(), 50u);
  EXPECT_EQ(before.back().end_ns, 1149);
  EXPECT_EQ(SelectQuantiles(before.phase_totals()[1].time,
                            [&](auto f) { before.ForEachPhaseTime(1, f); }),
            q);
  int64_t max_seen = 0;
  before.ForEachSample(1, [&](uint64_t, const PhaseSample& p) {
    max_seen = std::max(max_seen, p.total_ns);
    EXPECT_EQ(p.device_ns, -1);
  });
  EXPECT_EQ(max_seen, 1149);
  const WindowView after = window.Snapshot();
  EXPECT_EQ(after.back().end_ns, 900'029);
  EXPECT_EQ(window.Sample(1, 149)->device_ns, 5);
}

TEST(StepWindowTest, SummariesOfALiveWindowFindWhatSortingFinds) {
  // A window of 4096 steps (chunks of 1024) summarized every 61 steps while
  // it moves on, so that full chunks are read from their cached values and
  // the cache must follow quantiles that move to other buckets. Phase 0
  // drifts (every quantile changes bucket); phase 1 has runs of one value
  // at its median, so that some chunks hold too many values in a target
  // bucket to keep; phase 2 has values past 32 bits
  // and below 256 ns; phase 3 has gaps (absent in most steps).
  constexpr int kWindow = 4096;
  StepWindow window(kWindow, 4);
  std::deque<std::map<uint16_t, int64_t>> model;
  std::mt19937_64 rng(2026);
  std::optional<WindowView> held;  // an older view, so the window copies chunks
  for (int step = 0; step < 5 * kWindow; ++step) {
    std::map<uint16_t, int64_t> values;
    values[0] = 1'000'000 + step * 40 + static_cast<int64_t>(rng() % 20'000);
    values[1] = step % 1400 < 256 ? 3'000'000 : 2'000'000 + static_cast<int64_t>(rng() % 2'000'000);
    switch (rng() % 8) {
      case 0: values[2] = int64_t{5'000'000'000} + static_cast<int64_t>(rng() % 1'000); break;
      case 1: values[2] = static_cast<int64_t>(rng() % 256); break;
      default: values[2] = 300'000 + static_cast<int64_t>(rng() % 300'000);
    }
    if (rng() % 5 == 0) values[3] = 50'000 + static_cast<int64_t>(rng() % 100'000);
    std::vector<std::pair<uint16_t, PhaseSample>> in;
    for (const auto& [id, ns] : values)
      in.emplace_back(id, PhaseSample{.total_ns = ns, .top_ns = ns, .count = 1});
    StepRecord r;
    r.end_ns = 10'000'000;
    const uint64_t index = window.Append(r, in).index;
    model.push_back(values);
    if (model.size() > static_cast<size_t>(kWindow)) model.pop_front();
    // Device data for a step in a full chunk: the window copies the chunk a
    // view reads, cache and all.
    if (step >= 1500 && step % 97 == 0) window.SetPhaseDevice(0, index - 1100, 5, 0, -1);
    if (step % 61 != 60) continue;
    const WindowView view = window.Snapshot();
    for (uint16_t id = 0; id < 4; ++id) {
      std::vector<int64_t> times;
      for (const auto& m : model) {
        if (auto it = m.find(id); it != m.end()) times.push_back(it->second);
      }
      ASSERT_EQ(SummaryQuantiles(view, id), ExactQuantiles(times))
          << "phase " << id << " at step " << step;
    }
    if (step % 7 == 0) held = view;
  }
}

TEST(StepWindowTest, AViewIsReadOnAnotherThreadWhileTheWindowChanges) {
  // Run under ThreadSanitizer (label concurrency): a reader summarizing a
  // view races with nothing the window writes.
  StepWindow window(4096, 8);
  for (int i = 0; i < 5000; ++i) {
    StepRecord r;
    r.end_ns = 1000 + i;
    window.Append(r, {{uint16_t{2}, PhaseSample{.total_ns = i, .count = 1}}});
  }
  for (int round = 0; round < 20; ++round) {
    WindowView view = window.Snapshot();
    std::thread reader([v = std::move(view)] {
      int64_t n = 0;
      v.ForEachPhaseTime(2, [&](int64_t) { ++n; });
      EXPECT_EQ(n, 4096);
      (void)SelectQuantiles(v.phase_totals()[2].time, [&](auto f) { v.ForEachPhaseTime(2, f); });
    });
    // Two summaries of one view at once fill its chunks' caches together.
    std::thread summarizer([v = window.Snapshot()] {
      for (int i = 0; i < 3; ++i) (void)SummaryQuantiles(v, 2);
    });
    const WindowView shared = window.Snapshot();
    std::thread other([&shared] { (void)SummaryQuantiles(shared, 2); });
    (void)SummaryQuantiles(shared, 2);
    other.join();
    for (int i = 0; i < 300; ++i) {
      StepRecord r;
      r.end_ns = 1000 + i;
      const uint64_t index =
          window.Append(r, {{uint16_t{2}, PhaseSample{.total_ns = i, .count = 1}}}).index;
      window.SetPhaseDevice(2, index - 1, 7, 0, -1);
      window.MutableStep(index - 1)->samples = 3;
      window.SetPhaseDevice(2, index - 2000, 9, 0, -1);  // a full chunk, copied with its cache
    }
    reader.join();
    summarizer.join();
  }
}

TEST(StepWindowTest, SelectQuantilesMatchesExactOnAwkwardSamples) {
  std::mt19937_64 rng(42);
  const std::vector<std::vector<int64_t>> samples = {
      {7},
      {0, 0, 0, 0},
      {5, 5, 5, 5, 5, 6},
      {int64_t{1} << 50, 3, int64_t{1} << 46, 1},  // past the last bucket
      {-4, 0, 12, 1'000'000},                      // negative "other" times clamp to bucket 0
  };
  std::vector<std::vector<int64_t>> all = samples;
  for (int n : {2, 3, 10, 99, 1000, 65536}) {
    std::vector<int64_t> v;
    for (int i = 0; i < n; ++i) v.push_back(1'000'000 + static_cast<int64_t>(rng() % 30'000));
    all.push_back(v);
  }
  for (std::vector<int64_t>& v : all) {
    WindowColumn column;
    for (int64_t x : v) column.Add(x);
    // Added and removed values leave no trace.
    column.Add(999);
    column.Remove(999);
    const Quantiles q = SelectQuantiles(column, [&](auto f) {
      for (int64_t x : v) f(x);
    });
    std::vector<int64_t> copy = v;
    EXPECT_EQ(q, ExactQuantiles(copy)) << v.size() << " values";
  }
}

}  // namespace
}  // namespace gpuscope::internal
