// The backend seams: the source ladder, the annotator a session drives, and
// sessions built on injected backends.

#include <memory>
#include <string>
#include <vector>

#include "backends/vendor_status.h"
#include "fakes/fake_backends.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "session/session_impl.h"
#include "session/sources.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using ::testing::ElementsAre;
using testing::FakeActivitySource;
using testing::FakeDeviceTimer;
using ::testing::HasSubstr;
using testing::RecordingAnnotator;

TEST(SourceLadderTest, ActivityRecordsWinWhenTheyStart) {
  internal::Backends b;
  b.activity = std::make_unique<FakeActivitySource>(absl::OkStatus());
  b.device_timer = std::make_unique<FakeDeviceTimer>(absl::OkStatus());
  const internal::SourceChoice c = internal::SelectSource(b);
  EXPECT_EQ(c.source, Source::kCupti);
  EXPECT_NE(b.activity, nullptr);
  EXPECT_NE(b.device_timer, nullptr);  // kept, not started, for Session::ReleaseCupti()
}

TEST(SourceLadderTest, FallsBackToEventsAndSaysWhy) {
  internal::Backends b;
  b.activity = std::make_unique<FakeActivitySource>(
      absl::UnavailableError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"));
  b.device_timer = std::make_unique<FakeDeviceTimer>(absl::OkStatus());
  const internal::SourceChoice c = internal::SelectSource(b);
  EXPECT_EQ(c.source, Source::kEvents);
  EXPECT_THAT(c.reason, HasSubstr("MULTIPLE_SUBSCRIBERS"));
  EXPECT_THAT(c.reason, HasSubstr("lower bound"));
  EXPECT_EQ(b.activity, nullptr);  // nothing half-started stays attached
}

TEST(SourceLadderTest, FallsBackToHostWithEveryReason) {
  internal::Backends b;
  b.activity = std::make_unique<FakeActivitySource>(absl::NotFoundError("libcupti.so not found"));
  b.device_timer = std::make_unique<FakeDeviceTimer>(absl::NotFoundError("libcuda.so.1 not found"));
  const internal::SourceChoice c = internal::SelectSource(b);
  EXPECT_EQ(c.source, Source::kHost);
  EXPECT_THAT(c.reason, HasSubstr("libcupti.so not found"));
  EXPECT_THAT(c.reason, HasSubstr("libcuda.so.1 not found"));
  EXPECT_EQ(b.device_timer, nullptr);
}

TEST(SourceLadderTest, NoGpuBackendsMeansHost) {
  internal::Backends b;
  const internal::SourceChoice c = internal::SelectSource(b);
  EXPECT_EQ(c.source, Source::kHost);
  EXPECT_THAT(c.reason, HasSubstr("no GPU idle"));
}

// The one convention every vendor call's failure follows (CUDA, CUPTI,
// NVML): the call, the vendor's name for the error, an optional hint, and
// the file (not the build machine's path) and line.
TEST(VendorStatusTest, NamesTheCallTheVendorsErrorAndWhere) {
  const absl::Status plain = internal::VendorCallError(
      absl::StatusCode::kInternal, "cuEventQuery(ev)", "CUDA_ERROR_ILLEGAL_ADDRESS", "",
      "/home/build/gpuscope/lib/backends/cuda/cuda_driver_timer.cc", 231);
  EXPECT_EQ(plain.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(plain.message(),
            "cuEventQuery(ev) failed: CUDA_ERROR_ILLEGAL_ADDRESS at cuda_driver_timer.cc:231");
  const absl::Status hinted = internal::VendorCallError(
      absl::StatusCode::kFailedPrecondition, "nvmlInit()", "NVML_ERROR_DRIVER_NOT_LOADED",
      "no NVIDIA driver is loaded", "nvml.cc", 7);
  EXPECT_EQ(hinted.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      hinted.message(),
      "nvmlInit() failed: NVML_ERROR_DRIVER_NOT_LOADED (no NVIDIA driver is loaded) at nvml.cc:7");
  EXPECT_EQ(internal::UnnamedVendorError("CUPTI", 12345), "CUPTI error 12345");
}

TEST(SessionBackendsTest, SessionReportsTheSourceItsBackendsGive) {
  internal::Backends b;
  b.activity = std::make_unique<FakeActivitySource>(absl::UnavailableError("held by nsys"));
  b.device_timer = std::make_unique<FakeDeviceTimer>(absl::OkStatus());
  std::unique_ptr<Session> s = internal::SessionTestPeer::Create(Options{}, std::move(b));
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.source, Source::kEvents);
  EXPECT_THAT(sum.source_reason, HasSubstr("held by nsys"));
}

TEST(SessionBackendsTest, EveryScopeIsAnAnnotatedRangeWithItsName) {
  auto log = std::make_shared<RecordingAnnotator::Log>();
  internal::Backends b;
  b.annotator = std::make_unique<RecordingAnnotator>(log);
  std::unique_ptr<Session> s = internal::SessionTestPeer::Create(Options{}, std::move(b));
  for (int i = 0; i < 2; ++i) {
    StepScope step(*s);
    {
      PhaseScope p(*s, Phase::kData);
    }
    {
      PhaseScope p(*s, Phase::kForward);
      PhaseScope q(*s, "attention");
    }
  }
  // Misuse keeps pushes and pops balanced.
  const ScopeToken step = s->BeginStep();
  s->BeginPhase(Phase::kSync);
  s->End(step);
  {
    StepScope ignored(*s);
  }  // not nested: step closed above
  std::lock_guard<std::mutex> lock(log->mu);
  EXPECT_EQ(log->names[0], "data");
  EXPECT_EQ(log->names[9], "attention");
  EXPECT_THAT(
      log->calls,
      ElementsAre("push step 0", "push data", "pop", "push forward", "push attention", "pop", "pop",
                  "pop", "push step 1", "push data", "pop", "push forward", "push attention", "pop",
                  "pop", "pop", "push step 2", "push sync", "pop", "pop", "push step 3", "pop"));
}

TEST(SessionBackendsTest, DisabledSessionDoesNotStartBackends) {
  auto calls = std::make_shared<FakeActivitySource::Calls>();
  internal::Backends b;
  b.activity = std::make_unique<FakeActivitySource>(absl::OkStatus(), calls);
  std::unique_ptr<Session> s =
      internal::SessionTestPeer::Create(Options{.enabled = false}, std::move(b));
  EXPECT_EQ(s->Summarize().source, Source::kHost);
  EXPECT_EQ(calls->starts, 0);
}

TEST(SessionBackendsTest, StartedActivitySourceIsStoppedWithTheSession) {
  auto calls = std::make_shared<FakeActivitySource::Calls>();
  internal::Backends b;
  b.activity = std::make_unique<FakeActivitySource>(absl::OkStatus(), calls);
  std::unique_ptr<Session> s = internal::SessionTestPeer::Create(Options{}, std::move(b));
  EXPECT_EQ(s->source(), Source::kCupti);
  // No record has arrived: the summary does not claim CUPTI, and says why.
  const Summary summary = s->Summarize();
  EXPECT_EQ(summary.source, Source::kHost);
  EXPECT_THAT(summary.source_reason, ::testing::HasSubstr("no activity records have arrived"));
  EXPECT_EQ(calls->starts, 1);
  s.reset();
  EXPECT_EQ(calls->stops, 1);
}

}  // namespace
}  // namespace gpuscope
