// Ranks in the summary, end to end: Session::SetRank()/SetRankRecords()
// keep this process's place in the job and what the last exchange of rank
// records found (with the history that tells a chronic straggler from a
// transient one); the summary's JSON carries both; Diagnose() names the
// straggler on every rank and stops blaming communication for the wait on
// it; the report, Prometheus text and trace say which rank they are from.

#include <unistd.h>

#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/json.h"
#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::ClockedSession;
using ::testing::ElementsAre;
using testing::Find;
using ::testing::HasSubstr;
using testing::Ids;
using testing::kMs;
using ::testing::Not;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One rank of a data-parallel job whose all-reduce makes every rank's step
// 20 ms whoever is slow: forward (`forward` seconds per step), backward 8 ms
// everywhere, and optionally a data phase.
RankRecord Record(int rank, int world, double forward = 0.001, double data = kNaN) {
  RankRecord r;
  r.rank = rank;
  r.local_rank = rank % 8;
  r.world_size = world;
  r.host = absl::StrCat("node-", rank);
  r.steps = 100;
  r.step_p50 = 0.020;
  r.step_p95 = 0.022;
  r.phases = {{.name = "backward", .host_p50 = 0.008, .share = 0.4},
              {.name = "forward", .host_p50 = forward, .share = forward / 0.020}};
  if (!std::isnan(data)) r.phases.push_back({.name = "data", .host_p50 = data, .share = 0.15});
  return r;
}

// Four ranks, rank 2 ten times slower than the others in forward.
std::vector<RankRecord> SlowRankTwo(int world = 4) {
  std::vector<RankRecord> records;
  for (int rank = 0; rank < world; ++rank) {
    records.push_back(Record(rank, world, rank == 2 ? 0.010 : 0.001));
  }
  return records;
}

// Four ranks that differ by noise only (within 3 %).
std::vector<RankRecord> Even(int world = 4) {
  const double noise[] = {1.00, 1.03, 0.97, 1.02};
  std::vector<RankRecord> records;
  for (int rank = 0; rank < world; ++rank) {
    records.push_back(Record(rank, world, 0.005 * noise[rank % 4]));
  }
  return records;
}

void Steps(ClockedSession& s, int n) {
  for (int i = 0; i < n; ++i) {
    StepScope step(*s);
    s.Phase(Phase::kForward, 4 * kMs);
    s.Phase(Phase::kBackward, 8 * kMs);
  }
}

// ---- Session

TEST(RankSessionTest, SetRankChecksTheIdentityAndEverySummaryCarriesIt) {
  ClockedSession s;
  Steps(s, 3);
  EXPECT_EQ(s->SetRankRecords(SlowRankTwo()).code(), absl::StatusCode::kFailedPrecondition)
      << "records before the rank have no world to be compared in";
  EXPECT_FALSE(s->Summarize().rank.has_value());
  EXPECT_FALSE(s->Summarize().ranks.has_value());

  EXPECT_EQ(s->SetRank({.rank = 4, .local_rank = 0, .world_size = 4, .host = ""}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->SetRank({.rank = 0, .local_rank = -1, .world_size = 4, .host = ""}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->SetRank({.rank = -1, .local_rank = 0, .world_size = 4, .host = ""}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(s->Summarize().rank.has_value()) << "a refused identity is not kept";

  const RankIdentity me{.rank = 1, .local_rank = 1, .world_size = 4, .host = "node-a"};
  ASSERT_TRUE(s->SetRank(me).ok());
  for (int i = 0; i < 2; ++i) {
    Steps(s, 2);
    const Summary sum = s->Summarize();
    ASSERT_TRUE(sum.rank.has_value());
    EXPECT_EQ(*sum.rank, me);
    EXPECT_FALSE(sum.ranks.has_value()) << "no exchange yet";
  }
}

TEST(RankSessionTest, AnEmptyHostIsThisMachinesName) {
  ClockedSession s;
  ASSERT_TRUE(s->SetRank({.rank = 0, .local_rank = 0, .world_size = 2, .host = ""}).ok());
  const Summary sum = s->Summarize();
  ASSERT_TRUE(sum.rank.has_value());
  EXPECT_FALSE(sum.rank->host.empty());
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof(name) - 1), 0);
  EXPECT_EQ(sum.rank->host, std::string(name).substr(0, 63));
}

TEST(RankSessionTest, RecordsAreComparedAndTheStragglerNamed) {
  ClockedSession s;
  Steps(s, 3);
  ASSERT_TRUE(s->SetRank({.rank = 0, .local_rank = 0, .world_size = 4, .host = "node-0"}).ok());
  ASSERT_TRUE(s->SetRankRecords(SlowRankTwo()).ok());
  const Summary sum = s->Summarize();
  ASSERT_TRUE(sum.ranks.has_value());
  const RanksStats& r = *sum.ranks;
  ASSERT_EQ(r.ranks.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(r.ranks[i].rank, static_cast<int>(i)) << "by rank";
  EXPECT_TRUE(r.missing.empty());
  ASSERT_FALSE(r.stragglers.empty());
  EXPECT_EQ(r.stragglers[0].rank, 2);
  EXPECT_EQ(r.stragglers[0].phase, "forward");
  EXPECT_EQ(r.stragglers[0].host, "node-2");
  EXPECT_NEAR(r.stragglers[0].slowdown, 10.0, 1e-9);
  EXPECT_EQ(r.exchanges, 1);
  EXPECT_EQ(r.recent_exchanges, 1);
  EXPECT_EQ(r.straggler_exchanges, 1);
  EXPECT_GE(r.age, 0);

  // A rank that sent nothing is missing, and the others are still compared.
  std::vector<RankRecord> three = SlowRankTwo();
  three.pop_back();
  ASSERT_TRUE(s->SetRankRecords(three).ok());
  const Summary later = s->Summarize();
  ASSERT_TRUE(later.ranks.has_value());
  EXPECT_THAT(later.ranks->missing, ElementsAre(3));
  EXPECT_EQ(later.ranks->ranks.size(), 3u);
  EXPECT_EQ(later.ranks->exchanges, 2);
  ASSERT_FALSE(later.ranks->stragglers.empty());
  EXPECT_EQ(later.ranks->stragglers[0].rank, 2);

  // Invalid thresholds are refused, and the last exchange is kept.
  EXPECT_EQ(s->SetRankRecords(SlowRankTwo(), {.straggler_score = 1.5}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Summarize().ranks->exchanges, 2);
}

TEST(RankSessionTest, HistoryCountsHowOftenTheStragglerWasSlow) {
  ClockedSession s;
  Steps(s, 3);
  ASSERT_TRUE(s->SetRank({.rank = 0, .local_rank = 0, .world_size = 4, .host = ""}).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(s->SetRankRecords(SlowRankTwo()).ok());
  ASSERT_TRUE(s->SetRankRecords(Even()).ok());
  Summary sum = s->Summarize();
  ASSERT_TRUE(sum.ranks.has_value());
  EXPECT_TRUE(sum.ranks->stragglers.empty());
  EXPECT_EQ(sum.ranks->exchanges, 5);
  EXPECT_EQ(sum.ranks->recent_exchanges, 5);
  EXPECT_EQ(sum.ranks->straggler_exchanges, 0) << "no straggler, nobody to count";

  // Slow again: in 5 of the 6 exchanges so far (a chronic straggler).
  ASSERT_TRUE(s->SetRankRecords(SlowRankTwo()).ok());
  sum = s->Summarize();
  EXPECT_EQ(sum.ranks->exchanges, 6);
  EXPECT_EQ(sum.ranks->recent_exchanges, 6);
  EXPECT_EQ(sum.ranks->straggler_exchanges, 5);

  // Four more: the history keeps the last kRankHistory (exchanges 3 to 10,
  // of which only the 5th was quiet).
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(s->SetRankRecords(SlowRankTwo()).ok());
  sum = s->Summarize();
  EXPECT_EQ(sum.ranks->exchanges, 10);
  EXPECT_EQ(sum.ranks->recent_exchanges, kRankHistory);
  EXPECT_EQ(sum.ranks->recent_exchanges, 8);
  EXPECT_EQ(sum.ranks->straggler_exchanges, 7);
}

TEST(RankSessionTest, ExchangesThatCouldNotJudgeTheStragglerAreNotCounted) {
  // Early in a job only some ranks answer. An exchange of two ranks cannot
  // tell who is slow, and one the straggler was missing from cannot say it
  // was not: neither may turn a chronic straggler into a transient one.
  ClockedSession s;
  Steps(s, 3);
  ASSERT_TRUE(s->SetRank({.rank = 0, .local_rank = 0, .world_size = 4, .host = ""}).ok());
  std::vector<RankRecord> two = SlowRankTwo();
  two.resize(2);  // ranks 0 and 1 only
  std::vector<RankRecord> without_two = SlowRankTwo();
  without_two.erase(without_two.begin() + 2);  // ranks 0, 1 and 3
  ASSERT_TRUE(s->SetRankRecords(two).ok());
  ASSERT_TRUE(s->SetRankRecords(without_two).ok());
  ASSERT_TRUE(s->SetRankRecords(SlowRankTwo()).ok());
  ASSERT_TRUE(s->SetRankRecords(without_two).ok());
  ASSERT_TRUE(s->SetRankRecords(SlowRankTwo()).ok());
  const Summary sum = s->Summarize();
  EXPECT_EQ(sum.ranks->exchanges, 5);
  EXPECT_EQ(sum.ranks->recent_exchanges, 2) << "only the two that heard from rank 2";
  EXPECT_EQ(sum.ranks->straggler_exchanges, 2);
  const std::vector<Finding> findings = Diagnose(sum);
  ASSERT_FALSE(findings.empty());
  EXPECT_THAT(findings.front().title, HasSubstr("chronic: slow in 2 of the last 2 exchanges"));
}

TEST(RankSessionTest, AnotherWorldSizeForgetsTheExchanges) {
  ClockedSession s;
  Steps(s, 3);
  ASSERT_TRUE(s->SetRank({.rank = 0, .local_rank = 0, .world_size = 4, .host = ""}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->SetRankRecords(SlowRankTwo()).ok());
  // The same job (a rank told again): the exchanges stand.
  ASSERT_TRUE(s->SetRank({.rank = 0, .local_rank = 0, .world_size = 4, .host = ""}).ok());
  ASSERT_TRUE(s->Summarize().ranks.has_value());
  EXPECT_EQ(s->Summarize().ranks->exchanges, 3);

  // An elastic restart with 8 ranks: what 4 ranks said is no longer true.
  ASSERT_TRUE(s->SetRank({.rank = 5, .local_rank = 5, .world_size = 8, .host = ""}).ok());
  Summary sum = s->Summarize();
  EXPECT_FALSE(sum.ranks.has_value());
  ASSERT_TRUE(sum.rank.has_value());
  EXPECT_EQ(sum.rank->world_size, 8);

  ASSERT_TRUE(s->SetRankRecords(SlowRankTwo(8)).ok());
  sum = s->Summarize();
  ASSERT_TRUE(sum.ranks.has_value());
  EXPECT_EQ(sum.ranks->ranks.size(), 8u);
  EXPECT_EQ(sum.ranks->exchanges, 1);
  EXPECT_EQ(sum.ranks->recent_exchanges, 1) << "the history went with the old job";
  EXPECT_EQ(sum.ranks->straggler_exchanges, 1);
}

// ---- JSON

// A recorded summary of rank 0 of 4 after an exchange that missed rank 3,
// with records holding unknown (NaN) and known optional numbers.
Summary RankedSummary() {
  ClockedSession s(Options{.window = 16});
  Steps(s, 5);
  EXPECT_TRUE(s->SetRank({.rank = 0, .local_rank = 0, .world_size = 4, .host = "node-0"}).ok());
  std::vector<RankRecord> records = SlowRankTwo();
  records.pop_back();
  records[0].sm_clock_ratio = 0.97;
  records[0].gpu_idle_pct = 12.5;
  records[1].phases[0].device_p50 = 0.0075;
  records[2].host_cpu_pct = 41.25;
  EXPECT_TRUE(s->SetRankRecords(records).ok());
  return s->Summarize();
}

TEST(RankJsonTest, RankAndRanksRoundTripExactly) {
  const Summary original = RankedSummary();
  ASSERT_TRUE(original.rank.has_value());
  ASSERT_TRUE(original.ranks.has_value());
  ASSERT_THAT(original.ranks->missing, ElementsAre(3));
  ASSERT_FALSE(original.ranks->stragglers.empty());
  ASSERT_TRUE(std::isnan(original.ranks->ranks[1].tokens_per_second));
  const std::string json = ToJson(original);
  const absl::StatusOr<Summary> back = SummaryFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, original);
  EXPECT_EQ(ToJson(*back), json);
  // Unknown numbers stay unknown (not 0) and known ones are kept.
  EXPECT_TRUE(std::isnan(back->ranks->ranks[1].sm_clock_ratio));
  EXPECT_TRUE(std::isnan(back->ranks->ranks[0].phases[0].device_p50));
  EXPECT_EQ(back->ranks->ranks[0].sm_clock_ratio, 0.97);
  EXPECT_EQ(back->ranks->ranks[1].phases[0].device_p50, 0.0075);
  EXPECT_EQ(back->ranks->stragglers[0].rank, 2);
}

TEST(RankJsonTest, ARankOutsideItsWorldOrABadRecordIsRefused) {
  Summary s = RankedSummary();
  s.rank->rank = 4;  // of 4
  absl::StatusOr<Summary> back = SummaryFromJson(ToJson(s));
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);

  s = RankedSummary();
  s.ranks->ranks[1].rank = 7;  // of 4: a record the comparison would refuse
  back = SummaryFromJson(ToJson(s));
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("ranks"));

  s = RankedSummary();
  s.ranks->straggler_exchanges = s.ranks->recent_exchanges + 1;
  back = SummaryFromJson(ToJson(s));
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RankJsonTest, AFileWithoutRankKeysStillReads) {
  // A file written before ranks existed: no "rank" or "ranks" key at all.
  absl::StatusOr<internal::JsonValue> doc = internal::ParseJson(ToJson(RankedSummary()));
  ASSERT_TRUE(doc.ok()) << doc.status();
  ASSERT_EQ(doc->erase("rank") + doc->erase("ranks"), 2u);
  const std::string old = doc->dump(2);
  const absl::StatusOr<Summary> back = SummaryFromJson(old);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->rank.has_value());
  EXPECT_FALSE(back->ranks.has_value());
  EXPECT_EQ(back->steps, 5);
}

// ---- Diagnose

void SetPhase(Summary& s, const std::string& name, double share) {
  PhaseStats p;
  p.name = name;
  p.builtin = true;
  p.top_level = true;
  p.steps = p.count = s.steps;
  p.share = p.inclusive_share = share;
  p.total = share * s.window_time;
  p.time.count = s.steps;
  p.time.p50 = p.time.p95 = p.time.mean = share * s.window_time / static_cast<double>(s.steps);
  s.phases.push_back(p);
}

// A host-timed loop of 100 steps of 20 ms whose top-level phases take
// `shares` of it (default: backward, forward, the rest "other").
Summary HostLoop(std::vector<std::pair<std::string, double>> shares = {
                     {"backward", 0.40}, {"forward", 0.20}, {"other", 0.40}}) {
  Summary s;
  s.source = Source::kHost;
  s.window = s.steps = s.total_steps = 100;
  s.window_time = 2.0;
  s.step_time.count = 100;
  s.step_time.mean = s.step_time.p50 = 0.020;
  s.step_time.p95 = 0.022;
  for (const auto& [name, share] : shares) SetPhase(s, name, share);
  return s;
}

RanksStats Exchange(std::vector<RankRecord> records, int world = 4) {
  RankComparison c = CompareRanks(std::move(records), world);
  RanksStats r;
  r.ranks = std::move(c.ranks);
  r.missing = std::move(c.missing);
  r.stragglers = std::move(c.stragglers);
  r.exchanges = r.recent_exchanges = 1;
  r.straggler_exchanges = r.stragglers.empty() ? 0 : 1;
  return r;
}

// `HostLoop()` as rank `rank` of 4 heard it from the exchange of `records`.
Summary OnRank(int rank, std::vector<RankRecord> records) {
  Summary s = HostLoop();
  s.rank = RankIdentity{.rank = rank, .local_rank = rank, .world_size = 4, .host = "node-0"};
  s.ranks = Exchange(std::move(records));
  return s;
}

std::optional<double> Evidence(const Finding& f, const std::string& key) {
  for (const auto& [k, v] : f.evidence) {
    if (k == key) return v;
  }
  return std::nullopt;
}

TEST(StragglerRuleTest, EveryRankNamesTheStragglerFirst) {
  const Summary s = OnRank(0, SlowRankTwo());
  ASSERT_FALSE(s.ranks->stragglers.empty());
  const std::vector<Finding> fs = Diagnose(s);
  ASSERT_FALSE(fs.empty());
  EXPECT_EQ(fs[0].id, "straggler") << Ids(fs);
  const Finding& f = fs[0];
  EXPECT_EQ(Evidence(f, "rank"), 2.0);
  ASSERT_TRUE(Evidence(f, "slowdown").has_value());
  EXPECT_NEAR(*Evidence(f, "slowdown"), s.ranks->stragglers[0].slowdown, 1e-9);
  EXPECT_NEAR(*Evidence(f, "slowdown"), 10.0, 1e-9);
  // 9 ms added to a 20 ms step: what every other rank waits.
  EXPECT_NEAR(f.share, 0.45, 1e-9);
  EXPECT_EQ(f.severity, Severity::kHigh);
  EXPECT_THAT(f.title, HasSubstr("rank 2"));
  EXPECT_THAT(f.title, HasSubstr("forward"));
  EXPECT_THAT(f.title, Not(HasSubstr("this rank")));
  EXPECT_THAT(f.recommendation, HasSubstr("node-2"));
  // No telemetry told apart: no explanation is made up.
  EXPECT_THAT(f.recommendation, Not(HasSubstr("clocks are held down")));
  EXPECT_THAT(f.recommendation, Not(HasSubstr("CPUs are saturated")));
  EXPECT_THAT(f.recommendation, Not(HasSubstr("input phase is longer")));

  // The straggler's own summary says it is the one.
  const std::vector<Finding> own = Diagnose(OnRank(2, SlowRankTwo()));
  const Finding* g = Find(own, "straggler");
  ASSERT_NE(g, nullptr) << Ids(own);
  EXPECT_THAT(g->title, HasSubstr("this rank (2)"));
}

TEST(StragglerRuleTest, RanksThatDifferByNoiseHaveNoStraggler) {
  const Summary s = OnRank(0, Even());
  ASSERT_TRUE(s.ranks->stragglers.empty());
  EXPECT_EQ(Find(Diagnose(s), "straggler"), nullptr) << Ids(Diagnose(s));
  // Nor does a summary without ranks.
  EXPECT_EQ(Find(Diagnose(HostLoop()), "straggler"), nullptr);
}

TEST(StragglerRuleTest, ChronicAndTransientAreToldApart) {
  Summary s = OnRank(0, SlowRankTwo());
  s.ranks->exchanges = 6;
  s.ranks->recent_exchanges = 6;
  s.ranks->straggler_exchanges = 5;
  std::vector<Finding> fs = Diagnose(s);
  const Finding* f = Find(fs, "straggler");
  ASSERT_NE(f, nullptr) << Ids(fs);
  EXPECT_EQ(Evidence(*f, "chronic"), 1.0);
  EXPECT_EQ(Evidence(*f, "transient"), 0.0);
  EXPECT_THAT(f->title, HasSubstr("chronic"));
  EXPECT_THAT(f->title, Not(HasSubstr("transient")));

  s.ranks->straggler_exchanges = 1;
  fs = Diagnose(s);
  f = Find(fs, "straggler");
  ASSERT_NE(f, nullptr) << Ids(fs);
  EXPECT_EQ(Evidence(*f, "chronic"), 0.0);
  EXPECT_EQ(Evidence(*f, "transient"), 1.0);
  EXPECT_THAT(f->title, HasSubstr("transient"));
  EXPECT_THAT(f->title, Not(HasSubstr("chronic")));

  // After one exchange, neither can be told yet.
  fs = Diagnose(OnRank(0, SlowRankTwo()));
  f = Find(fs, "straggler");
  ASSERT_NE(f, nullptr) << Ids(fs);
  EXPECT_EQ(Evidence(*f, "chronic"), 0.0);
  EXPECT_EQ(Evidence(*f, "transient"), 0.0);
}

std::string StragglerRecommendation(const std::vector<RankRecord>& records) {
  const std::vector<Finding> fs = Diagnose(OnRank(0, records));
  const Finding* f = Find(fs, "straggler");
  EXPECT_NE(f, nullptr) << Ids(fs);
  return f == nullptr ? std::string() : f->recommendation;
}

TEST(StragglerRuleTest, TelemetrySaysWhyTheStragglerIsSlow) {
  std::vector<RankRecord> records = SlowRankTwo();
  for (RankRecord& r : records) r.sm_clock_ratio = r.rank == 2 ? 0.6 : 0.98;
  EXPECT_THAT(StragglerRecommendation(records), HasSubstr("clocks are held down"));

  records = SlowRankTwo();
  for (RankRecord& r : records) r.host_cpu_pct = r.rank == 2 ? 98 : 40;
  const std::string cpu = StragglerRecommendation(records);
  EXPECT_THAT(cpu, HasSubstr("CPUs are saturated"));
  EXPECT_THAT(cpu, Not(HasSubstr("clocks are held down")));

  // Near its memory limit and retrying allocations: said, with the numbers
  // the rank record carried; the others' memory says nothing.
  records = SlowRankTwo();
  for (RankRecord& r : records) {
    r.memory_peak_share = r.rank == 2 ? 0.97 : 0.60;
    r.memory_alloc_retries = r.rank == 2 ? 12 : 0;
  }
  const std::string memory = StragglerRecommendation(records);
  EXPECT_THAT(memory,
              HasSubstr("its GPU memory peaks at 97% of the GPU with 12 allocation retries"));
  EXPECT_THAT(memory, Not(HasSubstr("clocks are held down")));
  // Retries alone name it; room to spare and no retries do not.
  for (RankRecord& r : records) r.memory_peak_share = 0.60;
  EXPECT_THAT(StragglerRecommendation(records), HasSubstr("with 12 allocation retries"));
  for (RankRecord& r : records) r.memory_alloc_retries = 0;
  EXPECT_THAT(StragglerRecommendation(records), Not(HasSubstr("GPU memory")));

  // Its data phase three times the others': the straggler is slow in "data".
  records.clear();
  for (int rank = 0; rank < 4; ++rank) {
    records.push_back(Record(rank, 4, 0.001, rank == 2 ? 0.009 : 0.003));
  }
  const Summary s = OnRank(0, records);
  ASSERT_FALSE(s.ranks->stragglers.empty());
  EXPECT_EQ(s.ranks->stragglers[0].phase, "data");
  const std::string data = StragglerRecommendation(records);
  EXPECT_THAT(data, HasSubstr("input phase is longer"));
  EXPECT_THAT(data, Not(HasSubstr("CPUs are saturated")));
}

// ---- Comm-bound and the straggler's wait

// A host-timed loop that spends 40 % of its step in "comm".
Summary CommLoop() { return HostLoop({{"comm", 0.40}, {"backward", 0.35}, {"forward", 0.25}}); }

// Rank 2 adds 7 ms to a 20 ms step: 35 % of it the others wait.
std::vector<RankRecord> SlowBySeven() {
  std::vector<RankRecord> records;
  for (int rank = 0; rank < 4; ++rank) {
    records.push_back(Record(rank, 4, rank == 2 ? 0.008 : 0.001));
  }
  return records;
}

TEST(StragglerRuleTest, CommBoundDoesNotBlameTheWaitOnAStraggler) {
  const std::vector<Finding> alone = Diagnose(CommLoop());
  const Finding* comm = Find(alone, "comm-bound");
  ASSERT_NE(comm, nullptr) << "the premise: 40 % in comm is comm-bound; got " << Ids(alone);
  EXPECT_NEAR(comm->share, 0.40, 1e-9);

  Summary waiting = CommLoop();
  waiting.rank = RankIdentity{.rank = 0, .local_rank = 0, .world_size = 4, .host = "node-0"};
  waiting.ranks = Exchange(SlowBySeven());
  ASSERT_FALSE(waiting.ranks->stragglers.empty());
  ASSERT_EQ(waiting.ranks->stragglers[0].rank, 2);
  ASSERT_NEAR(waiting.ranks->stragglers[0].others_wait_share, 0.35, 1e-9);
  const std::vector<Finding> fs = Diagnose(waiting);
  EXPECT_EQ(Find(fs, "comm-bound"), nullptr)
      << "0.40 - 0.35 is under the 0.10 line; got " << Ids(fs);
  EXPECT_NE(Find(fs, "straggler"), nullptr) << Ids(fs);

  // The straggler does not wait for itself: its time in comm is its own.
  Summary slow = waiting;
  slow.rank->rank = 2;
  const std::vector<Finding> own = Diagnose(slow);
  comm = Find(own, "comm-bound");
  ASSERT_NE(comm, nullptr) << Ids(own);
  EXPECT_NEAR(comm->share, 0.40, 1e-9);
}

// ---- Report

// Columns a UTF-8 line takes (one per code point).
size_t Columns(const std::string& line) {
  size_t n = 0;
  for (char c : line) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void ExpectWithin80Columns(const std::string& report) {
  for (const std::string& line : Lines(report)) {
    EXPECT_LE(Columns(line), 80u) << "line: " << line << "\nreport:\n" << report;
  }
}

// A rank's row in the per-rank table: its number, "*" for the straggler,
// then its host.
std::string RowPrefix(int rank, bool straggler, const std::string& host) {
  return absl::StrFormat("  %3d%s %s", rank, straggler ? "*" : " ", host);
}

int CountPrefix(const std::string& report, const std::string& prefix) {
  int n = 0;
  for (const std::string& line : Lines(report)) n += absl::StartsWith(line, prefix) ? 1 : 0;
  return n;
}

// A recorded session as rank 0 of `world`, after an exchange of `records`.
Summary SessionWithRanks(int world, std::vector<RankRecord> records,
                         const std::string& host = "node-0") {
  ClockedSession s;
  Steps(s, 10);
  EXPECT_TRUE(s->SetRank({.rank = 0, .local_rank = 0, .world_size = world, .host = host}).ok());
  EXPECT_TRUE(s->SetRankRecords(std::move(records)).ok());
  return s->Summarize();
}

TEST(RankReportTest, FourRanksGetARowEachAndTheStragglerIsMarked) {
  std::vector<RankRecord> records = SlowRankTwo();
  // Hosts as clusters name them: long and not always ASCII.
  records[1].host =
      "\u0443\u0437\u0435\u043b-\u043e\u0434\u0438\u043d-"
      "\u0441-\u0434\u043b\u0438\u043d\u043d\u044b\u043c-\u0438\u043c\u0435\u043d"
      "\u0435\u043c";
  records[3].host = "gpu-node-0003.cluster.example.internal";
  const std::string report = FormatReport(SessionWithRanks(4, records));
  ExpectWithin80Columns(report);
  EXPECT_THAT(report, HasSubstr("rank 0 of 4")) << report;
  EXPECT_EQ(CountPrefix(report, "ranks ("), 1) << report;
  EXPECT_THAT(report, HasSubstr("4 of 4 ranks")) << report;
  EXPECT_EQ(CountPrefix(report, RowPrefix(0, false, "node-0")), 1) << report;
  EXPECT_EQ(CountPrefix(report, RowPrefix(2, true, "node-2")), 1) << report;
  EXPECT_EQ(CountPrefix(report, RowPrefix(1, false, "")), 1) << report;
  EXPECT_EQ(CountPrefix(report, RowPrefix(3, false, "gpu-node")), 1) << report;
  EXPECT_EQ(CountPrefix(report, RowPrefix(0, true, "")), 0) << "only the straggler is marked";
  EXPECT_EQ(CountPrefix(report, RowPrefix(1, true, "")), 0);
  EXPECT_EQ(CountPrefix(report, RowPrefix(3, true, "")), 0);
  EXPECT_THAT(report, HasSubstr("straggler")) << "the finding is in the report";
  EXPECT_THAT(report, Not(HasSubstr("missing (")));
}

TEST(RankReportTest, TwelveRanksShowTheSpreadInsteadOfRows) {
  std::vector<RankRecord> records;
  for (int rank = 0; rank < 12; ++rank) records.push_back(Record(rank, 12, 0.001));
  records[7].phases[1].host_p50 = 0.010;  // forward
  records[7].step_p50 = 0.025;
  const std::string report = FormatReport(SessionWithRanks(12, records));
  ExpectWithin80Columns(report);
  EXPECT_THAT(report, HasSubstr("rank 0 of 12")) << report;
  EXPECT_EQ(CountPrefix(report, "ranks ("), 1) << report;
  for (int rank = 0; rank < 12; ++rank) {
    EXPECT_EQ(CountPrefix(report, RowPrefix(rank, false, "node-")), 0) << report;
    EXPECT_EQ(CountPrefix(report, RowPrefix(rank, true, "node-")), 0) << report;
  }
  EXPECT_THAT(report, HasSubstr("fastest rank")) << report;
  EXPECT_THAT(report, HasSubstr("slowest rank 7")) << report;
  EXPECT_THAT(report, HasSubstr("phase (p50 per step)")) << report;
  // The spread table's forward row: median 1 ms, slowest rank 7 at 10 ms.
  int forward_rows = 0;
  bool in_spread = false;
  for (const std::string& line : Lines(report)) {
    if (absl::StartsWith(line, "  phase (p50 per step)")) in_spread = true;
    if (line.empty()) in_spread = false;
    if (in_spread && absl::StartsWith(line, "  forward ")) {
      ++forward_rows;
      EXPECT_THAT(line, HasSubstr("10.0 ms")) << line;
      EXPECT_TRUE(absl::EndsWith(line, " 7")) << line;
    }
  }
  EXPECT_EQ(forward_rows, 1) << report;
}

TEST(RankReportTest, MissingRanksAreListed) {
  std::vector<RankRecord> records;
  for (int rank = 0; rank < 12; ++rank) {
    if (rank != 5 && rank != 9) records.push_back(Record(rank, 12));
  }
  std::string report = FormatReport(SessionWithRanks(12, records));
  ExpectWithin80Columns(report);
  EXPECT_THAT(report, HasSubstr("2 missing")) << report;
  int listed = 0;
  for (const std::string& line : Lines(report)) {
    if (absl::StrContains(line, "missing (")) {
      ++listed;
      EXPECT_TRUE(absl::EndsWith(line, ": 5, 9")) << line;
    }
  }
  EXPECT_EQ(listed, 1) << report;

  // The same with a per-rank table.
  std::vector<RankRecord> four = SlowRankTwo();
  four.pop_back();
  report = FormatReport(SessionWithRanks(4, four));
  ExpectWithin80Columns(report);
  EXPECT_THAT(report, HasSubstr("missing (")) << report;
  EXPECT_THAT(report, HasSubstr(": 3\n")) << report;
}

TEST(RankReportTest, ALongHostNameStaysWithin80Columns) {
  // The longest host name a rank keeps (63 bytes).
  const std::string host(63, 'h');
  std::vector<RankRecord> records = SlowRankTwo();
  for (RankRecord& r : records) r.host = host;
  const Summary s = SessionWithRanks(4, records, host);
  ASSERT_EQ(s.rank->host, host);
  ExpectWithin80Columns(FormatReport(s));
}

// ---- Prometheus

std::vector<std::string> Samples(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& line : Lines(text)) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

TEST(RankPrometheusTest, EverySampleSaysItsRank) {
  const std::string text = ToPrometheus(SessionWithRanks(4, SlowRankTwo()));
  const std::vector<std::string> samples = Samples(text);
  ASSERT_GT(samples.size(), 5u);
  for (const std::string& line : samples) {
    EXPECT_THAT(line, HasSubstr("{rank=\"0\"")) << line;
  }
  int info = 0;
  for (const std::string& line : samples) {
    if (!absl::StartsWith(line, "gpuscope_info{")) continue;
    ++info;
    EXPECT_THAT(line, HasSubstr("local_rank=\"0\""));
    EXPECT_THAT(line, HasSubstr("world_size=\"4\""));
    EXPECT_THAT(line, HasSubstr("host=\"node-0\""));
  }
  EXPECT_EQ(info, 1) << text;
  EXPECT_THAT(text, HasSubstr("gpuscope_ranks_compared{rank=\"0\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("gpuscope_ranks_missing{rank=\"0\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("gpuscope_straggler_slowdown_ratio{rank=\"0\",straggler_rank=\"2\","
                              "phase=\"forward\"}"))
      << text;
}

TEST(RankPrometheusTest, NoRankNoRankLabel) {
  ClockedSession s;
  Steps(s, 10);
  const std::string text = ToPrometheus(s->Summarize());
  ASSERT_FALSE(Samples(text).empty());
  EXPECT_THAT(text, Not(HasSubstr("rank=")));
  EXPECT_THAT(text, Not(HasSubstr("gpuscope_ranks_")));
  EXPECT_THAT(text, Not(HasSubstr("straggler")));
}

// ---- Trace

std::vector<std::string> ProcessNames(const internal::JsonValue& doc) {
  std::vector<std::string> names;
  for (const internal::JsonValue& e : doc.at("traceEvents")) {
    const internal::JsonValue* what = internal::Find(e, "name");
    if (what == nullptr || !what->is_string() || *what != "process_name") continue;
    names.push_back(e.at("args").at("name").get<std::string>());
  }
  return names;
}

TEST(RankTraceTest, ProcessNamesAndOtherDataSayTheRank) {
  ClockedSession s;
  ASSERT_TRUE(s->SetRank({.rank = 1, .local_rank = 1, .world_size = 4, .host = "node-a"}).ok());
  Steps(s, 2);
  absl::StatusOr<internal::JsonValue> doc = internal::ParseJson(ToChromeTrace(*s));
  ASSERT_TRUE(doc.ok()) << doc.status();
  const std::vector<std::string> names = ProcessNames(*doc);
  EXPECT_THAT(names, ::testing::Contains("rank 1: host: training loop"));
  for (const std::string& name : names) EXPECT_TRUE(absl::StartsWith(name, "rank 1: ")) << name;
  const internal::JsonValue* other = internal::Find(*doc, "otherData");
  ASSERT_NE(other, nullptr);
  ASSERT_NE(internal::Find(*other, "rank"), nullptr);
  EXPECT_EQ(internal::AsInt64(other->at("rank")), 1);
  ASSERT_NE(internal::Find(*other, "local_rank"), nullptr);
  EXPECT_EQ(internal::AsInt64(other->at("local_rank")), 1);
  ASSERT_NE(internal::Find(*other, "world_size"), nullptr);
  EXPECT_EQ(internal::AsInt64(other->at("world_size")), 4);
  ASSERT_NE(internal::Find(*other, "host"), nullptr);
  EXPECT_EQ(other->at("host"), "node-a");
}

TEST(RankTraceTest, WithoutARankNamesHaveNoPrefix) {
  ClockedSession s;
  Steps(s, 2);
  absl::StatusOr<internal::JsonValue> doc = internal::ParseJson(ToChromeTrace(*s));
  ASSERT_TRUE(doc.ok()) << doc.status();
  const std::vector<std::string> names = ProcessNames(*doc);
  EXPECT_THAT(names, ::testing::Contains("host: training loop"));
  for (const std::string& name : names) EXPECT_FALSE(absl::StartsWith(name, "rank ")) << name;
  const internal::JsonValue* other = internal::Find(*doc, "otherData");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(internal::Find(*other, "rank"), nullptr);
}

}  // namespace
}  // namespace gpuscope
