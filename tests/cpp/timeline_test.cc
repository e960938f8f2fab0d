// Session::StepSeries() and ToChromeTrace(session) on the simulated device:
// the per-step series adds up and matches the summary; the trace holds the
// last trace_steps steps with their phases, device activity (cupti) or
// phases' device spans (events), and idle gaps labeled with their cause.

#include "gpuscope/timeline.h"

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/json.h"
#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gpuscope/testing.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::kMs;
using testing::kUs;

struct Loop {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::shared_ptr<SimulatedDevice> gpu;
  std::unique_ptr<Session> session;
  explicit Loop(bool activity, int trace_steps = 4) {
    SimulatedDevice::Config c;
    c.activity = activity;
    gpu = std::make_shared<SimulatedDevice>(c);
    session = std::make_unique<Session>(
        Options{.clock = clock, .stream = 0, .trace_steps = trace_steps, .simulated_device = gpu});
  }
  // 20 ms of data (the GPU idle), then forward: ten 1 ms kernels 10 us
  // apart (launch gaps), and the host waits for them.
  void Run(int steps) {
    for (int i = 0; i < steps; ++i) {
      StepScope step(*session);
      {
        PhaseScope p(*session, Phase::kData);
        clock->Advance(20 * kMs);
      }
      PhaseScope p(*session, Phase::kForward);
      for (int k = 0; k < 10; ++k) {
        gpu->Launch(1 * kMs, 0, "ampere_sgemm_128x64_nn");
        clock->Advance(1 * kMs + 10 * kUs);
      }
      clock->Advance(gpu->Synchronize());
    }
    clock->Advance(10'000 * kMs);
  }
};

std::vector<const internal::JsonValue*> Events(const internal::JsonValue& doc) {
  std::vector<const internal::JsonValue*> out;
  for (const internal::JsonValue& e : doc.at("traceEvents")) out.push_back(&e);
  return out;
}

std::string Str(const internal::JsonValue& e, std::string_view key) {
  const internal::JsonValue* v = internal::Find(e, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

TEST(TimelineTest, StepSeriesAddsUpAndAgreesWithTheSummary) {
  Loop loop(/*activity=*/true);
  loop.Run(12);
  const std::vector<StepPoint> series = loop.session->StepSeries();
  const Summary s = loop.session->Summarize();
  ASSERT_EQ(series.size(), 12u);
  double idle_pct = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    const StepPoint& p = series[i];
    EXPECT_EQ(p.index, i);
    double phases = 0;
    for (const auto& [name, seconds] : p.phases) phases += seconds;
    EXPECT_NEAR(phases, p.duration, 1e-12);
    EXPECT_NEAR(p.phases.at("data"), 0.020, 1e-12);
    ASSERT_TRUE(p.gpu_idle_pct.has_value());
    double idle = 0;
    for (const auto& [cause, seconds] : p.idle_by_cause) idle += seconds;
    EXPECT_NEAR(100 * idle / p.duration, *p.gpu_idle_pct, 1e-9);
    EXPECT_NEAR(p.idle_by_cause.at("data"), 0.020, 1e-12);
    EXPECT_GT(p.idle_by_cause.at("launch"), 0);
    idle_pct += *p.gpu_idle_pct;
  }
  EXPECT_NEAR(idle_pct / 12, *s.gpu_idle_pct, 1e-9);  // equal-length steps: the mean
  const std::string json = ToJson(series);
  absl::StatusOr<internal::JsonValue> doc = internal::ParseJson(json);
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(doc->at("steps").size(), 12u);
}

TEST(TimelineTest, TraceHoldsTheLastStepsWithActivityAndLabeledIdle) {
  Loop loop(/*activity=*/true, /*trace_steps=*/4);
  loop.Run(10);
  absl::StatusOr<internal::JsonValue> doc = internal::ParseJson(ToChromeTrace(*loop.session));
  ASSERT_TRUE(doc.ok()) << doc.status();
  std::set<std::string> steps;
  std::map<std::string, int> idle_causes, names, kernel_kinds;
  for (const internal::JsonValue* e : Events(*doc)) {
    if (Str(*e, "ph") != "X") continue;
    if (e->at("args").contains("what")) ++kernel_kinds[e->at("args").at("what").get<std::string>()];
    EXPECT_GE(e->at("ts").get<double>(), 0);
    EXPECT_GE(e->at("dur").get<double>(), 0);
    if (Str(*e, "cat") == "step") steps.insert(Str(*e, "name"));
    if (Str(*e, "cat") == "idle") ++idle_causes[e->at("args").at("cause").get<std::string>()];
    ++names[Str(*e, "name")];
  }
  EXPECT_EQ(steps, (std::set<std::string>{"step 6", "step 7", "step 8", "step 9"}));
  EXPECT_EQ(names["data"], 4);
  EXPECT_EQ(names["forward"], 4);
  // Kernels are named by their kernel, with their class beside it.
  EXPECT_EQ(names["ampere_sgemm_128x64_nn"], 40);
  EXPECT_EQ(kernel_kinds["kernel (FP32 GEMM)"], 40);
  EXPECT_EQ(names["sync (host blocked on the GPU)"], 4);
  EXPECT_EQ(idle_causes["data"], 4);     // the GPU idles through each step's data phase
  EXPECT_EQ(idle_causes["launch"], 36);  // and between its kernels
}

// StepColumns() holds what StepSeries() does, field by field: a phase or
// cause a step lacks is 0 in its column, a value not measured NaN.
void ExpectColumnsMatchSeries(const Session& session) {
  const std::vector<StepPoint> series = session.StepSeries();
  const SeriesColumns c = session.StepColumns();
  ASSERT_EQ(c.size(), series.size());
  ASSERT_EQ(c.phases.size(), c.phase_names.size());
  ASSERT_EQ(c.idle_by_cause.size(), c.idle_causes.size());
  if (!series.empty()) {
    EXPECT_EQ(c.phase_names.back(), "other");
  }
  std::set<std::string> series_phases, series_causes;
  const auto same = [](std::optional<double> want, double got) {
    return want.has_value() ? *want == got : std::isnan(got);
  };
  for (size_t i = 0; i < series.size(); ++i) {
    const StepPoint& p = series[i];
    EXPECT_EQ(c.index[i], p.index);
    EXPECT_EQ(c.begin[i], p.begin);
    EXPECT_EQ(c.duration[i], p.duration);
    for (size_t k = 0; k < c.phase_names.size(); ++k) {
      const auto it = p.phases.find(c.phase_names[k]);
      EXPECT_EQ(c.phases[k][i], it == p.phases.end() ? 0.0 : it->second)
          << "step " << i << " phase " << c.phase_names[k];
    }
    for (const auto& [name, seconds] : p.phases) series_phases.insert(name);
    EXPECT_TRUE(same(p.gpu_idle_pct, c.gpu_idle_pct[i])) << "step " << i;
    for (size_t k = 0; k < c.idle_causes.size(); ++k) {
      const auto it = p.idle_by_cause.find(c.idle_causes[k]);
      EXPECT_EQ(c.idle_by_cause[k][i], it == p.idle_by_cause.end() ? 0.0 : it->second)
          << "step " << i << " cause " << c.idle_causes[k];
    }
    for (const auto& [cause, seconds] : p.idle_by_cause) series_causes.insert(cause);
    EXPECT_TRUE(same(p.gpu_utilization_pct, c.gpu_utilization_pct[i]));
    EXPECT_TRUE(same(p.sm_clock_ratio, c.sm_clock_ratio[i]));
    EXPECT_TRUE(same(p.host_cpu_pct, c.host_cpu_pct[i]));
    EXPECT_TRUE(same(p.host_iowait_pct, c.host_iowait_pct[i]));
    EXPECT_TRUE(same(p.worker_cores, c.worker_cores[i]));
  }
  // A column for every phase and cause the series has, and no other.
  EXPECT_EQ(std::set<std::string>(c.phase_names.begin(), c.phase_names.end()), series_phases);
  EXPECT_EQ(std::set<std::string>(c.idle_causes.begin(), c.idle_causes.end()), series_causes);
}

TEST(TimelineTest, StepColumnsHoldWhatTheSeriesHolds) {
  {
    Loop loop(/*activity=*/true);
    loop.Run(12);
    ExpectColumnsMatchSeries(*loop.session);
  }
  {
    // Host only, a window that has rolled over, phases in some steps only,
    // a nested phase (no top-level time of its own), telemetry off.
    auto clock = std::make_shared<ManualClock>();
    Session session(Options{.window = 50, .clock = clock});
    const PhaseId rare = *session.RegisterPhase("rare");
    const PhaseId inner = *session.RegisterPhase("inner");
    for (int i = 0; i < 130; ++i) {
      StepScope step(session);
      {
        PhaseScope fwd(session, Phase::kForward);
        clock->Advance((1 + i % 7) * kMs);
        if (i % 3 == 0) {
          PhaseScope in(session, inner);
          clock->Advance(kMs);
        }
      }
      clock->Advance(i % 5 == 0 ? kMs : 0);  // "other"
      if (i % 11 == 0) {
        PhaseScope r(session, rare);
        clock->Advance(2 * kMs);
      }
    }
    ExpectColumnsMatchSeries(session);
    const SeriesColumns c = session.StepColumns();
    EXPECT_EQ(c.size(), 50u);
    EXPECT_EQ(c.index.front(), 80u);
    EXPECT_THAT(c.phase_names, ::testing::ElementsAre("forward", "rare", "other"));
  }
  {
    Session empty(Options{.clock = std::make_shared<ManualClock>()});
    const SeriesColumns c = empty.StepColumns();
    EXPECT_EQ(c.size(), 0u);
    EXPECT_TRUE(c.phase_names.empty());
  }
}

TEST(TimelineTest, TraceIdleSlicesMatchTheSeriesCauseByCauseOnRandomLoops) {
  // Random loops (no sync at a step's end, kernels queued across step
  // boundaries, gaps around the launch threshold): each kept step's idle
  // slices, summed per cause, equal the step series' idle by cause, and no
  // timestamp is negative.
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    const auto uniform = [&](int64_t lo, int64_t hi) {
      return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    Loop loop(/*activity=*/true, /*trace_steps=*/6);
    for (int i = 0; i < 12; ++i) {
      StepScope step(*loop.session);
      const bool fine =
          seed % 2 == 0;  // half the seeds: gaps near the 20 us threshold at step edges
      {
        PhaseScope p(*loop.session, Phase::kData);
        loop.clock->Advance(fine ? uniform(0, 30) * kUs : uniform(0, 3) * kMs);
      }
      PhaseScope p(*loop.session, Phase::kForward);
      const int kernels = static_cast<int>(uniform(1, 12));
      for (int k = 0; k < kernels; ++k) {
        loop.gpu->Launch((fine ? uniform(2, 30) : uniform(2, 400)) * kUs,
                         static_cast<uint64_t>(uniform(0, 1)));
        loop.clock->Advance(uniform(0, fine ? 30 : 60) * kUs);
      }
      if (uniform(0, 2) == 0) loop.clock->Advance(loop.gpu->Synchronize(0));
    }
    loop.clock->Advance(10'000 * kMs);
    const std::vector<StepPoint> series = loop.session->StepSeries();
    absl::StatusOr<internal::JsonValue> doc = internal::ParseJson(ToChromeTrace(*loop.session));
    ASSERT_TRUE(doc.ok()) << doc.status();
    std::map<int64_t, std::map<std::string, double>> traced;  // step -> cause -> s
    std::map<int64_t, double> traced_idle_ms;                 // step -> its device_time_ms idle
    for (const internal::JsonValue* e : Events(*doc)) {
      if (Str(*e, "ph") != "X") continue;
      EXPECT_GE(e->at("ts").get<double>(), 0) << "seed " << seed;
      if (Str(*e, "cat") == "step") {
        const int64_t step = *internal::AsInt64(e->at("args").at("index"));
        traced[step];
        // The step's device time by category sums to its duration, and its
        // idle is the idle slices' (checked below).
        const internal::JsonValue* by_category = internal::Find(e->at("args"), "device_time_ms");
        ASSERT_NE(by_category, nullptr) << "seed " << seed;
        const internal::JsonValue* gpu0 = internal::Find(*by_category, "gpu 0");
        ASSERT_NE(gpu0, nullptr) << "seed " << seed;
        double sum = 0;
        for (const char* key : {"kernel", "memcpy", "memset", "comm", "idle"}) {
          sum += gpu0->at(key).get<double>();
        }
        EXPECT_NEAR(sum, e->at("dur").get<double>() / 1e3, 1e-6) << "seed " << seed;
        traced_idle_ms[step] = gpu0->at("idle").get<double>();
      }
      if (Str(*e, "cat") != "idle") continue;
      const int64_t step = *internal::AsInt64(e->at("args").at("step"));
      traced[step][e->at("args").at("cause").get<std::string>()] +=
          e->at("dur").get<double>() * 1e-6;
    }
    ASSERT_EQ(traced.size(), 6u) << "seed " << seed;
    for (const auto& [step, causes] : traced) {
      const StepPoint& p = series[static_cast<size_t>(step)];
      ASSERT_EQ(p.index, static_cast<uint64_t>(step));
      double idle_s = 0;
      for (const auto& [cause, seconds] : causes) idle_s += seconds;
      EXPECT_NEAR(traced_idle_ms[step] * 1e-3, idle_s, 1e-8) << "seed " << seed << " step " << step;
      for (const auto& [cause, seconds] : p.idle_by_cause) {
        const auto it = causes.find(cause);
        EXPECT_NEAR(it != causes.end() ? it->second : 0.0, seconds, 1e-8)
            << "seed " << seed << " step " << step << " " << cause;
      }
      for (const auto& [cause, seconds] : causes) {
        EXPECT_TRUE(p.idle_by_cause.count(cause) != 0 || seconds < 1e-8)
            << "seed " << seed << " step " << step << ": traced " << cause << " the series lacks";
      }
    }
  }
}

TEST(TimelineTest, WithEventsTheTraceShowsEachPhasesDeviceSpan) {
  Loop loop(/*activity=*/false, /*trace_steps=*/2);
  loop.Run(5);
  ASSERT_EQ(loop.session->Summarize().source, Source::kEvents);
  absl::StatusOr<internal::JsonValue> doc = internal::ParseJson(ToChromeTrace(*loop.session));
  ASSERT_TRUE(doc.ok()) << doc.status();
  int spans = 0;
  for (const internal::JsonValue* e : Events(*doc)) {
    if (Str(*e, "cat") != "device_span") continue;
    ++spans;
    if (Str(*e, "name") == "forward") {
      EXPECT_NEAR(e->at("dur").get<double>(), 10'100,
                  1);  // us: its end marker is recorded after the sync
    }
  }
  EXPECT_EQ(spans, 4);  // data and forward, in each of the 2 kept steps
}

TEST(TimelineTest, NoTraceStepsMeansAnEmptyTraceAndBadValuesAreRefused) {
  Loop loop(/*activity=*/true, /*trace_steps=*/0);
  loop.Run(3);
  absl::StatusOr<internal::JsonValue> doc = internal::ParseJson(ToChromeTrace(*loop.session));
  ASSERT_TRUE(doc.ok());
  for (const internal::JsonValue* e : Events(*doc)) EXPECT_EQ(Str(*e, "ph"), "M");
  EXPECT_FALSE(Session(Options{.trace_steps = -1}).status().ok());
  EXPECT_FALSE(Session(Options{.trace_steps = 5000}).status().ok());
}

}  // namespace
}  // namespace gpuscope
