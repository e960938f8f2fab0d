// Stalls (docs/definitions.md "Stalls"): a step, or a phase outside steps,
// open past its limit is found by the background worker's pass while it is
// still open, said once, kept in the summary with its exact duration once it
// ends, and becomes the "stall" finding and the Prometheus gauges. The
// normal long cases stay quiet: the first steps, a slow step the window has
// seen recur, a checkpoint between steps, a phase around the loop. Driven on
// a ManualClock with the worker's passes made by hand.

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/stalls.h"
#include "gmock/gmock.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/gpuscope.h"
#include "gpuscope/report.h"
#include "gpuscope/testing.h"
#include "gtest/gtest.h"
#include "session/session_impl.h"

namespace gpuscope {
namespace {

using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;

const Finding* Find(const std::vector<Finding>& fs, const std::string& id) {
  for (const Finding& f : fs) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

// A session on a manual clock whose worker never passes by itself.
struct Loop {
  explicit Loop(double stall_after_s = 0, int warmup = 0,
                std::shared_ptr<SimulatedDevice> gpu = nullptr) {
    SetLogSink([this](LogLevel level, std::string_view m) {
      if (level == LogLevel::kWarning && m.find("stall") != std::string_view::npos) {
        warnings.emplace_back(m);
      }
    });
    Options o{.clock = clock,
              .flush_interval_ms = 10000,
              .stream = gpu != nullptr ? uint64_t{0} : kNoStream,
              .telemetry_interval_ms = 0,
              .simulated_device = gpu,
              .warmup_steps = warmup,
              .stall_after_s = stall_after_s};
    o.on_stall = [this](const Stall& s) { called.push_back(s); };
    session = Session::Create(std::move(o)).value();
  }
  ~Loop() { SetLogSink(nullptr); }

  void Pass() { internal::SessionTestPeer::Impl(*session).Pump(); }
  // Advances the clock by `ns` in steps of `every`, passing after each.
  void Wait(int64_t ns, int64_t every = kS) {
    for (int64_t t = 0; t < ns; t += every) {
      clock->Advance(std::min(every, ns - t));
      Pass();
    }
  }
  // `n` steps of `ns` each, in phase forward.
  void Steps(int n, int64_t ns) {
    for (int i = 0; i < n; ++i) {
      StepScope step(*session);
      PhaseScope forward(*session, Phase::kForward);
      clock->Advance(ns);
    }
    Pass();
  }

  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::unique_ptr<Session> session;
  std::vector<std::string> warnings;
  std::vector<Stall> called;
};

TEST(StallLimitTest, FromTheWindowsStepTimesWithAFloorAndLongerForTheFirstSteps) {
  using internal::StallHistory;
  // Before ten measured steps, and while warm-up lasts: 300 s at least.
  EXPECT_EQ(internal::StepStallLimit(StallHistory{.measured_steps = 9, .step_p99_s = 1}, 0), 300);
  EXPECT_EQ(internal::StepStallLimit(
                StallHistory{.measured_steps = 50, .warming_up = true, .step_p99_s = 1}, 0),
            300);
  EXPECT_EQ(internal::StepStallLimit(StallHistory{.measured_steps = 9}, 900), 900);
  // Then 10 x p99, twice the longest step, at least 30 s.
  EXPECT_EQ(internal::StepStallLimit(StallHistory{.measured_steps = 10, .step_p99_s = 0.1}, 0), 30);
  EXPECT_EQ(internal::StepStallLimit(StallHistory{.measured_steps = 10, .step_p99_s = 5}, 0), 50);
  EXPECT_EQ(internal::StepStallLimit(
                StallHistory{.measured_steps = 10, .step_p99_s = 1, .step_max_s = 40}, 0),
            80);
  // Given: as given once the history exists; infinity: never.
  EXPECT_EQ(internal::StepStallLimit(
                StallHistory{.measured_steps = 10, .step_p99_s = 1, .step_max_s = 40}, 2),
            2);
  EXPECT_TRUE(std::isinf(internal::StepStallLimit(StallHistory{.measured_steps = 10}, INFINITY)));
  // Outside steps: 10 x the base, or 3 x the longest earlier run.
  EXPECT_EQ(internal::OutsideStallLimit(0, 0), 300);
  EXPECT_EQ(internal::OutsideStallLimit(0, 2), 20);
  EXPECT_EQ(internal::OutsideStallLimit(200, 0), 600);
}

TEST(StallTest, AStepOpenPastItsLimitIsFoundWhileOpenSaidOnceAndKeptWithItsDuration) {
  Loop loop;
  loop.Steps(20, kS);  // 1 s steps: the limit is the 30 s floor
  std::optional<StepScope> step(std::in_place, *loop.session);
  std::optional<PhaseScope> forward(std::in_place, *loop.session, Phase::kForward);
  loop.Wait(29 * kS);
  EXPECT_FALSE(loop.session->CurrentStall().has_value());
  EXPECT_TRUE(loop.warnings.empty());
  EXPECT_THAT(ToPrometheus(loop.session->Summarize()), HasSubstr("gpuscope_stalled 0\n"));
  loop.Wait(2 * kS);  // 31 s open
  const std::optional<Stall> now = loop.session->CurrentStall();
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->step, 20);
  EXPECT_EQ(now->phase, "forward");
  EXPECT_EQ(now->phase_path, "forward");
  EXPECT_TRUE(now->ongoing);
  EXPECT_DOUBLE_EQ(now->limit, 30);
  EXPECT_NEAR(now->seconds, 31, 1e-9);
  EXPECT_NEAR(now->phase_seconds, 31, 1e-9);
  EXPECT_EQ(now->gpu, "no GPU timing (source host)");
  ASSERT_EQ(loop.warnings.size(), 1u);
  EXPECT_THAT(loop.warnings[0], HasSubstr("step 20 has been open 31.0 s"));
  EXPECT_THAT(loop.warnings[0], HasSubstr("in forward"));
  ASSERT_EQ(loop.called.size(), 1u);
  EXPECT_EQ(loop.called[0].step, 20);

  // While it lasts: the summary, the gauges and the finding say so.
  Summary during = loop.session->Summarize();
  ASSERT_EQ(during.stalls.size(), 1u);
  EXPECT_TRUE(during.stalls[0].ongoing);
  EXPECT_NEAR(during.step_in_progress, 31, 1e-9);
  const std::string metrics = ToPrometheus(during);
  EXPECT_THAT(metrics, HasSubstr("gpuscope_stalled 1\n"));
  EXPECT_THAT(metrics, HasSubstr("gpuscope_step_in_progress_seconds 31\n"));
  const std::vector<Finding> findings = Diagnose(during);
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].id, "stall");
  EXPECT_EQ(findings[0].severity, Severity::kHigh);
  EXPECT_THAT(findings[0].title, HasSubstr("Step 20 has been stuck for 31.0 s in forward"));

  // Said once, however long it lasts; kept exact once it ends.
  loop.Wait(20 * kS);
  EXPECT_EQ(loop.warnings.size(), 1u);
  EXPECT_EQ(loop.called.size(), 1u);
  loop.clock->Advance(500 * kMs);
  forward.reset();
  step.reset();
  loop.Pass();
  EXPECT_FALSE(loop.session->CurrentStall().has_value());
  Summary after = loop.session->Summarize();
  ASSERT_EQ(after.stalls.size(), 1u);
  EXPECT_FALSE(after.stalls[0].ongoing);
  EXPECT_DOUBLE_EQ(after.stalls[0].seconds, 51.5);  // the step's own duration, to the ns
  EXPECT_EQ(after.step_in_progress, 0);
  EXPECT_THAT(ToPrometheus(after), HasSubstr("gpuscope_stalled 0\n"));
  const std::vector<Finding> found = Diagnose(after);
  const Finding* f = Find(found, "stall");
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->title, HasSubstr("Step 20 hung for 51.5 s in forward"));
  EXPECT_THAT(FormatReport(after), HasSubstr("step 20 was open 51.5 s"));
  // It survives the run file.
  absl::StatusOr<Summary> back = SummaryFromJson(ToJson(after));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->stalls, after.stalls);
}

// The stall says what the GPU is doing, as far as the session's source can
// tell (simulated device): with events, whether the GPU has reached the
// innermost open scope's begin marker, and since when; with CUPTI, when the
// last activity it reported ended (a kernel still running is not reported).
TEST(StallTest, TheGpuStateComesFromTheEventsOrCupti) {
  for (const bool cupti : {false, true}) {
    for (const bool kernel_runs_on : {false, true}) {
      SCOPED_TRACE(
          absl::StrCat(cupti ? "cupti" : "events", kernel_runs_on ? ", a kernel runs on" : ""));
      SimulatedDevice::Config config;
      config.activity = cupti;
      auto device = std::make_shared<SimulatedDevice>(config);
      SimulatedDevice& gpu = *device;
      Loop loop(/*stall_after_s=*/2, /*warmup=*/0, device);
      for (int i = 0; i < 12; ++i) {
        StepScope step(*loop.session);
        PhaseScope forward(*loop.session, Phase::kForward);
        gpu.Launch(5 * kMs);
        loop.clock->Advance(10 * kMs);
      }
      loop.Pass();
      StepScope step(*loop.session);
      {
        PhaseScope data(*loop.session, Phase::kData);
        if (kernel_runs_on) gpu.Launch(3600 * kS);  // a collective that waits, or a hung kernel
      }
      PhaseScope forward(*loop.session, Phase::kForward);
      loop.Wait(3 * kS, kS / 2);
      const std::optional<Stall> now = loop.session->CurrentStall();
      ASSERT_TRUE(now.has_value());
      EXPECT_EQ(loop.session->Summarize().source, cupti ? Source::kCupti : Source::kEvents);
      if (cupti) {
        // The 12th step's kernel ended 5 ms into it, 2.5 s before the look.
        EXPECT_NEAR(now->last_gpu_work_seconds, 2.5 + 0.005, 1e-6);
        EXPECT_THAT(now->gpu, HasSubstr("the last GPU activity CUPTI reported ended 2.5 s ago"));
      } else if (kernel_runs_on) {
        EXPECT_TRUE(std::isnan(now->last_gpu_work_seconds));
        EXPECT_EQ(now->gpu,
                  "the GPU is still running work queued before `forward` began (busy, or hung "
                  "in a kernel)");
      } else {
        EXPECT_NEAR(now->last_gpu_work_seconds, 2.5, 1e-6);
        EXPECT_THAT(now->gpu, HasSubstr("the GPU finished the work queued before `forward` "
                                        "began 2.5 s ago"));
      }
      EXPECT_THAT(loop.warnings.at(0), HasSubstr(now->gpu));
    }
  }
}

TEST(StallTest, AStallEndedBetweenTwoLooksStillGetsItsExactDuration) {
  Loop loop(/*stall_after_s=*/2);
  loop.Steps(10, 100 * kMs);
  {
    StepScope step(*loop.session);
    loop.Wait(3 * kS);
    ASSERT_TRUE(loop.session->CurrentStall().has_value());
    loop.clock->Advance(250 * kMs);
  }
  loop.Pass();
  Summary s = loop.session->Summarize();
  ASSERT_EQ(s.stalls.size(), 1u);
  EXPECT_DOUBLE_EQ(s.stalls[0].seconds, 3.25);
  EXPECT_EQ(s.stalls[0].phase, "");
  EXPECT_THAT(internal::DescribeStall(s.stalls[0]), HasSubstr("outside any phase"));
}

TEST(StallTest, TheFirstStepsWaitLonger) {
  Loop loop(/*stall_after_s=*/2);
  {
    StepScope first(*loop.session);  // compilation, autotuning
    loop.Wait(200 * kS, 10 * kS);
  }
  loop.Steps(8, 100 * kMs);
  EXPECT_TRUE(loop.warnings.empty());
  EXPECT_TRUE(loop.session->Summarize().stalls.empty());
  {
    StepScope hung(*loop.session);  // step 9, still within the first ten
    loop.Wait(301 * kS, 10 * kS);
    ASSERT_TRUE(loop.session->CurrentStall().has_value());
    EXPECT_EQ(loop.session->CurrentStall()->limit, 300);
  }
}

TEST(StallTest, WarmUpStepsWaitLonger) {
  Loop loop(/*stall_after_s=*/2, /*warmup=*/30);
  loop.Steps(20, 100 * kMs);
  {
    StepScope slow(*loop.session);
    loop.Wait(60 * kS, 10 * kS);
  }
  EXPECT_TRUE(loop.warnings.empty());
}

TEST(StallTest, ASlowStepThatRecursIsNotAStallButTwiceItIs) {
  Loop loop;  // from the history: 10 x p99, 2 x the longest step, 30 s at least
  for (int i = 0; i < 2; ++i) {
    loop.Steps(199, 100 * kMs);
    loop.Steps(1, 40 * kS);  // evaluation every 200th step, inside it: below p99
  }
  {
    StepScope periodic(*loop.session);  // within 2 x 40 s
    loop.Wait(60 * kS);
  }
  EXPECT_TRUE(loop.warnings.empty());
  {
    StepScope hung(*loop.session);  // past 2 x 60 s, the longest step now
    loop.Wait(121 * kS);
  }
  ASSERT_EQ(loop.warnings.size(), 1u);
  EXPECT_THAT(loop.warnings[0], HasSubstr("its stall limit: 2 min 00 s"));
}

TEST(StallTest, ACheckpointBetweenStepsHasItsOwnLimitAndAPhaseAroundTheLoopNone) {
  Loop loop(/*stall_after_s=*/2);
  PhaseScope train(*loop.session, "train");  // around the whole loop: never watched
  loop.Steps(20, 100 * kMs);
  {
    PhaseScope checkpoint(*loop.session, Phase::kCheckpoint);  // limit 10 x 2 s
    loop.Wait(15 * kS);
  }
  loop.Wait(100 * kS, 10 * kS);  // between steps: nothing watched
  loop.Steps(5, 100 * kMs);
  EXPECT_TRUE(loop.warnings.empty());
  {
    PhaseScope checkpoint(*loop.session, Phase::kCheckpoint);
    PhaseScope write(*loop.session, "write");
    loop.Wait(46 * kS);  // 3 x its longest earlier run, 15 s
  }
  loop.Pass();
  ASSERT_EQ(loop.warnings.size(), 1u);
  EXPECT_THAT(loop.warnings[0], HasSubstr("phase `checkpoint` (outside steps) has been open"));
  const Summary s = loop.session->Summarize();
  ASSERT_EQ(s.stalls.size(), 1u);
  EXPECT_EQ(s.stalls[0].step, -1);
  EXPECT_EQ(s.stalls[0].phase, "write");
  EXPECT_EQ(s.stalls[0].phase_path, "checkpoint/write");
  EXPECT_DOUBLE_EQ(s.stalls[0].limit, 45);
  EXPECT_DOUBLE_EQ(s.stalls[0].seconds, 46);
}

TEST(StallTest, InfinityTurnsItOff) {
  Loop loop(/*stall_after_s=*/INFINITY);
  loop.Steps(20, 100 * kMs);
  {
    StepScope step(*loop.session);
    loop.Wait(1000 * kS, 100 * kS);
  }
  EXPECT_TRUE(loop.warnings.empty());
  EXPECT_TRUE(loop.session->Summarize().stalls.empty());
  EXPECT_FALSE(Options{.stall_after_s = -1}.Validate().ok());
  EXPECT_FALSE(Options{.stall_after_s = NAN}.Validate().ok());
}

TEST(StallTest, LogStallsOffLeavesItToTheCallerAndTheCallbackMayThrow) {
  auto clock = std::make_shared<ManualClock>();
  std::vector<std::string> logged;
  SetLogSink([&](LogLevel, std::string_view m) { logged.emplace_back(m); });
  int calls = 0;
  Options o{.clock = clock,
            .flush_interval_ms = 10000,
            .telemetry_interval_ms = 0,
            .stall_after_s = 1,
            .log_stalls = false};
  o.on_stall = [&](const Stall&) {
    ++calls;
    throw std::runtime_error("the job's own dump failed");
  };
  std::unique_ptr<Session> s = Session::Create(std::move(o)).value();
  for (int i = 0; i < 10; ++i) StepScope step(*s);
  internal::SessionTestPeer::Impl(*s).Pump();
  {
    StepScope step(*s);
    clock->Advance(2 * kS);
    internal::SessionTestPeer::Impl(*s).Pump();
  }
  SetLogSink(nullptr);
  EXPECT_EQ(calls, 1);
  EXPECT_THAT(logged, Contains(HasSubstr("on_stall raised: the job's own dump failed")));
  EXPECT_THAT(logged, Not(Contains(HasSubstr("has been open"))));
}

}  // namespace
}  // namespace gpuscope

namespace gpuscope {
namespace {

// The worker reads the scopes the recording thread publishes while it opens
// and closes them as fast as it can (ThreadSanitizer runs this): every stall
// it finds is one the loop really made, and each ends with its own record.
TEST(StallConcurrencyTest, TheWatchReadsTheOpenScopesWhileTheLoopRuns) {
  SetLogSink([](LogLevel, std::string_view) {});
  std::unique_ptr<Session> s = Session::Create(Options{.flush_interval_ms = 1,
                                                       .telemetry_interval_ms = 0,
                                                       .stall_after_s = 0.002,
                                                       .log_stalls = false})
                                   .value();
  // 1.6 s: the limit comes from the history, refreshed at most each second.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1600);
  int i = 0;
  while (std::chrono::steady_clock::now() < until) {
    StepScope step(*s);
    PhaseScope forward(*s, Phase::kForward);
    PhaseScope inner(*s, "inner");
    if (++i % 64 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a stall
  }
  s->Flush();
  const Summary sum = s->Summarize();
  SetLogSink(nullptr);
  ASSERT_GT(i, 1000);
  ASSERT_FALSE(sum.stalls.empty());
  // The planted stalls are in forward/inner. On a busy machine the loop can
  // also be descheduled past the 2 ms limit between two of its scopes: a
  // stall the loop really made, in a scope it had open then (a step's
  // "other", or forward before inner began). Never a scope it had not.
  int planted = 0;
  for (const Stall& x : sum.stalls) {
    EXPECT_FALSE(x.ongoing);
    EXPECT_GT(x.seconds, x.limit);
    EXPECT_THAT(x.phase_path, AnyOf("", "forward", "forward/inner"));
    planted += x.phase_path == "forward/inner";
  }
  EXPECT_GT(planted, 0);
}

// Another thread reads the recording thread's frames while it rewrites them
// as fast as it can (ThreadSanitizer runs this too): every read it is given
// is one the recording thread really had. The clock is set before each
// scope begins so that a frame's begin says what the frame was (a step, or
// which of two phases that take turns at the same depth): a read mixing
// two frames' fields would break the rule.
TEST(StallConcurrencyTest, AReadOfTheOpenScopesNeverMixesTwoFrames) {
  class TaggedClock : public Clock {
   public:
    int64_t NowNs() const noexcept override { return now.load(std::memory_order_relaxed); }
    std::atomic<int64_t> now{0};
  };
  auto clock = std::make_shared<TaggedClock>();
  std::unique_ptr<Session> s =
      Session::Create(Options{.clock = clock,
                              .flush_interval_ms = 5,
                              .telemetry_interval_ms = 0,
                              .stall_after_s = std::numeric_limits<double>::infinity()})
          .value();
  internal::Recorder& recorder = internal::SessionTestPeer::Impl(*s).recorder();
  const PhaseId a = s->RegisterPhase("a").value();
  const PhaseId b = s->RegisterPhase("b").value();
  constexpr int64_t kStep = 0, kA = 1, kB = 2, kEnd = 3;
  std::atomic<bool> done{false};
  int64_t reads = 0, mixed = 0, with_phase = 0;
  std::thread reader([&] {
    internal::Recorder::OpenScopes open;
    while (!done.load(std::memory_order_relaxed)) {
      if (!recorder.ReadOpenScopes(&open)) continue;
      ++reads;
      for (int i = 0; i < open.depth; ++i) {
        const internal::Recorder::OpenFrame& f = open.frames[static_cast<size_t>(i)];
        const int64_t tag = f.begin % 4;
        const bool right = f.is_step ? tag == kStep && i == 0
                                     : (f.name_id == a.value() && tag == kA) ||
                                           (f.name_id == b.value() && tag == kB);
        if (!right) ++mixed;
        if (!f.is_step) ++with_phase;
      }
    }
  });
  for (int64_t i = 1; i <= 300'000; ++i) {
    clock->now.store(16 * i + kStep);
    StepScope step(*s);
    for (int64_t k = 0; k < 2; ++k) {
      const bool first = (i + k) % 2 == 0;
      clock->now.store(16 * i + 4 * (k + 1) + (first ? kA : kB));
      PhaseScope phase(*s, first ? a : b);
      clock->now.store(16 * i + 4 * (k + 1) + kEnd);
    }
  }
  done = true;
  reader.join();
  EXPECT_GT(reads, 1000);
  EXPECT_GT(with_phase, 100);
  EXPECT_EQ(mixed, 0) << "of " << reads << " reads";
}

}  // namespace
}  // namespace gpuscope
