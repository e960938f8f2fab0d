// The rank board: what a session knows of the job's other ranks. Its own
// identity (SetRank()) and the last exchange's comparison
// (SetRankRecords()), with the history of which ranks recent exchanges found
// slow. Thread-safe: one leaf lock, held only to copy in or out, never while
// taking another; the comparison runs outside it.

#ifndef GPUSCOPE_LIB_SESSION_RANK_BOARD_H_
#define GPUSCOPE_LIB_SESSION_RANK_BOARD_H_

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "gpuscope/ranks.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

class RankBoard {
 public:
  // Session::SetRank(): InvalidArgumentError for an identity no job has. A
  // new world size (an elastic restart) forgets the old job's exchanges.
  absl::Status SetRank(const RankIdentity& identity);
  // Session::SetRankRecords(): the ranks' records of one exchange, compared.
  absl::Status SetRankRecords(std::vector<RankRecord> records, const RankOptions& options);

  std::optional<RankIdentity> rank() const;
  // The last exchange's comparison, its age as of `now_ns`
  // (CLOCK_MONOTONIC); nullopt before the first.
  std::optional<RanksStats> ranks(int64_t now_ns) const;

 private:
  // The ranks an exchange that compared 3 ranks or more compared, and those
  // it found slow.
  struct HistoryEntry {
    std::vector<int> compared;
    std::vector<int> slow;
  };

  mutable std::mutex mu_;
  std::optional<RankIdentity> rank_;
  std::optional<RanksStats> ranks_;
  int64_t ranks_at_ns_ = 0;                // CLOCK_MONOTONIC of the last exchange
  std::deque<HistoryEntry> slow_history_;  // the last kRankHistory, newest last
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_SESSION_RANK_BOARD_H_
