// Without a CUDA driver, the default session runs on host timing and says
// why; nothing else changes. main() points GPUSCOPE_LIBCUDA at a library
// that does not exist, so this holds on GPU machines too.

#include <stdlib.h>

#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"

namespace gpuscope {
namespace {

TEST(NoDriverTest, DefaultSessionFallsBackToHostAndSaysWhy) {
  Session session;
  EXPECT_EQ(session.source(), Source::kHost);
  for (int i = 0; i < 3; ++i) {
    StepScope step(session);
    PhaseScope p(session, Phase::kForward);
  }
  const Summary s = session.Summarize();
  EXPECT_EQ(s.total_steps, 3);
  EXPECT_FALSE(s.gpu_idle_pct.has_value());
  EXPECT_EQ(s.gpu_steps, 0);
  EXPECT_THAT(s.source_reason, ::testing::HasSubstr("CUDA events unavailable"));
  EXPECT_THAT(s.source_reason, ::testing::HasSubstr("no-such-libcuda.so.1"));
}

}  // namespace
}  // namespace gpuscope

int main(int argc, char** argv) {
  setenv("GPUSCOPE_LIBCUDA", "/nonexistent/no-such-libcuda.so.1", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
