#include "core/phase_table.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

TEST(PhaseTableTest, BuiltinsHaveTheirEnumIds) {
  PhaseTable t(32, nullptr);
  EXPECT_EQ(t.size(), kNumBuiltinPhases);
  for (int p = 0; p < kNumBuiltinPhases; ++p) {
    const std::string_view name = PhaseName(static_cast<Phase>(p));
    ASSERT_TRUE(t.Find(name).has_value()) << name;
    EXPECT_EQ(t.Find(name)->value(), p);
    EXPECT_EQ(t.Name(static_cast<uint16_t>(p)), name);
  }
  EXPECT_EQ(PhaseName(Phase::kH2D), "h2d");
  EXPECT_EQ(*ParsePhase("checkpoint"), Phase::kCheckpoint);
  EXPECT_EQ(ParsePhase("attention").status().code(), absl::StatusCode::kNotFound);
}

TEST(PhaseTableTest, RegisteringTwiceGivesTheSameId) {
  std::vector<std::string> seen;
  PhaseTable t(32, [&](uint16_t, std::string_view name) { seen.emplace_back(name); });
  const absl::StatusOr<PhaseId> a = t.Register("attention");
  const absl::StatusOr<PhaseId> b = t.Register("attention");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(a->value(), kNumBuiltinPhases);
  EXPECT_FALSE(a->builtin());
  EXPECT_EQ(*t.Register("forward"), PhaseId(Phase::kForward));
  // The listener saw each name once: nine built-ins, then attention.
  ASSERT_EQ(seen.size(), static_cast<size_t>(kNumBuiltinPhases + 1));
  EXPECT_EQ(seen.back(), "attention");
}

TEST(PhaseTableTest, RejectsBadNamesWithActionableErrors) {
  PhaseTable t(32, nullptr);
  const auto code = [&](std::string_view n) { return t.Register(n).status().code(); };
  EXPECT_EQ(code(""), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(std::string(65, 'x')), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(t.Register(std::string(64, 'x')).ok());
  EXPECT_EQ(code("tab\there"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("other"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("launch"), absl::StatusCode::kInvalidArgument);  // the launch-gap idle cause
  EXPECT_NE(t.Register("").status().message().find("empty"), std::string_view::npos);
  EXPECT_NE(t.Register(std::string(100, 'y')).status().message().find("limit is 64"),
            std::string_view::npos);
  EXPECT_TRUE(t.Register("layer 3 / attention (fused)").ok());  // any printable text
}

TEST(PhaseTableTest, FullTableSaysHowToFixIt) {
  PhaseTable t(kNumBuiltinPhases + 2, nullptr);
  EXPECT_TRUE(t.Register("a").ok());
  EXPECT_FALSE(t.full());
  EXPECT_TRUE(t.Register("b").ok());
  EXPECT_TRUE(t.full());
  const absl::Status s = t.Register("c").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("max_phases"), std::string_view::npos);
  EXPECT_TRUE(t.Register("a").ok());  // existing names still resolve
}

// Lookups from one thread while another registers (ThreadSanitizer runs it).
TEST(PhaseTableTest, LockFreeLookupDuringRegistration) {
  PhaseTable t(600, nullptr);
  std::atomic<bool> done{false};
  std::thread registrar([&] {
    for (int i = 0; i < 500; ++i) ASSERT_TRUE(t.Register("phase" + std::to_string(i)).ok());
    done = true;
  });
  while (!done) {
    for (int i = 0; i < 500; i += 37) {
      if (std::optional<PhaseId> id = t.Find("phase" + std::to_string(i))) {
        ASSERT_EQ(t.Name(id->value()), "phase" + std::to_string(i));
      }
    }
  }
  registrar.join();
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(t.Find("phase" + std::to_string(i)).has_value());
}

}  // namespace
}  // namespace gpuscope::internal
