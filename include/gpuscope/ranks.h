// File: gpuscope/ranks.h
// -----------------------------------------------------------------------------
//
// Ranks compared. Each rank of a distributed job reduces its window to a
// `RankRecord` (step time, the largest phases' host and device time, GPU
// idle, throughput, clocks), the ranks share their records, and
// `CompareRanks()` says which rank is slow and which phase makes it slow.
//
// Nothing here moves bytes between processes: a record travels as a
// fixed-size string (`EncodeRankRecord()`, `DecodeRankRecord()`) over
// whatever the job already has (gpuscope's Python package uses the job's
// torch.distributed store; a C++ trainer its own communicator), so the
// scoring is the same wherever the records came from.
//
// Scoring. Per phase, on device time where every rank compared has it and
// on host time otherwise, a rank's relative score is the median of the
// other ranks' per-step time over its own (1: as fast as the others; 0.5:
// twice as slow). This is NVIDIA's Resiliency Extension's relative
// performance score with the median of the others as the reference instead
// of the fastest rank, so that one unusually fast rank does not make every
// other one look slow. A rank is a straggler in a phase when its score is
// below `RankOptions::straggler_score` (0.75; the extension flags below
// 0.7 against the fastest rank, the same line when the fastest is 6.7 %
// faster than the median: docs/distributed.md) and the time it adds per
// step is at least `RankOptions::min_excess_share` of the others' median
// step time (5 %, the input-bound line: less is within what a window's
// noise and a loaded host move a median). The straggler reported is the
// (rank, phase) that
// adds the most time per step; with collectives in every step, that is
// also what each other rank loses waiting for it.
//
// Example (a C++ trainer with its own communicator):
//
//   gpuscope::RankRecord mine = gpuscope::RankRecordOf(session.Summarize(),
//                                                     {.rank = rank, .world_size = world});
//   std::vector<std::string> all = my_allgather(gpuscope::EncodeRankRecord(mine));
//   std::vector<gpuscope::RankRecord> records;
//   for (const std::string& bytes : all) {
//     if (auto r = gpuscope::DecodeRankRecord(bytes); r.ok()) records.push_back(*r);
//   }
//   gpuscope::RankComparison c = gpuscope::CompareRanks(records, world);
//   if (std::optional<gpuscope::Straggler> s = c.straggler())
//     std::cout << "rank " << s->rank << " is slow in " << s->phase << "\n";

#ifndef GPUSCOPE_RANKS_H_
#define GPUSCOPE_RANKS_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuscope/summary.h"

namespace gpuscope {

// The bytes of an encoded record, whatever it holds. The record types
// (RankIdentity, RankPhase, RankRecord, Straggler) are in gpuscope/summary.h,
// since a summary carries them.
inline constexpr size_t kRankRecordBytes = 2048;

// The name a straggler's phase has when it was found on the ranks' compute
// kernel time (RankRecord::compute_time) rather than in a phase.
inline constexpr std::string_view kComputeKernelsName = "compute kernels";

// The record of `summary` for the rank `identity` names: the window's step
// time, its kMaxRankPhases largest phases, GPU idle, throughput and
// telemetry. Valid (ValidateRankRecord()) when `identity` is: 0 <= rank <
// world_size, local_rank >= 0.
RankRecord RankRecordOf(const Summary& summary, const RankIdentity& identity);

// OK for a record the other ranks can use; else InvalidArgumentError saying
// what is wrong: the rank outside its world, a host name over 63 bytes or a
// phase name over kMaxPhaseNameLength (or empty, or repeated), more than
// kMaxRankPhases phases, a negative step count, a time that is not a
// finite number of seconds >= 0, or an infinite optional number.
absl::Status ValidateRankRecord(const RankRecord& record);

// Exactly kRankRecordBytes bytes, little-endian, versioned. A record that
// ValidateRankRecord() refuses is encoded all the same (host and names cut)
// and DecodeRankRecord() refuses it.
std::string EncodeRankRecord(const RankRecord& record);

// The record `bytes` holds; InvalidArgumentError when they are not one
// (wrong size, version or magic, an unterminated string, or a record
// ValidateRankRecord() refuses), saying which. Never reads past `bytes`.
absl::StatusOr<RankRecord> DecodeRankRecord(std::string_view bytes);

// RankOptions
//
// The straggler test's thresholds (see the file comment for their origin).
struct RankOptions {
  double straggler_score = 0.75;   // relative score below which a rank is slow, (0, 1)
  double min_excess_share = 0.05;  // added time per step over the others' step p50, [0, 1)

  absl::Status Validate() const;
};

// RankComparison
//
// What one exchange's records say.
struct RankComparison {
  std::vector<RankRecord> ranks;  // by rank, one each (a duplicate's later record wins)
  std::vector<int> missing;       // ranks below the world size with no record (first 4096)
  // Every (rank, phase) below the threshold, most time added first; the
  // first is the straggler to name.
  std::vector<Straggler> stragglers;
  std::optional<Straggler> straggler() const {
    return stragglers.empty() ? std::nullopt : std::optional<Straggler>(stragglers.front());
  }
};

// Compares the ranks of `records` (any order) in a job of `world_size`
// ranks. Records of ranks outside [0, world_size), and records
// ValidateRankRecord() refuses, are left out (their ranks count as
// missing). Device time is compared in a phase when every rank with the
// phase has one above 0. Fewer than 3 ranks with a phase give no straggler
// in it (with two, which one is slow is a matter of reference). When no
// phase names a straggler and every rank has a compute_time (CUPTI), the
// ranks' compute kernel time is scored the same way, as phase
// kComputeKernelsName on device time. Invalid `options` are replaced by the
// defaults. Cost: O(ranks x phases x log
// ranks).
RankComparison CompareRanks(std::vector<RankRecord> records, int world_size,
                            const RankOptions& options = {});

}  // namespace gpuscope

#endif  // GPUSCOPE_RANKS_H_
