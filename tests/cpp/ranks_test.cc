// Ranks compared (gpuscope/ranks.h): a record survives its encoding, a
// corrupt one is refused with a reason, and the scoring names the slow rank
// and its phase, on device time where every rank has it, and nothing when
// ranks differ by noise or by too little to matter.

#include "gpuscope/ranks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gpuscope/phase.h"
#include "gtest/gtest.h"

namespace gpuscope {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A rank of a data-parallel job: data, forward, backward, optimizer, and an
// all-reduce that waits for the slowest rank, so every rank's step time is
// the same whoever is slow.
RankRecord Rank(int rank, int world, double forward = 0.030, double device_forward = kNaN) {
  RankRecord r;
  r.rank = rank;
  r.local_rank = rank % 8;
  r.world_size = world;
  r.host = "node" + std::to_string(rank / 8);
  r.steps = 512;
  r.step_p50 = 0.100;
  r.step_p95 = 0.110;
  r.phases = {
      {.name = "forward", .host_p50 = forward, .device_p50 = device_forward, .share = 0.3},
      {.name = "backward", .host_p50 = 0.050, .share = 0.5},
      {.name = "data", .host_p50 = 0.004, .share = 0.04},
      {.name = "optimizer", .host_p50 = 0.006, .share = 0.06},
  };
  return r;
}

TEST(RankRecordTest, SurvivesItsEncoding) {
  RankRecord r = Rank(5, 16, 0.031, 0.028);
  r.gpu_idle_pct = 12.5;
  r.samples_per_second = 640;
  r.sm_clock_ratio = 0.93;
  r.throttled_steps = 0.25;
  r.compute_time = 0.071;
  r.memory_peak_share = 0.9375;  // version 3's memory fields
  r.memory_alloc_retries = 14;
  const std::string bytes = EncodeRankRecord(r);
  EXPECT_EQ(bytes.size(), kRankRecordBytes);
  absl::StatusOr<RankRecord> back = DecodeRankRecord(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);  // NaN fields (tokens, host CPU) stay NaN
  EXPECT_TRUE(std::isnan(back->tokens_per_second));
}

TEST(CompareRanksTest, ComputeKernelTimeNamesAStragglerNoPhaseShows) {
  // A loop with one phase that the all-reduce makes equal on every rank,
  // but CUPTI measured each rank's compute kernels: rank 3's GPU does twice
  // the work.
  std::vector<RankRecord> records;
  for (int rank = 0; rank < 6; ++rank) {
    RankRecord r = Rank(rank, 6);
    r.compute_time = rank == 3 ? 0.060 : 0.030;
    records.push_back(r);
  }
  RankComparison c = CompareRanks(records, 6);
  ASSERT_TRUE(c.straggler().has_value());
  EXPECT_EQ(c.straggler()->rank, 3);
  EXPECT_EQ(c.straggler()->phase, kComputeKernelsName);
  EXPECT_TRUE(c.straggler()->device);
  EXPECT_DOUBLE_EQ(c.straggler()->slowdown, 2.0);
  // A rank without a compute time (no CUPTI there): not compared on it.
  records[0].compute_time = kNaN;
  EXPECT_FALSE(CompareRanks(records, 6).straggler().has_value());
  // A phase that names the straggler comes first: compute time is the
  // fallback, not a second finding of the same slowness.
  records[0].compute_time = 0.030;
  records[3].phases[0].host_p50 = 0.060;
  c = CompareRanks(records, 6);
  ASSERT_EQ(c.stragglers.size(), 1u);
  EXPECT_EQ(c.stragglers[0].phase, "forward");
}

TEST(RankRecordTest, KeepsSixteenPhasesAndCutsLongNames) {
  RankRecord r = Rank(0, 1);
  r.host = std::string(100, 'h');
  r.phases.clear();
  for (int i = 0; i < 20; ++i)
    r.phases.push_back({.name = std::string(70, static_cast<char>('a' + i)),
                        .host_p50 = 0.001 * i,
                        .share = 0.01});
  absl::StatusOr<RankRecord> back = DecodeRankRecord(EncodeRankRecord(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->host, std::string(63, 'h'));
  ASSERT_EQ(back->phases.size(), static_cast<size_t>(kMaxRankPhases));
  EXPECT_EQ(back->phases[3].name, std::string(kMaxPhaseNameLength, 'd'));  // a whole phase name
  EXPECT_EQ(back->phases[3].host_p50, 0.003);
}

TEST(RankRecordTest, ACorruptRecordIsRefusedWithItsReason) {
  const std::string good = EncodeRankRecord(Rank(1, 4));
  const auto reason = [](std::string bytes) {
    absl::StatusOr<RankRecord> r = DecodeRankRecord(bytes);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string("accepted") : std::string(r.status().message());
  };
  EXPECT_THAT(reason(good.substr(0, 100)), HasSubstr("100 bytes, not 2048"));
  std::string bad = good;
  bad[0] = 'X';
  EXPECT_THAT(reason(bad), HasSubstr("wrong magic"));
  bad = good;
  bad[4] = 9;  // version
  EXPECT_THAT(reason(bad), HasSubstr("version 9"));
  bad = good;
  bad[6] = 17;  // phase count
  EXPECT_THAT(reason(bad), HasSubstr("17 phases, at most 16"));
  bad = good;
  bad[8] = 7;  // rank 7 of 4
  EXPECT_THAT(reason(bad), HasSubstr("rank 7 (local 1) of 4"));
  bad = good;
  std::fill(bad.begin() + 20, bad.begin() + 84, 'x');  // host without its NUL
  EXPECT_THAT(reason(bad), HasSubstr("host name not terminated"));
  bad = good;
  const double inf = std::numeric_limits<double>::infinity();
  std::memcpy(bad.data() + 92, &inf, 8);  // step_p50 (little-endian host)
  EXPECT_THAT(reason(bad), HasSubstr("step time not a time"));
  EXPECT_THAT(reason(std::string(kRankRecordBytes, '\0')), HasSubstr("wrong magic"));
}

TEST(RankRecordTest, ValidateRefusesWhatWouldMisleadTheComparison) {
  const auto reason = [](const RankRecord& r) {
    const absl::Status st = ValidateRankRecord(r);
    return st.ok() ? std::string("accepted") : std::string(st.message());
  };
  EXPECT_EQ(reason(Rank(1, 4)), "accepted");
  RankRecord r = Rank(1, 4);
  r.phases[1].name = "forward";  // two phases of one name would count a rank twice
  EXPECT_THAT(reason(r), HasSubstr("phase \"forward\" twice"));
  r = Rank(1, 4);
  r.phases[2].name.clear();
  EXPECT_THAT(reason(r), HasSubstr("a phase name that is not one a session accepts"));
  r = Rank(1, 4);
  r.phases[2].name = "bad\x1b[2Jname";  // a peer's name reaches this rank's terminal
  EXPECT_THAT(reason(r), HasSubstr("a phase name that is not one a session accepts"));
  r = Rank(1, 4);
  r.phases[0].host_p50 = kNaN;
  EXPECT_THAT(reason(r), HasSubstr("phase \"forward\" has a time or share out of range"));
  r = Rank(1, 4);
  r.steps = -1;
  EXPECT_THAT(reason(r), HasSubstr("negative step count"));
  r = Rank(1, 4);
  r.sm_clock_ratio = std::numeric_limits<double>::infinity();
  EXPECT_THAT(reason(r), HasSubstr("a number out of its range"));
  // Ranges as a saved summary's reader holds them, so that a summary
  // carrying this record always reads back.
  r = Rank(1, 4);
  r.gpu_idle_pct = 250;
  EXPECT_THAT(reason(r), HasSubstr("a number out of its range"));
  r = Rank(1, 4);
  r.throttled_steps = 1.5;
  EXPECT_THAT(reason(r), HasSubstr("a number out of its range"));
  r = Rank(1, 4);
  r.step_p95 = 2e9;
  EXPECT_THAT(reason(r), HasSubstr("step time not a time"));
  r = Rank(1, 4);
  r.phases[0].share = 3;
  EXPECT_THAT(reason(r), HasSubstr("has a time or share out of range"));
  // What Validate() refuses is encoded, and refused when decoded.
  r = Rank(1, 4);
  r.phases[3].name = "data";
  absl::StatusOr<RankRecord> back = DecodeRankRecord(EncodeRankRecord(r));
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("phase \"data\" twice"));
}

TEST(CompareRanksTest, LeavesOutRecordsValidateRefuses) {
  std::vector<RankRecord> records;
  for (int rank = 0; rank < 5; ++rank) records.push_back(Rank(rank, 5));
  records[2].phases[0].host_p50 = kNaN;  // would break the sort
  records[4].phases[1].name = "forward";
  const RankComparison c = CompareRanks(records, 5);
  EXPECT_EQ(c.ranks.size(), 3u);
  EXPECT_THAT(c.missing, ElementsAre(2, 4));
}

TEST(CompareRanksTest, AnEvenNumberOfOthersAveragesTheMiddleTwo) {
  // Five ranks: rank 0's others are 30, 32, 34, 36 ms; their median is 33.
  std::vector<RankRecord> records = {Rank(0, 5, 0.050), Rank(1, 5, 0.030), Rank(2, 5, 0.032),
                                     Rank(3, 5, 0.034), Rank(4, 5, 0.036)};
  const RankComparison c = CompareRanks(records, 5);
  ASSERT_EQ(c.stragglers.size(), 1u);
  EXPECT_EQ(c.straggler()->rank, 0);
  EXPECT_DOUBLE_EQ(c.straggler()->score, 0.033 / 0.050);
  EXPECT_NEAR(c.straggler()->excess, 0.017, 1e-12);
  // A device time of 0 on one rank: host time is compared.
  for (RankRecord& r : records) r.phases[0].device_p50 = 0.02;
  records[3].phases[0].device_p50 = 0;
  EXPECT_FALSE(CompareRanks(records, 5).straggler()->device);
}

TEST(CompareRanksTest, NamesTheSlowRankAndItsPhaseThoughStepTimesAreEqual) {
  std::vector<RankRecord> records;
  for (int rank = 0; rank < 8; ++rank) records.push_back(Rank(rank, 8, rank == 2 ? 0.045 : 0.030));
  const RankComparison c = CompareRanks(records, 8);
  ASSERT_EQ(c.ranks.size(), 8u);
  EXPECT_TRUE(c.missing.empty());
  ASSERT_TRUE(c.straggler().has_value());
  const Straggler s = *c.straggler();
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.host, "node0");
  EXPECT_EQ(s.phase, "forward");
  EXPECT_FALSE(s.device);
  EXPECT_DOUBLE_EQ(s.slowdown, 1.5);
  EXPECT_DOUBLE_EQ(s.score, 0.030 / 0.045);
  EXPECT_NEAR(s.excess, 0.015, 1e-12);
  EXPECT_NEAR(s.others_wait_share, 0.15, 1e-12);
  EXPECT_EQ(c.stragglers.size(), 1u);
}

TEST(CompareRanksTest, DeviceTimeIsUsedWhereEveryRankHasIt) {
  // Host times equal (the host waits for the GPU alike everywhere); rank 5's
  // GPU takes 1.6x as long in forward.
  std::vector<RankRecord> records;
  for (int rank = 0; rank < 6; ++rank)
    records.push_back(Rank(rank, 6, 0.030, rank == 5 ? 0.040 : 0.025));
  const RankComparison c = CompareRanks(records, 6);
  ASSERT_TRUE(c.straggler().has_value());
  EXPECT_EQ(c.straggler()->rank, 5);
  EXPECT_TRUE(c.straggler()->device);
  EXPECT_DOUBLE_EQ(c.straggler()->slowdown, 1.6);
  // One rank without device time: host time, on which nobody is slow.
  records[0].phases[0].device_p50 = kNaN;
  EXPECT_FALSE(CompareRanks(records, 6).straggler().has_value());
}

TEST(CompareRanksTest, NoStragglerWhenRanksDifferByNoiseOrByLittle) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> noise(0.97, 1.03);
  std::vector<RankRecord> records;
  for (int rank = 0; rank < 64; ++rank) records.push_back(Rank(rank, 64, 0.030 * noise(rng)));
  EXPECT_TRUE(CompareRanks(records, 64).stragglers.empty());
  // Twice as slow in "data", but 4 ms against a 100 ms step: under 5 %.
  records[9].phases[2].host_p50 = 0.008;
  EXPECT_TRUE(CompareRanks(records, 64).stragglers.empty());
  // Three times as slow there: 8 ms more, past 5 %.
  records[9].phases[2].host_p50 = 0.012;
  const RankComparison c = CompareRanks(records, 64);
  ASSERT_EQ(c.stragglers.size(), 1u);
  EXPECT_EQ(c.straggler()->rank, 9);
  EXPECT_EQ(c.straggler()->phase, "data");
}

TEST(CompareRanksTest, TheScoreLineIsTheOptions) {
  std::vector<RankRecord> records;
  for (int rank = 0; rank < 8; ++rank) records.push_back(Rank(rank, 8));
  records[3].phases[1].host_p50 = 0.0625;  // backward 1.25x: score 0.8, +12.5 ms
  EXPECT_TRUE(CompareRanks(records, 8).stragglers.empty());
  EXPECT_EQ(CompareRanks(records, 8, {.straggler_score = 0.85}).stragglers.size(), 1u);
  records[3].phases[1].host_p50 = 0.070;  // 1.4x: score 0.71
  EXPECT_EQ(CompareRanks(records, 8).stragglers.size(), 1u);
  // An invalid line is not used: the defaults are.
  EXPECT_EQ(CompareRanks(records, 8, {.straggler_score = 2.0}).stragglers.size(), 1u);
}

TEST(CompareRanksTest, OneFastRankDoesNotMakeTheOthersStragglers) {
  // Rank 4 is unusually quick in forward (a smaller shard, say): against the
  // fastest rank every other would score 0.6; against the others' median
  // nobody is slow.
  std::vector<RankRecord> records;
  for (int rank = 0; rank < 8; ++rank) records.push_back(Rank(rank, 8, rank == 4 ? 0.018 : 0.030));
  EXPECT_TRUE(CompareRanks(records, 8).stragglers.empty());
}

TEST(CompareRanksTest, MissingDuplicateAndForeignRanks) {
  std::vector<RankRecord> records = {Rank(0, 8), Rank(3, 8), Rank(3, 8, 0.2), Rank(5, 8),
                                     Rank(11, 8)};
  const RankComparison c = CompareRanks(records, 8);
  ASSERT_EQ(c.ranks.size(), 3u);
  EXPECT_EQ(c.ranks[1].phases[0].host_p50, 0.2);  // the later record of rank 3
  EXPECT_THAT(c.missing, ElementsAre(1, 2, 4, 6, 7));
  // Two ranks: which is slow is a matter of reference.
  EXPECT_TRUE(CompareRanks({Rank(0, 2), Rank(1, 2, 0.3)}, 2).stragglers.empty());
  EXPECT_TRUE(CompareRanks({}, 4).ranks.empty());
}

TEST(CompareRanksTest, TheWorstComesFirst) {
  std::vector<RankRecord> records;
  for (int rank = 0; rank < 8; ++rank) records.push_back(Rank(rank, 8));
  records[1].phases[0].host_p50 = 0.045;  // +15 ms in forward
  records[6].phases[1].host_p50 = 0.080;  // +30 ms in backward
  const RankComparison c = CompareRanks(records, 8);
  ASSERT_EQ(c.stragglers.size(), 2u);
  EXPECT_EQ(c.stragglers[0].rank, 6);
  EXPECT_EQ(c.stragglers[0].phase, "backward");
  EXPECT_EQ(c.stragglers[1].rank, 1);
}

TEST(RankRecordTest, OfASummaryTakesTheLargestPhasesWithoutOther) {
  Summary summary;
  summary.steps = 100;
  summary.step_time.p50 = 0.2;
  summary.step_time.p95 = 0.3;
  summary.samples_per_second = 320.0;
  for (int i = 0; i < 20; ++i) {
    PhaseStats p;
    p.name = "p" + std::to_string(i);
    p.steps = 100;
    p.share = 0.01 * i;
    p.time.p50 = 0.001 * i;
    summary.phases.push_back(p);
  }
  PhaseStats other;
  other.name = std::string(kOtherPhaseName);
  other.steps = 100;
  other.share = 0.9;
  summary.phases.push_back(other);
  const RankRecord r =
      RankRecordOf(summary, {.rank = 3, .local_rank = 1, .world_size = 4, .host = "gpu-node-7"});
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.host, "gpu-node-7");
  EXPECT_EQ(r.step_p50, 0.2);
  EXPECT_EQ(r.samples_per_second, 320.0);
  EXPECT_TRUE(std::isnan(r.gpu_idle_pct));
  ASSERT_EQ(r.phases.size(), static_cast<size_t>(kMaxRankPhases));
  EXPECT_EQ(r.phases.front().name, "p19");
  EXPECT_EQ(r.phases.back().name, "p4");
  EXPECT_TRUE(std::isnan(r.phases.front().device_p50));
  EXPECT_FALSE(RankRecordOf(summary, {}).host.empty());  // this machine's name
}

TEST(RankRecordTest, OfASummaryTakesItsMemoryPeakShareAndRetries) {
  Summary summary;
  summary.steps = 100;
  // Two GPUs: the record keeps the larger share of the GPU's memory held at
  // the peak (the reservation, or NVML's count of the process where that is
  // larger: the CUDA context too), and the retries of both.
  GpuMemory a;
  a.device = 0;
  a.total_bytes = 80e9;
  a.peak_reserved_bytes = 60e9;
  a.process_used_bytes = 76e9;  // the context on top: 0.95
  a.alloc_retries = 3;
  GpuMemory b;
  b.device = 1;
  b.total_bytes = 80e9;
  b.peak_reserved_bytes = 40e9;  // 0.5
  b.alloc_retries = 2;
  summary.memory.emplace();
  summary.memory->gpus = {a, b};
  const RankRecord r =
      RankRecordOf(summary, {.rank = 1, .local_rank = 1, .world_size = 2, .host = "gpu-node-1"});
  EXPECT_DOUBLE_EQ(r.memory_peak_share, 0.95);
  EXPECT_EQ(r.memory_alloc_retries, 5);
  // Without memory numbers, none: not "0 % of the GPU".
  EXPECT_TRUE(std::isnan(RankRecordOf(Summary{}, RankIdentity{}).memory_peak_share));
}

TEST(RankOptionsTest, ValidateSaysWhatIsWrong) {
  EXPECT_TRUE(RankOptions{}.Validate().ok());
  EXPECT_THAT(std::string(RankOptions{.straggler_score = 1.0}.Validate().message()),
              HasSubstr("between 0 and 1"));
  EXPECT_THAT(std::string(RankOptions{.min_excess_share = -0.1}.Validate().message()),
              HasSubstr("at least 0"));
}

}  // namespace
}  // namespace gpuscope
