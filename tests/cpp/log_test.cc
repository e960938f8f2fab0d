// Problems are said once, through the sink.

#include <mutex>
#include <string>
#include <vector>

#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

TEST(LogTest, MisuseIsReportedOnceThroughTheSink) {
  std::mutex mu;
  std::vector<std::string> messages;
  SetLogSink([&](LogLevel level, std::string_view m) {
    std::lock_guard<std::mutex> lock(mu);
    if (level == LogLevel::kWarning) messages.emplace_back(m);
  });
  testing::ClockedSession s;
  for (int i = 0; i < 5; ++i) {
    StepScope a(*s);
    StepScope b(*s);
    s->Summarize();  // the reader reports what it drained
  }
  SetLogSink(nullptr);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_NE(messages[0].find("steps do not nest"), std::string::npos) << messages[0];
}

TEST(LogTest, InvalidOptionsAreReportedAsAnError) {
  std::vector<std::string> errors;
  SetLogSink([&](LogLevel level, std::string_view m) {
    if (level == LogLevel::kError) errors.emplace_back(m);
  });
  Session s(Options{.window = -3});
  SetLogSink(nullptr);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("Options::window = -3"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace gpuscope
