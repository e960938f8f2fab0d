// GPU memory from the allocator, end to end on the simulated device: its
// caching allocator model reports every change (Session::RecordMemory's
// path), the memory window lays the samples over steps, and the summary's
// peaks, the phase that reached them, the retries and the OOM are checked
// against the allocations the test made. Each memory finding has a firing
// and a quiet case here.

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/gpuscope.h"
#include "gpuscope/testing.h"
#include "gtest/gtest.h"

namespace gpuscope {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMs = 1'000'000;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr double kGiBd = static_cast<double>(kGiB);

const Finding* Find(const std::vector<Finding>& fs, const std::string& id) {
  for (const Finding& f : fs) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

std::string Ids(const std::vector<Finding>& fs) {
  std::string out;
  for (const Finding& f : fs) out += f.id + " ";
  return out;
}

// A training loop on a GPU of `memory_gib`: 2 GiB of weights allocated
// before the first step; per step, data (5 ms), forward allocating four
// 1 GiB activations (10 ms), backward allocating a 0.5 GiB gradient buffer
// while they live, then freeing them all (10 ms), optimizer (2 ms).
struct Loop {
  explicit Loop(uint64_t memory_gib)
      : gpu(std::make_shared<SimulatedDevice>(
            SimulatedDevice::Config{.memory_bytes = memory_gib * kGiB})),
        session(Options{.clock = clock, .stream = 0, .simulated_device = gpu}) {
    weights = gpu->Allocate(2 * kGiB);
  }

  void Step(int64_t samples = 32) {
    StepScope step(session, {.samples = samples});
    {
      PhaseScope p(session, Phase::kData);
      clock->Advance(5 * kMs);
    }
    std::vector<uint64_t> activations;
    {
      PhaseScope p(session, Phase::kForward);
      for (int i = 0; i < 4; ++i) activations.push_back(gpu->Allocate(kGiB));
      clock->Advance(10 * kMs);
    }
    {
      PhaseScope p(session, Phase::kBackward);
      const uint64_t grad = gpu->Allocate(kGiB / 2);
      clock->Advance(1 * kMs);
      for (uint64_t a : activations) gpu->Free(a);
      clock->Advance(9 * kMs);
      gpu->Free(grad);
    }
    {
      PhaseScope p(session, Phase::kOptimizer);
      clock->Advance(2 * kMs);
    }
  }

  Summary Finish() {
    clock->Advance(1 * kMs);
    return session.Summarize();
  }

  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::shared_ptr<SimulatedDevice> gpu;
  Session session;
  uint64_t weights = 0;
};

TEST(MemoryTest, ThePeakAndThePhaseThatReachedItAreTheAllocationsMade) {
  Loop loop(80);
  for (int i = 0; i < 10; ++i) loop.Step();
  const Summary s = loop.Finish();
  ASSERT_TRUE(s.memory.has_value());
  EXPECT_EQ(s.memory->source, "simulated");
  ASSERT_EQ(s.memory->gpus.size(), 1u);
  const GpuMemory& g = s.memory->gpus[0];
  // 2 GiB of weights + 4 GiB of activations + the 0.5 GiB gradient buffer,
  // reached in backward (forward's own peak is 6 GiB), in every step: the
  // latest step is named.
  EXPECT_EQ(g.peak_allocated_bytes, 6.5 * kGiBd);
  EXPECT_TRUE(g.peak_exact);
  EXPECT_EQ(g.peak_phase, "backward");
  EXPECT_EQ(g.peak_step, 9);
  EXPECT_EQ(g.peak_reserved_bytes, 6.5 * kGiBd);
  EXPECT_EQ(g.min_allocated_bytes, 2 * kGiBd);  // the weights, between steps
  EXPECT_EQ(g.allocated_bytes, 2 * kGiBd);      // after the last free
  EXPECT_EQ(g.reserved_bytes, 6.5 * kGiBd);     // the cache keeps the blocks
  EXPECT_EQ(g.total_bytes, 80 * kGiBd);
  EXPECT_EQ(g.alloc_retries, 0);
  EXPECT_EQ(g.ooms, 0);
  EXPECT_DOUBLE_EQ(g.fragmentation, 0);
  EXPECT_EQ(s.memory->peak_by_phase.at("forward"), 6 * kGiBd);
  EXPECT_EQ(s.memory->peak_by_phase.at("backward"), 6.5 * kGiBd);
  EXPECT_EQ(s.memory->steps, 10);

  // The series carries each step's peak for the HTML plot.
  const std::vector<StepPoint> series = loop.session.StepSeries();
  ASSERT_EQ(series.size(), 10u);
  for (const StepPoint& p : series) EXPECT_EQ(p.memory_peak_bytes, 6.5 * kGiBd);
}

TEST(MemoryTest, ASessionWithoutAnAllocatorSourceHasNoMemory) {
  auto clock = std::make_shared<ManualClock>();
  Session session(Options{
      .clock = clock, .stream = 0, .simulated_device = std::make_shared<SimulatedDevice>()});
  {
    StepScope step(session);
    clock->Advance(kMs);
  }
  clock->Advance(kMs);
  EXPECT_FALSE(session.Summarize().memory.has_value());
}

TEST(MemoryTest, ACppTrainersOwnNumbersGoThroughRecordMemory) {
  auto clock = std::make_shared<ManualClock>();
  Session session(Options{.clock = clock});
  for (int i = 0; i < 3; ++i) {
    StepScope step(session);
    PhaseScope p(session, "attention");
    clock->Advance(kMs);
    session.RecordMemory({.allocated_bytes = 3e9 + i * 1e9,
                          .reserved_bytes = 8e9,
                          .peak_allocated_bytes = 3e9 + i * 1e9,
                          .total_bytes = 40e9},
                         "my-allocator");
    clock->Advance(kMs);
  }
  clock->Advance(kMs);
  const Summary s = session.Summarize();
  ASSERT_TRUE(s.memory.has_value());
  EXPECT_EQ(s.memory->source, "my-allocator");
  EXPECT_EQ(s.memory->gpus[0].peak_allocated_bytes, 5e9);
  EXPECT_EQ(s.memory->gpus[0].peak_phase, "attention");
  EXPECT_EQ(s.memory->gpus[0].peak_step, 2);
}

// An allocator that leaves its high-water mark out of some samples: the mark
// last given stays the one a later rise is measured from.
TEST(MemoryTest, AHighWaterMarkRiseIsSeenAcrossASampleWithoutOne) {
  auto clock = std::make_shared<ManualClock>();
  Session session(Options{.clock = clock});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double marks[] = {3e9, nan, 5e9};
  for (int i = 0; i < 3; ++i) {
    StepScope step(session);
    PhaseScope p(session, i == 2 ? "backward" : "forward");
    clock->Advance(kMs);
    session.RecordMemory({.allocated_bytes = 2e9, .peak_allocated_bytes = marks[i]});
    clock->Advance(kMs);
  }
  clock->Advance(kMs);
  const Summary s = session.Summarize();
  const GpuMemory& g = s.memory->gpus[0];
  EXPECT_EQ(g.peak_allocated_bytes, 5e9);  // the rise from 3e9, not the 2e9 sampled
  EXPECT_TRUE(g.peak_exact);
  EXPECT_EQ(g.peak_phase, "backward");
}

TEST(MemoryTest, BatchHeadroomFiresWithRoomAndIsQuietWhenMemoryIsTight) {
  Loop roomy(80);
  for (int i = 0; i < 10; ++i) roomy.Step(/*samples=*/32);
  const std::vector<Finding> fs = Diagnose(roomy.Finish());
  const Finding* f = Find(fs, "batch-headroom");
  ASSERT_NE(f, nullptr) << Ids(fs);
  EXPECT_EQ(f->severity, Severity::kInfo);
  // (0.9 * 80 GiB - 2 GiB of weights) / 4.5 GiB of activations = 15.6x;
  // 4.5 GiB over 32 samples per sample.
  EXPECT_THAT(f->title, HasSubstr("15.6x"));
  double per_sample = 0;
  for (const auto& [name, v] : f->evidence) {
    if (name == "activation_bytes_per_sample") per_sample = v;
  }
  EXPECT_DOUBLE_EQ(per_sample, 4.5 * kGiBd / 32);
  EXPECT_EQ(Find(fs, "memory-pressure"), nullptr) << Ids(fs);

  Loop tight(8);  // 6.5 of 8 GiB: (7.2 - 2) / 4.5 = 1.2x, under 2x
  for (int i = 0; i < 10; ++i) tight.Step();
  EXPECT_EQ(Find(Diagnose(tight.Finish()), "batch-headroom"), nullptr);
}

TEST(MemoryTest, MemoryPressureFiresNearTheLimitAndNeverWithBatchHeadroom) {
  Loop full(7);  // 6.5 of 7 GiB: 93 %; with a 0.9 line it fires
  for (int i = 0; i < 10; ++i) full.Step();
  const Summary s = full.Finish();
  EXPECT_EQ(Find(Diagnose(s), "memory-pressure"), nullptr);  // under 95 %
  DiagnoseOptions o;
  o.memory_pressure_share = 0.9;
  const std::vector<Finding> fs = Diagnose(s, o);
  const Finding* f = Find(fs, "memory-pressure");
  ASSERT_NE(f, nullptr) << Ids(fs);
  EXPECT_THAT(f->title, HasSubstr("phase \"backward\""));
  EXPECT_EQ(Find(fs, "batch-headroom"), nullptr);
}

// Shapes that change every step (6 GiB, then 5 GiB, ...) on a 10 GiB GPU
// with 2 GiB of weights: the cached block of the last shape does not fit
// the next, and there is no room for both, so the allocator frees its cache
// and retries, every step. Constant shapes reuse the cache: no retry.
TEST(MemoryTest, AllocationRetriesAreCountedInTheStepsTheyFellIn) {
  for (const bool varying : {true, false}) {
    auto clock = std::make_shared<ManualClock>();
    auto gpu =
        std::make_shared<SimulatedDevice>(SimulatedDevice::Config{.memory_bytes = 10 * kGiB});
    Session session(Options{.clock = clock, .stream = 0, .simulated_device = gpu});
    gpu->Allocate(2 * kGiB);
    for (int i = 0; i < 20; ++i) {
      StepScope step(session);
      PhaseScope p(session, Phase::kForward);
      const uint64_t block = gpu->Allocate((varying && i % 2 == 1 ? 5 : 6) * kGiB);
      ASSERT_NE(block, 0u);
      // A retry synchronizes the device and frees blocks: the step is slower.
      clock->Advance((varying && i > 0 ? 15 : 10) * kMs);
      gpu->Free(block);
    }
    clock->Advance(kMs);
    const Summary s = session.Summarize();
    const GpuMemory& g = s.memory->gpus[0];
    const std::vector<Finding> fs = Diagnose(s);
    if (varying) {
      EXPECT_EQ(g.alloc_retries, 19);  // every step after the first
      EXPECT_EQ(g.retry_steps, 19);
      EXPECT_NEAR(g.retry_time, 0, 1e-9);  // the median step is a retry step itself
      const Finding* f = Find(fs, "memory-thrash");
      ASSERT_NE(f, nullptr) << Ids(fs);
      EXPECT_THAT(f->title, HasSubstr("19 GPU memory allocation retries in 19 steps"));
      EXPECT_THAT(f->recommendation, HasSubstr("expandable_segments:True"));
    } else {
      EXPECT_EQ(g.alloc_retries, 0);
      EXPECT_EQ(Find(fs, "memory-thrash"), nullptr) << Ids(fs);
    }
  }
}

TEST(MemoryTest, RetryCostIsTheRetryStepsTimeOverTheMedianStep) {
  auto clock = std::make_shared<ManualClock>();
  auto gpu = std::make_shared<SimulatedDevice>(SimulatedDevice::Config{.memory_bytes = 10 * kGiB});
  Session session(Options{.clock = clock, .stream = 0, .simulated_device = gpu});
  gpu->Allocate(2 * kGiB);
  for (int i = 0; i < 20; ++i) {
    StepScope step(session);
    // Steps 5 and 15 change shape (5 GiB), and the step after changes back.
    const bool odd_shape = i == 5 || i == 15;
    const uint64_t block = gpu->Allocate((odd_shape ? 5 : 6) * kGiB);
    const bool retried = i == 5 || i == 6 || i == 15 || i == 16;
    clock->Advance((retried ? 30 : 10) * kMs);
    gpu->Free(block);
  }
  clock->Advance(kMs);
  const Summary s = session.Summarize();
  const GpuMemory& g = s.memory->gpus[0];
  EXPECT_EQ(g.alloc_retries, 4);
  EXPECT_EQ(g.retry_steps, 4);
  EXPECT_NEAR(g.retry_time, 4 * 0.020, 1e-9);  // 20 ms over the 10 ms median, four times
  const std::vector<Finding> fs = Diagnose(s);
  const Finding* f = Find(fs, "memory-thrash");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->share, 0.080 / s.window_time, 1e-9);
  EXPECT_EQ(f->severity, Severity::kHigh);  // 0.08 s of 0.28 s: over 5 %
}

TEST(MemoryTest, TheOomThatEndsAStepIsRecordedWithItsPlaceAndComesFirst) {
  Loop loop(80);
  for (int i = 0; i < 5; ++i) loop.Step();
  {
    StepScope step(loop.session);
    PhaseScope forward(loop.session, Phase::kForward);
    PhaseScope attention(loop.session, "attention");
    const uint64_t too_big = loop.gpu->Allocate(100 * kGiB);
    ASSERT_EQ(too_big, 0u);  // the model says: out of memory
    // What the framework's error handler does as the error leaves the scopes.
    loop.session.RecordOom({.device = 0,
                            .requested_bytes = 100 * kGiBd,
                            .allocated_bytes = 2 * kGiBd,
                            .total_bytes = 80 * kGiBd,
                            .message = "CUDA out of memory. Tried to allocate 100.00 GiB."});
  }
  const Summary s = loop.Finish();
  ASSERT_TRUE(s.memory->oom.has_value());
  const OomEvent& oom = *s.memory->oom;
  EXPECT_EQ(oom.step, 5);  // the sixth step begun
  EXPECT_EQ(oom.phase, "attention");
  EXPECT_EQ(oom.phase_path, "forward/attention");
  EXPECT_EQ(s.memory->gpus[0].ooms, 1);  // the allocator's own counter
  // Its one retry before giving up (the cache was freed first) is the OOM's,
  // not thrash; and a larger batch is not advised after an OOM.
  EXPECT_EQ(s.memory->gpus[0].alloc_retries, 0);
  const std::vector<Finding> fs = Diagnose(s);
  ASSERT_FALSE(fs.empty());
  EXPECT_EQ(fs.front().id, "oom") << Ids(fs);
  EXPECT_EQ(fs.front().severity, Severity::kHigh);
  EXPECT_THAT(fs.front().title, HasSubstr("step 5, phase \"forward/attention\""));
  EXPECT_THAT(fs.front().recommendation, HasSubstr("backward 6.5 GiB"));  // peak by phase
  EXPECT_THAT(FormatReport(s), HasSubstr("OUT OF MEMORY in step 5, phase forward/attention"));
  EXPECT_EQ(Find(fs, "memory-thrash"), nullptr) << Ids(fs);
  EXPECT_EQ(Find(fs, "batch-headroom"), nullptr) << Ids(fs);
  // Quiet: no OOM, no finding.
  Loop fine(80);
  fine.Step();
  EXPECT_EQ(Find(Diagnose(fine.Finish()), "oom"), nullptr);
}

TEST(MemoryTest, ResetDropsTheStepsPeaksButKeepsTheOom) {
  Loop loop(80);
  for (int i = 0; i < 3; ++i) loop.Step();
  loop.session.RecordOom({.requested_bytes = 1e9});
  ASSERT_TRUE(loop.session.Reset().ok());
  const Summary s = loop.Finish();
  ASSERT_TRUE(s.memory.has_value());
  EXPECT_EQ(s.memory->steps, 0);
  EXPECT_TRUE(s.memory->oom.has_value());
}

}  // namespace
}  // namespace gpuscope
