// A data-parallel trainer that compares its ranks with gpuscope: each rank
// reduces its window to a RankRecord, the ranks all-gather the encoded
// records over the trainer's own communicator, and every rank's session is
// handed the same records, so every rank's diagnosis names the straggler.
//
// The ranks are threads of one process, each with its own Session (the
// thread is its session's recording thread). Each step has phases "data",
// "forward" and "backward" (sleeps standing in for the work; the slow rank's
// forward takes 3x as long) and then "comm", a barrier standing in for the
// gradient all-reduce: as in a real job, the fast ranks' comm phase grows by
// what they wait for the slow one.
//
//   ./cpp_ranks [--ranks N] [--steps N] [--slow-rank R]

#include <gpuscope/gpuscope.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

struct Args {
  int ranks = 4;
  int steps = 60;
  int slow_rank = 2;
};

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--ranks") args.ranks = value;
    if (flag == "--steps") args.steps = value;
    if (flag == "--slow-rank") args.slow_rank = value;
  }
  return args;
}

// The trainer's communicator, in-process: a barrier and an all-gather of
// byte strings. In a real trainer this is MPI_Allgather, NCCL's all-gather
// (of a small device buffer, on a communicator the training does not use)
// or the trainer's own transport; gpuscope only needs the bytes to arrive.
class InProcessComm {
 public:
  explicit InProcessComm(int size) : size_(size), slots_(static_cast<size_t>(size)) {}

  // Returns once all `size` ranks have called it.
  void Barrier() {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

  // Every rank's `bytes`, by rank.
  std::vector<std::string> AllGather(int rank, std::string bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      slots_[static_cast<size_t>(rank)] = std::move(bytes);
    }
    Barrier();  // every slot is written
    std::vector<std::string> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      all = slots_;
    }
    Barrier();  // every rank has read: the slots may be reused
    return all;
  }

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t generation_ = 0;
  std::vector<std::string> slots_;
};

void Work(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// One rank: trains, exchanges records, diagnoses. Returns what it prints
// (collected so that the ranks' output does not interleave).
std::string RunRank(int rank, const Args& args, InProcessComm& comm) {
  gpuscope::Session session(gpuscope::Options{.window = 512});
  const int forward_ms = rank == args.slow_rank ? 3 * 4 : 4;
  for (int i = 0; i < args.steps; ++i) {
    gpuscope::StepScope step(session, {.samples = 32});
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kData);
      Work(2);
    }
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kForward);
      Work(forward_ms);
    }
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kBackward);
      Work(6);
    }
    // The all-reduce: no rank goes on until the slowest has arrived.
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kComm);
      comm.Barrier();
    }
  }

  std::string out;
  const gpuscope::RankIdentity identity{
      .rank = rank, .local_rank = rank, .world_size = args.ranks, .host = ""};
  // No early return before the all-gather: every rank must reach a
  // collective, or the others wait for it forever.
  if (absl::Status s = session.SetRank(identity); !s.ok()) out += std::string(s.message()) + "\n";
  const gpuscope::RankRecord mine = gpuscope::RankRecordOf(session.Summarize(), identity);
  std::vector<gpuscope::RankRecord> records;
  for (const std::string& bytes : comm.AllGather(rank, gpuscope::EncodeRankRecord(mine))) {
    // A record that does not decode (another gpuscope version, a torn
    // transfer) is left out: its rank counts as missing, nothing fails.
    absl::StatusOr<gpuscope::RankRecord> record = gpuscope::DecodeRankRecord(bytes);
    if (record.ok()) {
      records.push_back(*std::move(record));
    } else {
      out += "rank " + std::to_string(rank) +
             ": skipped a record: " + std::string(record.status().message()) + "\n";
    }
  }
  if (absl::Status s = session.SetRankRecords(std::move(records)); !s.ok()) {
    return out + std::string(s.message()) + "\n";
  }

  const gpuscope::Summary summary = session.Summarize();
  if (rank == 0) out += gpuscope::FormatReport(summary);
  const std::vector<gpuscope::Finding> findings = gpuscope::Diagnose(summary);
  out += "rank " + std::to_string(rank) + ": " +
         (findings.empty() ? "no findings" : findings.front().id + ": " + findings.front().title) +
         "\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  if (args.ranks < 1 || args.steps < 1) {
    std::cerr << "--ranks and --steps must be at least 1\n";
    return 2;
  }
  InProcessComm comm(args.ranks);
  std::vector<std::string> outputs(static_cast<size_t>(args.ranks));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < args.ranks; ++rank) {
    threads.emplace_back(
        [&, rank] { outputs[static_cast<size_t>(rank)] = RunRank(rank, args, comm); });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& out : outputs) std::cout << out;
  return 0;
}
