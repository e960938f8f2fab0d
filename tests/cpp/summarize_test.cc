// SummarizeWindow() (core/summarize.h) on a window built by hand: every
// field of the Summary is compared with one computed here from the steps'
// numbers, so a field the pure summary dropped, or took from the wrong
// input (window or session facts), fails the comparison. Then the rules it
// applies to the session's facts: a host source drops the GPU numbers, a
// subscription without records reads as host, the per-step activity counts
// come with the cupti source only.

#include "core/summarize.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/phase_table.h"
#include "core/quantiles.h"
#include "core/step_window.h"
#include "core/telemetry_window.h"
#include "gmock/gmock.h"
#include "gpuscope/phase.h"
#include "gpuscope/summary.h"
#include "gpuscope/version.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope::internal {
namespace {

using ::gpuscope::testing::kMs;
using ::gpuscope::testing::kUs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int kWindow = 4;
constexpr int kMaxPhases = 16;
constexpr uint16_t kData = static_cast<uint16_t>(Phase::kData);
constexpr uint16_t kForward = static_cast<uint16_t>(Phase::kForward);
constexpr uint16_t kEval = static_cast<uint16_t>(Phase::kEval);

// Seconds of `ns`, as the library converts them.
double Sec(int64_t ns) { return static_cast<double>(ns) * kNsToSeconds; }

// Exact quantiles of `ns`, from scratch (the window keeps its own totals).
Quantiles QuantilesOf(std::vector<int64_t> ns) { return ExactQuantiles(ns); }

// One phase's numbers in a step, as the assembler and the GPU sources
// would have left them (device -1: not measured).
struct PhaseIn {
  uint16_t id;
  int64_t total, top;
  uint32_t count;
  bool top_level;
  int64_t device, idle, backlog;
};

// A window of kWindow steps after five completed (the first has rolled
// out), phases data, forward (with "attention" nested in it once) and eval
// (outside steps only), telemetry on three steps, GPU numbers on three.
class SummarizeTest : public ::testing::Test {
 protected:
  SummarizeTest()
      : window_(kWindow, kMaxPhases), table_(kMaxPhases, [](uint16_t, std::string_view) {}) {
    attention_ = table_.Register("attention")->value();
    // duration, samples, tokens, top level, devices (busy), span, idle other, idle launch,
    // then each phase: id, total, top, count, top level, device, idle, backlog.
    AddStep(10 * kMs, 8, -1, 10 * kMs, {}, -1, -1, -1,  // rolls out of the window
            {{kForward, 10 * kMs, 10 * kMs, 1, true, 9 * kMs, 0, 0}});
    AddStep(20 * kMs, 32, -1, 15 * kMs, {{0, 12 * kMs}}, 18 * kMs, 2 * kMs, 1 * kMs,
            {{kData, 5 * kMs, 5 * kMs, 1, true, 0, 4 * kMs, 0},
             {kForward, 10 * kMs, 10 * kMs, 1, true, 8 * kMs, 1 * kMs, 3 * kMs}});
    AddStep(30 * kMs, 32, 1000, 30 * kMs, {{0, 25 * kMs}, {1, 15 * kMs}}, 28 * kMs, 5 * kMs, 0,
            {{kData, 10 * kMs, 10 * kMs, 1, true, 0, 12 * kMs, 1 * kMs},
             {kForward, 20 * kMs, 20 * kMs, 2, true, 18 * kMs, 3 * kMs, -1},
             {attention_, 5 * kMs, 0, 1, false, -1, -1, -1}});
    AddStep(40 * kMs, -1, 2000, 0, {}, -1, -1, -1, {});  // its device data is pending
    AddStep(10 * kMs, 16, -1, 4 * kMs, {{1, 10 * kMs}}, -1, 0, -1,
            {{kForward, 4 * kMs, 4 * kMs, 1, true, -1, -1, -1}});
    // Telemetry: steps 1, 2 and 4 are covered.
    window_.MutableStep(1)->telemetry.gpu_utilization_pct = 50;
    window_.MutableStep(1)->telemetry.host_cpu_pct = 10;
    window_.MutableStep(2)->telemetry.gpu_utilization_pct = 80;
    window_.MutableStep(4)->telemetry.host_cpu_pct = 30;
    telemetry_.SetSource("fake telemetry");

    window_.AddOutside(kEval, 3 * kMs);
    window_.AddOutside(kEval, 4 * kMs);
    for (int i = 0; i < 8; ++i) window_.CountIncomplete();

    facts_.window = kWindow;
    facts_.source = Source::kEvents;
    facts_.source_reason = "events from the test";
    facts_.simulated = true;
    facts_.gpu_clock_error = 2e-6;
    facts_.misuse = {.out_of_order_end = 1,
                     .stale_end = 2,
                     .nested_step = 3,
                     .wrong_thread = 4,
                     .too_deep = 5,
                     .invalid_phase = 6,
                     .dropped_records = 7,
                     .incomplete_steps = 99};  // ignored: the window counts those
  }

  // Completes a step as the assembler and the GPU sources would have left
  // it (no `devices`: its device data is not in).
  void AddStep(int64_t duration_ns, int64_t samples, int64_t tokens, int64_t top_level_ns,
               const std::vector<DeviceBusy>& devices, int64_t span_ns, int64_t idle_other_ns,
               int64_t idle_launch_ns, const std::vector<PhaseIn>& phases) {
    StepRecord s;
    s.begin_ns = 1000 * kMs + static_cast<int64_t>(window_.completed()) * 100 * kMs;
    s.end_ns = s.begin_ns + duration_ns;
    s.samples = samples;
    s.tokens = tokens;
    s.top_level_ns = top_level_ns;
    std::vector<std::pair<uint16_t, PhaseSample>> samples_in;
    for (const PhaseIn& p : phases) {
      samples_in.emplace_back(
          p.id,
          PhaseSample{
              .total_ns = p.total, .top_ns = p.top, .count = p.count, .top_level = p.top_level});
    }
    const uint64_t index = window_.Append(s, samples_in).index;
    StepRecord* stored = window_.MutableStep(index);
    if (!devices.empty()) {
      stored->num_devices = static_cast<uint8_t>(devices.size());
      stored->device_busy_ns = 0;
      StepDevices* d = window_.MutableDevices(index);
      for (size_t i = 0; i < devices.size(); ++i) {
        d->devices[i] = devices[i];
        stored->device_busy_ns += devices[i].busy_ns;
      }
    }
    stored->device_span_ns = span_ns;
    stored->idle_other_ns = idle_other_ns;
    stored->idle_launch_ns = idle_launch_ns;
    for (const PhaseIn& p : phases) {
      if (p.device >= 0) window_.SetPhaseDevice(p.id, index, p.device, p.idle, p.backlog);
    }
  }

  WindowSnapshot Snapshot(std::optional<int64_t> activity_dropped = std::nullopt) const {
    std::vector<std::string> names;
    for (int id = 0; id < table_.size(); ++id)
      names.emplace_back(table_.Name(static_cast<uint16_t>(id)));
    return {.window = window_.Snapshot(),
            .phase_names = names,
            .telemetry = telemetry_.SampleStats(window_),
            .pending_steps = 1,
            .activity_dropped = activity_dropped};
  }

  // The summary of the window under facts_, computed here field by field.
  Summary Expected() const {
    Summary e;
    e.version = GPUSCOPE_VERSION;
    e.source = Source::kEvents;
    e.source_reason = "events from the test";
    e.simulated = true;
    e.window = kWindow;
    e.steps = 4;
    e.total_steps = 5;
    e.pending_steps = 1;
    e.window_time = Sec(100 * kMs);
    e.step_time = QuantilesOf({20 * kMs, 30 * kMs, 40 * kMs, 10 * kMs});
    e.lifetime_step_time = window_.lifetime.Summarize();
    EXPECT_EQ(e.lifetime_step_time.count, 5);
    e.gpu_steps = 3;
    e.device_step_time = QuantilesOf({18 * kMs, 28 * kMs});
    e.gpu_clock_error = 2e-6;
    // 80 samples over 60 ms of steps that gave a count; 3000 tokens over 70 ms.
    e.samples_per_second = 80.0 / Sec(60 * kMs);
    e.tokens_per_second = 3000.0 / Sec(70 * kMs);
    // Device time: 20 + 2 * 30 + 10 = 90 ms, of which idle 8 + 20 + 0.
    e.gpu_idle_pct = 100.0 * static_cast<double>(28 * kMs) / static_cast<double>(90 * kMs);
    const auto idle_pct = [](int64_t ns) {
      return 100.0 * static_cast<double>(ns) / static_cast<double>(90 * kMs);
    };
    e.idle_by_cause = {{"other", idle_pct(7 * kMs)},
                       {"launch", idle_pct(1 * kMs)},
                       {"forward", idle_pct(4 * kMs)},
                       {"data", idle_pct(16 * kMs)}};
    e.devices = {{.device = 0, .gpu_steps = 2, .gpu_idle_pct = 100.0 * 13.0 / 50.0},
                 {.device = 1, .gpu_steps = 2, .gpu_idle_pct = 100.0 * 15.0 / 40.0}};
    const auto share = [](int64_t ns) {
      return static_cast<double>(ns) / static_cast<double>(100 * kMs);
    };
    PhaseStats other{.name = "other",
                     .builtin = true,
                     .top_level = true,
                     .steps = 4,
                     .count = 4,
                     .total = Sec(51 * kMs),
                     .share = share(51 * kMs),
                     .inclusive_share = share(51 * kMs),
                     .time = QuantilesOf({5 * kMs, 0, 40 * kMs, 6 * kMs}),
                     .device = {}};
    PhaseStats forward{.name = "forward",
                       .builtin = true,
                       .top_level = true,
                       .steps = 3,
                       .count = 4,
                       .total = Sec(34 * kMs),
                       .share = share(34 * kMs),
                       .inclusive_share = share(34 * kMs),
                       .time = QuantilesOf({4 * kMs, 20 * kMs, 10 * kMs}),
                       .device = QuantilesOf({18 * kMs, 8 * kMs}),
                       .backlog_p50 = Sec(3 * kMs)};
    PhaseStats data{.name = "data",
                    .builtin = true,
                    .top_level = true,
                    .steps = 2,
                    .count = 2,
                    .total = Sec(15 * kMs),
                    .share = share(15 * kMs),
                    .inclusive_share = share(15 * kMs),
                    .time = QuantilesOf({10 * kMs, 5 * kMs}),
                    .device = QuantilesOf({0, 0}),
                    .backlog_p50 = Sec(500 * kUs)};
    PhaseStats attention{.name = "attention",
                         .steps = 1,
                         .count = 1,
                         .total = Sec(5 * kMs),
                         .inclusive_share = share(5 * kMs),
                         .time = QuantilesOf({5 * kMs}),
                         .device = {}};
    PhaseStats eval{.name = "eval",
                    .builtin = true,
                    .time = {},
                    .device = {},
                    .outside_steps_count = 2,
                    .outside_steps_total = Sec(7 * kMs)};
    e.phases = {other, forward, data, attention, eval};  // by share, inclusive share, name
    TelemetryStats t;
    t.source = "fake telemetry";
    t.steps = 3;
    t.gpu_utilization_pct = (50.0 * 2e7 + 80.0 * 3e7) / (2e7 + 3e7);  // weighted by step time
    t.host_cpu_pct = (10.0 * 2e7 + 30.0 * 1e7) / (2e7 + 1e7);
    e.telemetry = t;
    e.misuse = {.out_of_order_end = 1,
                .stale_end = 2,
                .nested_step = 3,
                .wrong_thread = 4,
                .too_deep = 5,
                .invalid_phase = 6,
                .dropped_records = 7,
                .incomplete_steps = 8};
    return e;
  }

  StepWindow window_;
  PhaseTable table_;
  TelemetryWindow telemetry_;
  uint16_t attention_ = 0;
  SummaryInputs facts_;
};

TEST_F(SummarizeTest, EveryFieldComesFromTheWindowOrTheFacts) {
  const Summary s = SummarizeWindow(Snapshot(), facts_);
  const Summary e = Expected();
  // Field by field first, for a readable failure; then the whole.
  EXPECT_EQ(s.version, e.version);
  EXPECT_EQ(s.source, e.source);
  EXPECT_EQ(s.source_reason, e.source_reason);
  EXPECT_EQ(s.simulated, e.simulated);
  EXPECT_EQ(s.window, e.window);
  EXPECT_EQ(s.steps, e.steps);
  EXPECT_EQ(s.total_steps, e.total_steps);
  EXPECT_EQ(s.pending_steps, e.pending_steps);
  EXPECT_EQ(s.window_time, e.window_time);
  EXPECT_EQ(s.step_time, e.step_time);
  EXPECT_EQ(s.lifetime_step_time, e.lifetime_step_time);
  EXPECT_EQ(s.gpu_steps, e.gpu_steps);
  EXPECT_EQ(s.device_step_time, e.device_step_time);
  EXPECT_EQ(s.gpu_clock_error, e.gpu_clock_error);
  EXPECT_EQ(s.samples_per_second, e.samples_per_second);
  EXPECT_EQ(s.tokens_per_second, e.tokens_per_second);
  EXPECT_EQ(s.gpu_idle_pct, e.gpu_idle_pct);
  EXPECT_EQ(s.idle_by_cause, e.idle_by_cause);
  EXPECT_EQ(s.devices, e.devices);
  EXPECT_EQ(s.activity, e.activity);
  EXPECT_EQ(s.telemetry, e.telemetry);
  EXPECT_EQ(s.misuse, e.misuse);
  ASSERT_EQ(s.phases.size(), e.phases.size());
  for (size_t i = 0; i < s.phases.size(); ++i)
    EXPECT_EQ(s.phases[i], e.phases[i]) << e.phases[i].name;
  EXPECT_EQ(s, e);
}

TEST_F(SummarizeTest, HostSourceKeepsTheHostNumbersAndDropsTheGpuOnes) {
  facts_.source = Source::kHost;
  facts_.source_reason = "lowered to host";
  const Summary s = SummarizeWindow(Snapshot(/*activity_dropped=*/0), facts_);
  Summary e = Expected();
  e.source = Source::kHost;
  e.source_reason = "lowered to host";
  e.simulated = false;  // never a simulated host
  e.gpu_idle_pct.reset();
  e.idle_by_cause.clear();
  e.devices.clear();
  EXPECT_FALSE(s.activity.has_value());
  EXPECT_EQ(s, e);
}

TEST_F(SummarizeTest, ASubscriptionWithoutRecordsReadsAsHostAndSaysWhy) {
  facts_.source = Source::kCupti;
  facts_.source_reason = "activity records from fake CUPTI";
  facts_.awaiting_activity = true;
  const Summary s = SummarizeWindow(Snapshot(/*activity_dropped=*/0), facts_);
  EXPECT_EQ(s.source, Source::kHost);
  EXPECT_THAT(s.source_reason, StartsWith("activity records from fake CUPTI; "));
  EXPECT_THAT(s.source_reason, HasSubstr("no activity records have arrived yet"));
  EXPECT_FALSE(s.simulated);
  EXPECT_FALSE(s.gpu_idle_pct.has_value());
  EXPECT_FALSE(s.activity.has_value());
  EXPECT_TRUE(s.devices.empty());
  EXPECT_EQ(s.step_time, Expected().step_time);
}

TEST_F(SummarizeTest, ActivityCountsComeWithTheCuptiSourceOnly) {
  // Per-step counts on the three steps with GPU numbers (step 2 on two devices).
  window_.MutableDevices(1)->activity = {.kernels = 10,
                                         .kernel_median_ns = 100 * kUs,
                                         .h2d_bytes = 1000,
                                         .syncs = 1,
                                         .sync_ns = 2 * kMs,
                                         .kernel_ns = 6 * kMs};
  window_.MutableDevices(2)->activity = {.kernels = 20,
                                         .kernel_median_ns = 200 * kUs,
                                         .h2d_bytes = 2000,
                                         .pageable_copies = 3,
                                         .kernel_ns = 20 * kMs,
                                         .collective_ns = 4 * kMs,
                                         .collective_exposed_ns = 6 * kMs};  // clipped to the total
  window_.MutableDevices(4)->activity = {.d2h_bytes = 300, .copies = 3};
  window_.MutableDevices(3)->activity = {.kernels = 1000};  // no device data: not counted

  EXPECT_FALSE(SummarizeWindow(Snapshot(), facts_).activity.has_value());  // events

  facts_.source = Source::kCupti;
  const Summary s = SummarizeWindow(Snapshot(/*activity_dropped=*/3), facts_);
  ASSERT_TRUE(s.activity.has_value());
  const ActivityStats& a = *s.activity;
  EXPECT_DOUBLE_EQ(a.kernels_per_step, 10.0);
  EXPECT_DOUBLE_EQ(a.kernel_time_p50, Sec(150 * kUs));
  EXPECT_DOUBLE_EQ(a.h2d_bytes_per_step, 1000.0);
  EXPECT_DOUBLE_EQ(a.d2h_bytes_per_step, 100.0);
  EXPECT_DOUBLE_EQ(a.copies_per_step, 1.0);
  EXPECT_DOUBLE_EQ(a.pageable_copies_per_step, 1.0);
  EXPECT_DOUBLE_EQ(a.syncs_per_step, 1.0 / 3);
  EXPECT_DOUBLE_EQ(a.sync_time_per_step, Sec(2 * kMs) / 3);
  // Per device: step 2's 20 ms ran on two.
  EXPECT_DOUBLE_EQ(a.kernel_time_per_step, Sec(16 * kMs) / 3);
  EXPECT_DOUBLE_EQ(a.collective_time_per_step, Sec(2 * kMs) / 3);
  EXPECT_DOUBLE_EQ(a.exposed_collective_time_per_step, Sec(2 * kMs) / 3);
  EXPECT_EQ(a.dropped_records, 3);
}

TEST_F(SummarizeTest, AnEmptyWindowHasNoOtherPhase) {
  StepWindow empty(kWindow, kMaxPhases);
  const Summary s = SummarizeWindow(
      {.window = empty.Snapshot(), .phase_names = {"data"}, .telemetry = std::nullopt}, facts_);
  EXPECT_EQ(s.steps, 0);
  EXPECT_EQ(s.step_time, Quantiles{});
  EXPECT_TRUE(s.phases.empty());
  EXPECT_FALSE(s.telemetry.has_value());  // no telemetry window
  EXPECT_FALSE(s.gpu_idle_pct.has_value());
  EXPECT_EQ(s.misuse.dropped_records, 7);
  EXPECT_EQ(s.misuse.incomplete_steps, 0);
}

}  // namespace
}  // namespace gpuscope::internal
