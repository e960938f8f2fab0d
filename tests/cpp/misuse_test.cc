// Every misuse the Session documents has that outcome: nothing aborts, nothing
// is undefined, the counters say what happened.

#include <string>
#include <thread>

#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::ClockedSession;
using testing::kMs;

TEST(MisuseTest, EndingAnOuterScopeFirstClosesTheInnerOnesWithIt) {
  ClockedSession s;
  const ScopeToken step = s->BeginStep();
  const ScopeToken a = s->BeginPhase(Phase::kForward);
  s.clock->Advance(2 * kMs);
  const ScopeToken b = s->BeginPhase("attention");
  s.clock->Advance(3 * kMs);
  EXPECT_EQ(s->End(a), ScopeStatus::kEndedOutOfOrder);  // b is still open
  s.clock->Advance(5 * kMs);
  EXPECT_EQ(s->End(b), ScopeStatus::kAlreadyEnded);  // closed with a: ignored
  EXPECT_EQ(s->End(step), ScopeStatus::kOk);
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.misuse.out_of_order_end, 1);
  EXPECT_EQ(sum.misuse.stale_end, 1);
  EXPECT_DOUBLE_EQ(sum.FindPhase("forward")->total, 0.005);
  EXPECT_DOUBLE_EQ(sum.FindPhase("attention")->total, 0.003);  // ended with forward
  EXPECT_DOUBLE_EQ(sum.step_time.p50, 0.010);
}

TEST(MisuseTest, EndingAStepClosesItsOpenPhases) {
  ClockedSession s;
  const ScopeToken step = s->BeginStep();
  const ScopeToken data = s->BeginPhase(Phase::kData);
  s.clock->Advance(4 * kMs);
  s->End(step);
  s->End(data);  // stale
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.total_steps, 1);
  EXPECT_DOUBLE_EQ(sum.FindPhase("data")->share, 1.0);
  EXPECT_EQ(sum.misuse.out_of_order_end, 1);
  EXPECT_EQ(sum.misuse.stale_end, 1);
}

TEST(MisuseTest, EndingTheSameScopeTwiceIsIgnored) {
  ClockedSession s;
  const ScopeToken step = s->BeginStep();
  s.clock->Advance(kMs);
  EXPECT_EQ(s->End(step), ScopeStatus::kOk);
  EXPECT_EQ(s->End(step), ScopeStatus::kAlreadyEnded);
  EXPECT_EQ(s->End(ScopeToken{}), ScopeStatus::kDisabled);  // never ok: nothing at all
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.total_steps, 1);
  EXPECT_EQ(sum.misuse.stale_end, 1);
}

TEST(MisuseTest, AStepInsideAStepIsIgnored) {
  ClockedSession s;
  {
    StepScope outer(*s);
    s.clock->Advance(kMs);
    {
      StepScope inner(*s);
      EXPECT_EQ(inner.status(), ScopeStatus::kNestedStep);
      s.clock->Advance(2 * kMs);
    }
    EXPECT_EQ(outer.status(), ScopeStatus::kOk);
  }
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.total_steps, 1);
  EXPECT_DOUBLE_EQ(sum.step_time.p50, 0.003);  // the outer step, whole
  EXPECT_EQ(sum.misuse.nested_step, 1);
}

TEST(MisuseTest, BadPhaseNamesAreIgnoredAndCounted) {
  ClockedSession s;
  EXPECT_EQ(s->RegisterPhase("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->RegisterPhase(std::string(65, 'x')).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->RegisterPhase("other").status().code(), absl::StatusCode::kInvalidArgument);
  {
    StepScope step(*s);
    PhaseScope empty(*s, "");
    EXPECT_EQ(empty.status(), ScopeStatus::kInvalidPhase);
    PhaseScope long_name(*s, std::string(200, 'y'));
    EXPECT_EQ(long_name.status(), ScopeStatus::kInvalidPhase);
    PhaseScope null_name(*s, static_cast<const char*>(nullptr));
    EXPECT_EQ(null_name.status(), ScopeStatus::kInvalidPhase);
    s.clock->Advance(kMs);
  }
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.misuse.invalid_phase, 3);
  EXPECT_EQ(sum.total_steps, 1);
  EXPECT_DOUBLE_EQ(sum.FindPhase("other")->share, 1.0);
}

TEST(MisuseTest, MoreNamesThanTheTableHolds) {
  ClockedSession s(Options{.max_phases = kNumBuiltinPhases + 2});
  EXPECT_TRUE(s->RegisterPhase("a").ok());
  EXPECT_TRUE(s->RegisterPhase("b").ok());
  EXPECT_EQ(s->RegisterPhase("c").status().code(), absl::StatusCode::kResourceExhausted);
  {
    StepScope step(*s);
    PhaseScope c(*s, "c");
    EXPECT_EQ(c.status(), ScopeStatus::kInvalidPhase);
    PhaseScope a(*s, "a");  // known names keep working
    EXPECT_EQ(a.status(), ScopeStatus::kOk);
    s.clock->Advance(kMs);
  }
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.misuse.invalid_phase, 1);
  EXPECT_DOUBLE_EQ(sum.FindPhase("a")->share, 1.0);
}

TEST(MisuseTest, APhaseIdFromAnotherSessionIsRejected) {
  ClockedSession big;
  PhaseId foreign = Phase::kData;
  for (int i = 0; i < 5; ++i) foreign = big->RegisterPhase("p" + std::to_string(i)).value();
  ClockedSession small;
  // Same index as a name of small's own: still foreign.
  const PhaseId same_index = big->RegisterPhase("p0").value();
  const PhaseId own = small->RegisterPhase("mine").value();
  ASSERT_EQ(own.value(), same_index.value());
  ASSERT_NE(own, same_index);
  {
    StepScope step(*small);
    PhaseScope p(*small, foreign);  // beyond small's table
    EXPECT_EQ(p.status(), ScopeStatus::kInvalidPhase);
    PhaseScope q(*small, same_index);  // inside it
    EXPECT_EQ(q.status(), ScopeStatus::kInvalidPhase);
    PhaseScope builtin(*small, Phase::kForward);  // built-ins are everyone's
    EXPECT_EQ(builtin.status(), ScopeStatus::kOk);
  }
  const Summary sum = small->Summarize();
  EXPECT_EQ(sum.misuse.invalid_phase, 2);
  EXPECT_EQ(sum.FindPhase("mine"), nullptr);
}

TEST(MisuseTest, ATokenFromAnotherSessionIsRejected) {
  ClockedSession a;
  ClockedSession b;
  const ScopeToken step_a = a->BeginStep();
  const ScopeToken step_b = b->BeginStep();
  ASSERT_EQ(step_a.serial, step_b.serial);  // same serial and depth: only the tag differs
  EXPECT_EQ(b->End(step_a), ScopeStatus::kWrongSession);
  EXPECT_EQ(a->End(step_a), ScopeStatus::kOk);
  EXPECT_EQ(b->End(step_b), ScopeStatus::kOk);
  EXPECT_EQ(b->Summarize().misuse.stale_end, 1);
  EXPECT_EQ(b->Summarize().total_steps, 1);
}

TEST(MisuseTest, ScopesFromASecondThreadAreIgnored) {
  ClockedSession s;
  {
    StepScope step(*s);  // this thread becomes the recording thread
    s.clock->Advance(kMs);
  }
  ScopeStatus from_other = ScopeStatus::kOk;
  std::thread other([&] {
    StepScope step(*s);
    PhaseScope p(*s, Phase::kData);
    from_other = step.status();
  });
  other.join();
  EXPECT_EQ(from_other, ScopeStatus::kWrongThread);
  {
    StepScope step(*s);  // the recording thread is unaffected
    EXPECT_EQ(step.status(), ScopeStatus::kOk);
  }
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.total_steps, 2);
  EXPECT_EQ(sum.misuse.wrong_thread, 2);  // the step and the phase
}

TEST(MisuseTest, ScopesBeyondTheDepthLimitAreIgnored) {
  ClockedSession s;
  std::vector<ScopeToken> tokens;
  tokens.push_back(s->BeginStep());
  for (int i = 0; i < kMaxOpenScopes + 5; ++i) tokens.push_back(s->BeginPhase(Phase::kForward));
  EXPECT_TRUE(tokens[static_cast<size_t>(kMaxOpenScopes - 1)].ok());
  EXPECT_EQ(tokens[static_cast<size_t>(kMaxOpenScopes)].status, ScopeStatus::kTooDeep);
  s.clock->Advance(kMs);
  for (auto it = tokens.rbegin(); it != tokens.rend(); ++it) s->End(*it);
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.misuse.too_deep, 6);
  EXPECT_EQ(sum.misuse.stale_end, 0);
  EXPECT_EQ(sum.misuse.out_of_order_end, 0);
  EXPECT_EQ(sum.total_steps, 1);
}

TEST(MisuseTest, StatusMessagesSayWhatToDo) {
  for (ScopeStatus st :
       {ScopeStatus::kDisabled, ScopeStatus::kWrongThread, ScopeStatus::kNestedStep,
        ScopeStatus::kTooDeep, ScopeStatus::kInvalidPhase}) {
    EXPECT_GT(ScopeStatusMessage(st).size(), 30u);
  }
}

}  // namespace
}  // namespace gpuscope
