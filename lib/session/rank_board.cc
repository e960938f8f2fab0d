#include "session/rank_board.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/host/clock.h"

namespace gpuscope::internal {

absl::Status RankBoard::SetRank(const RankIdentity& identity) {
  // The record this identity would send: its checks are the identity's, and
  // it fills in the host name.
  const RankRecord probe = RankRecordOf(Summary{}, identity);
  if (absl::Status s = ValidateRankRecord(probe); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Session::SetRank(rank=", identity.rank, ", local_rank=", identity.local_rank,
        ", world_size=", identity.world_size, "): use 0 <= rank < world_size and local_rank >= 0"));
  }
  RankIdentity kept = identity;
  kept.host = probe.host;
  std::lock_guard<std::mutex> lock(mu_);
  if (rank_.has_value() && rank_->world_size != kept.world_size) {
    ranks_.reset();  // another job (an elastic restart): its exchanges say nothing of this one
    slow_history_.clear();
  }
  rank_ = std::move(kept);
  return absl::OkStatus();
}

absl::Status RankBoard::SetRankRecords(std::vector<RankRecord> records,
                                       const RankOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  int world_size = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!rank_.has_value()) {
      return absl::FailedPreconditionError(
          "Session::SetRankRecords() before SetRank(): say this process's rank and world size "
          "first");
    }
    world_size = rank_->world_size;
  }
  RankComparison c = CompareRanks(std::move(records), world_size, options);  // outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  if (rank_->world_size != world_size) return absl::OkStatus();  // a new job meanwhile: stale
  // Only an exchange that could judge (3 ranks or more compared) goes into
  // the history: one that heard from too few says nothing about who is slow.
  if (c.ranks.size() >= 3) {
    HistoryEntry judged;
    for (const RankRecord& r : c.ranks) judged.compared.push_back(r.rank);
    for (const Straggler& x : c.stragglers) judged.slow.push_back(x.rank);
    slow_history_.push_back(std::move(judged));
    while (slow_history_.size() > static_cast<size_t>(kRankHistory)) slow_history_.pop_front();
  }
  RanksStats stats;
  stats.exchanges = (ranks_.has_value() ? ranks_->exchanges : 0) + 1;
  stats.ranks = std::move(c.ranks);
  stats.missing = std::move(c.missing);
  stats.stragglers = std::move(c.stragglers);
  const auto has = [](const std::vector<int>& ranks, int rank) {
    return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
  };
  if (stats.stragglers.empty()) {
    stats.recent_exchanges = static_cast<int64_t>(slow_history_.size());
  } else {
    // Of the judged exchanges that heard from the straggler's rank (one it
    // was missing from can say neither slow nor not), those that found it
    // slow.
    const int who = stats.stragglers.front().rank;
    for (const HistoryEntry& e : slow_history_) {
      if (!has(e.compared, who)) continue;
      ++stats.recent_exchanges;
      if (has(e.slow, who)) ++stats.straggler_exchanges;
    }
  }
  ranks_ = std::move(stats);
  ranks_at_ns_ = ReadMonotonicNs();
  return absl::OkStatus();
}

std::optional<RankIdentity> RankBoard::rank() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rank_;
}

std::optional<RanksStats> RankBoard::ranks(int64_t now_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<RanksStats> ranks = ranks_;
  if (ranks.has_value()) {
    ranks->age = std::max<double>(0, 1e-9 * static_cast<double>(now_ns - ranks_at_ns_));
  }
  return ranks;
}

}  // namespace gpuscope::internal
