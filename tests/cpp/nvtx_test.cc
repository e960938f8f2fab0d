// Steps and phases reach NVTX as Nsight Systems sees them: this test loads a
// recording NVTX injection library through NVTX_INJECTION64_PATH (set before
// the first NVTX call, in main) and checks the ranges gpuscope emits.

#include <stdlib.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gpuscope/testing.h"
#include "gtest/gtest.h"
#include "support/nvtx_recorder.h"

namespace gpuscope {
namespace {

using testing::NvtxEvent;

// "push <message> [payload]" / "pop" for events in domain "gpuscope".
std::vector<std::string> GpuscopeRanges() {
  std::vector<std::string> out;
  for (const NvtxEvent& e : testing::NvtxRecorderEvents()) {
    if (e.domain != "gpuscope") continue;
    if (e.kind == NvtxEvent::Kind::kPush) {
      out.push_back("push " + e.message + (e.has_payload ? " " + std::to_string(e.payload) : ""));
    } else if (e.kind == NvtxEvent::Kind::kPop) {
      out.push_back("pop");
    }
  }
  return out;
}

TEST(NvtxTest, StepsAndPhasesAreRangesInTheGpuscopeDomain) {
  Session session;
  ASSERT_TRUE(testing::NvtxRecorderAttached()) << "NVTX did not load the recorder";
  testing::NvtxRecorderClear();
  for (int i = 0; i < 2; ++i) {
    StepScope step(session);
    {
      PhaseScope p(session, Phase::kData);
    }
    {
      PhaseScope p(session, Phase::kForward);
      PhaseScope q(session, "attention");
    }
  }
  EXPECT_THAT(
      GpuscopeRanges(),
      ::testing::ElementsAre("push step 0", "push data", "pop", "push forward", "push attention",
                             "pop", "pop", "pop", "push step 1", "push data", "pop", "push forward",
                             "push attention", "pop", "pop", "pop"));
  // Built-in phases carry a color for the timeline.
  for (const NvtxEvent& e : testing::NvtxRecorderEvents()) {
    if (e.kind == NvtxEvent::Kind::kPush) {
      EXPECT_TRUE(e.has_color) << e.message;
    }
  }
}

TEST(NvtxTest, RollingP95AndIdleAreCounterTracks) {
  // Steps of 10 ms, then 30 ms: the counter follows the window's p95; a
  // simulated GPU idle 75 % of each step gives the idle counter.
  auto clock = std::make_shared<ManualClock>();
  SimulatedDevice::Config c;
  c.activity = true;
  auto gpu = std::make_shared<SimulatedDevice>(c);
  Session session(Options{.window = 4, .clock = clock, .stream = 0, .simulated_device = gpu});
  testing::NvtxRecorderClear();
  const auto run = [&](int steps, int64_t ms) {
    for (int i = 0; i < steps; ++i) {
      StepScope step(session);
      {
        PhaseScope p(session, Phase::kData);
        clock->Advance(ms * 750'000);
      }
      gpu->Launch(ms * 250'000);
      clock->Advance(gpu->Synchronize());
    }
    clock->Advance(10'000'000'000);  // past the records' horizon and the 100 ms pacing
    session.Flush();
  };
  run(4, 10);
  run(4, 30);
  std::vector<std::string> registered;
  std::vector<std::pair<std::string, double>> samples;
  for (const NvtxEvent& e : testing::NvtxRecorderEvents()) {
    if (e.domain != "gpuscope") continue;
    if (e.kind == NvtxEvent::Kind::kCounterRegister) registered.push_back(e.message);
    if (e.kind == NvtxEvent::Kind::kCounterSample) samples.emplace_back(e.message, e.value);
  }
  EXPECT_THAT(registered, ::testing::ElementsAre("step time p95 (ms)", "GPU idle (%)"));
  ASSERT_THAT(samples, ::testing::SizeIs(4));
  EXPECT_EQ(samples[0].first, "step time p95 (ms)");
  EXPECT_NEAR(samples[0].second, 10.0, 1e-9);
  EXPECT_EQ(samples[1].first, "GPU idle (%)");
  EXPECT_NEAR(samples[1].second, 75.0, 1e-9);
  EXPECT_NEAR(samples[2].second, 30.0, 1e-9);  // the window now holds the 30 ms steps
  EXPECT_NEAR(samples[3].second, 75.0, 1e-9);
}

TEST(NvtxTest, DisabledSessionEmitsNothing) {
  Session session(Options{.enabled = false});
  testing::NvtxRecorderClear();
  {
    StepScope step(session);
    PhaseScope p(session, Phase::kData);
  }
  EXPECT_TRUE(GpuscopeRanges().empty());
}

TEST(NvtxTest, MisuseKeepsPushesAndPopsBalanced) {
  Session session;
  testing::NvtxRecorderClear();
  const ScopeToken step = session.BeginStep();
  const ScopeToken a = session.BeginPhase(Phase::kForward);
  session.BeginPhase(Phase::kBackward);
  session.End(a);  // closes backward too
  session.End(step);
  session.End(a);
  {
    StepScope s(session);
    StepScope nested(session);
  }
  int depth = 0;
  for (const std::string& r : GpuscopeRanges()) {
    depth += r == "pop" ? -1 : 1;
    ASSERT_GE(depth, 0);
  }
  EXPECT_EQ(depth, 0);
}

}  // namespace
}  // namespace gpuscope

int main(int argc, char** argv) {
  // Before any NVTX call in the process: NVTX decides once whether a tool is attached.
  setenv("NVTX_INJECTION64_PATH", NVTX_RECORDER_PATH, 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
