// File: gpuscope/session.h
// -----------------------------------------------------------------------------
//
// A `Session` records the steps and phases of one training loop and
// summarizes them on request. It owns a bounded queue that the recording
// thread appends to, and shares one background worker per process that drains
// every session's queue into a fixed-size ring of recent steps (the window)
// and a lifetime histogram.
//
// Most code uses the RAII scopes in gpuscope/scopes.h; the `Begin*()`/`End()`
// pairs below are for frameworks whose hooks cannot hold a scope object.
//
// Example:
//
//   gpuscope::Session session(gpuscope::Options{.window = 512});
//   for (int i = 0; i < num_steps; ++i) {
//     gpuscope::StepScope step(session, {.samples = batch_size});
//     { gpuscope::PhaseScope p(session, gpuscope::Phase::kData); NextBatch(); }
//     { gpuscope::PhaseScope p(session, gpuscope::Phase::kForward); Forward(); }
//   }
//   std::cout << gpuscope::FormatReport(session.Summarize());
//
// Threads. One thread records into a session: the first thread that begins a
// scope becomes its recording thread, and scopes from any other thread are
// ignored and counted (`MisuseCounts::wrong_thread`). `Summarize()`,
// `Reset()`, `RegisterPhase()`, `Flush()` and `Close()` are safe from any
// thread.
//
// Misuse has a defined outcome; none aborts, throws or blocks:
//   * A scope ended while scopes opened after it are still open closes those
//     too, at the same instant (out_of_order_end); ending them later does
//     nothing (stale_end).
//   * A step begun while a step is open is ignored (nested_step).
//   * A phase outside any step is recorded on its own: it appears in its
//     PhaseStats' `outside_steps_*` fields, not in any step's time.
//   * More than kMaxOpenScopes open scopes: the deeper ones are ignored.
//   * A phase name that is empty, too long, reserved or does not fit in the
//     table, or a PhaseId from another session, is ignored (invalid_phase).
//     A ScopeToken from another session is ignored by End() (stale_end).
//     Sessions are told apart by a 16-bit tag: only sessions created 65535
//     sessions apart could be confused.
//   * Invalid `Options`: the constructor makes a session that records
//     nothing and whose `status()` says why (`Create()` returns the error).
//
// fork(): in a child process (a DataLoader worker, say) every session created
// before the fork records nothing, its `Summarize()` returns an empty summary,
// and nothing of the parent's background worker is touched. Sessions created
// in the child work normally.

#ifndef GPUSCOPE_SESSION_H_
#define GPUSCOPE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuscope/options.h"
#include "gpuscope/phase.h"
#include "gpuscope/ranks.h"
#include "gpuscope/summary.h"
#include "gpuscope/timeline.h"

namespace gpuscope {

class Session;

namespace internal {
class SessionImpl;
class SessionTestPeer;
class ScopeCalibration;
struct Backends;
struct TraceCapture;
TraceCapture CaptureTrace(const Session& session);  // session/trace_capture.h
}  // namespace internal

// What a Begin*() or End() call did: kOk, or why it could not do what was
// asked.
enum class ScopeStatus : uint8_t {
  kOk = 0,
  kDisabled,         // the session is disabled, closed, or lives in a forked child
  kWrongThread,      // called from a thread other than the recording thread
  kNestedStep,       // Begin: a step is already open
  kTooDeep,          // Begin: kMaxOpenScopes scopes are already open
  kInvalidPhase,     // Begin: bad or unknown phase name / id
  kEndedOutOfOrder,  // End: scopes opened inside this one were still open (closed with it)
  kAlreadyEnded,     // End: the scope was already closed (ended twice, or with an enclosing one)
  kWrongSession,     // End: the token came from another Session
};

// A short English explanation of `status`, with what to do about it.
std::string_view ScopeStatusMessage(ScopeStatus status);

// AllocatorStats
//
// What a GPU memory allocator says about one GPU at one moment, for
// Session::RecordMemory(): PyTorch's caching allocator's
// `torch.cuda.memory_stats()`, or a C++ trainer's own. Bytes; NaN (or -1
// for the counters) where the allocator does not keep the number.
struct AllocatorStats {
  int device = 0;                                                     // CUDA device ordinal
  double allocated_bytes = std::numeric_limits<double>::quiet_NaN();  // held by live tensors
  double reserved_bytes = std::numeric_limits<double>::quiet_NaN();   // held from the GPU
  // The allocator's own high-water marks since it started or its user last
  // reset them (gpuscope never does): where one rose between two samples,
  // the window's peak is exact.
  double peak_allocated_bytes = std::numeric_limits<double>::quiet_NaN();
  double peak_reserved_bytes = std::numeric_limits<double>::quiet_NaN();
  // Counted since the allocator started: cudaMalloc retried after freeing
  // the cache, and out-of-memory errors raised.
  int64_t alloc_retries = -1;
  int64_t ooms = -1;
  double total_bytes = std::numeric_limits<double>::quiet_NaN();  // the GPU's memory
};

// ScopeToken
//
// Returned by Begin*() and handed back to End() of the same session.
// Trivially copyable, 8 bytes.
struct ScopeToken {
  uint32_t serial = 0;  // 0: no scope was opened
  uint8_t depth = 0;
  ScopeStatus status = ScopeStatus::kDisabled;
  uint16_t session_tag = 0;

  bool ok() const { return serial != 0; }
};

class Session {
 public:
  // Session::Session()
  //
  // Starts a session. With invalid `options` the session records nothing and
  // `status()` holds the error (use `Create()` to get it as a value). Starts
  // the process's background worker if it is not running yet.
  explicit Session(Options options = {});

  // Session::Create()
  //
  // As the constructor, but returns InvalidArgumentError for invalid options.
  static absl::StatusOr<std::unique_ptr<Session>> Create(Options options = {});

  // Flushes and closes (see Close()). Scopes must not outlive their session.
  ~Session();

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  Session(Session&&) = delete;
  Session& operator=(Session&&) = delete;

  // Session::status()
  //
  // OkStatus(), or why this session records nothing.
  const absl::Status& status() const;

  // Session::recording()
  //
  // Whether scopes record. One relaxed load: this is the branch a disabled
  // scope costs.
  bool recording() const noexcept { return recording_.load(std::memory_order_relaxed); }

  // Session::options()
  const Options& options() const;

  // Session::source()
  //
  // Where the GPU side of this session's numbers comes from right now (it
  // can be lowered to kHost while running, when the device fails).
  // Thread-safe, one atomic load.
  Source source() const noexcept;

  // Session::RegisterPhase()
  //
  // The id of phase `name`, registering it on first use; built-in names
  // return their built-in id. Thread-safe; takes a lock and may allocate, so
  // call it once, outside the loop. Errors: InvalidArgumentError (the rules of
  // ValidatePhaseName(): empty, too long, control or invisible characters, "other"),
  // ResourceExhaustedError (the table holds Options::max_phases names).
  absl::StatusOr<PhaseId> RegisterPhase(std::string_view name);

  // Session::BeginStep() / BeginPhase() / End()
  //
  // The hot path. No allocation, no lock, no system call beyond the clock.
  // Each Begin*() returns a token to pass to End(); a token that is not ok()
  // may be passed to End() too (it does nothing). Thread: the recording
  // thread (see above). `BeginPhase(name)` looks the name up without a lock
  // and registers it on first use (which locks and allocates, once).
  ScopeToken BeginStep(const StepOptions& step = {}) noexcept;
  ScopeToken BeginPhase(PhaseId phase) noexcept;
  ScopeToken BeginPhase(std::string_view name) noexcept;
  ScopeStatus End(ScopeToken token) noexcept;

  // Session::BeginPhase(phase, stream)
  //
  // A phase whose GPU work goes on `stream` (a copy stream, another device's
  // stream) rather than the session's: its begin and end markers are
  // recorded there, and its device time is that stream's. Work may go on
  // such a stream only while a phase naming it is open (docs/definitions.md
  // "Events"). Phases get markers only inside a step that has them (the
  // session has a stream). Hot path.
  ScopeToken BeginPhase(PhaseId phase, Stream stream) noexcept;
  ScopeToken BeginPhase(std::string_view name, Stream stream) noexcept;

  // Session::Cancel()
  //
  // Closes the scope of `token` (and any opened inside it) without recording
  // them: for a step that turned out not to exist, such as the one begun to
  // wait for the next item of a loop that has none left. Hot path.
  ScopeStatus Cancel(ScopeToken token) noexcept;

  // Session::EndAtLastActivity()
  //
  // Ends the scope of `token` (and any opened inside it) as End() does, but
  // at the moment the recording thread last ended a scope (the scope's own
  // begin if that was earlier): for a step whose end went unobserved, such as
  // the step of a Python `for` loop over `steps()` left by `break`, which is
  // noticed only at the session's next scope. Its host time then stops where
  // the loop's last recorded work did, rather than taking in whatever ran
  // after the loop. With a GPU source such a step keeps its host numbers
  // only: a device marker recorded when the end is noticed would take in
  // the GPU work that ran after the loop. Hot path.
  ScopeStatus EndAtLastActivity(ScopeToken token) noexcept;

  // Session::SetStepCounts()
  //
  // Sets the open step's sample and token counts (negative: not given), for
  // when they are known only once the batch has arrived. No-op without an
  // open step. Hot path.
  void SetStepCounts(int64_t samples, int64_t tokens) noexcept;

  // Session::SetStream()
  //
  // The device stream (a valid CUstream as an integer; 0: the legacy default
  // stream of the thread's current context; kNoStream: none) that steps,
  // and phases that name no stream, begun from now on are marked on. Hot
  // path; recording thread. Python calls it with torch's current stream at
  // every step.
  void SetStream(uint64_t stream) noexcept;

  // Session::RecordMemory()
  //
  // One GPU's allocator numbers now (`source` names the allocator the first
  // time: "torch.cuda", "application" when empty), stamped with the
  // session's clock. The background worker finds each step's peak and the
  // phase that reached it (Summary::memory). Thread-safe, and cheap (a lock
  // and a copy, no allocation once warm): call it from a thread of your own
  // at a fixed rate (the Python package samples PyTorch's allocator so), or
  // from the allocator at each change for exact peaks; not from the
  // recording thread's hot path. Up to 65,536 samples wait for the worker;
  // beyond that the oldest half is dropped (each sample carries the
  // allocator's counters and high-water marks, so only the shape between
  // them is lost) and the log says so once.
  void RecordMemory(const AllocatorStats& stats, std::string_view source = {});

  // Session::RecordOom()
  //
  // A CUDA out-of-memory error is ending the open step: keeps `oom` as
  // Summary::memory->oom (finding "oom"); `source` names the allocator when
  // no sample has ("torch.cuda"; "application" when empty). Called on the
  // recording thread, the step number and phase path left at their
  // defaults are filled in from the scopes open now. A short lock (never
  // the aggregator's); records nothing else; the caller re-raises.
  void RecordOom(OomEvent oom, std::string_view source = {});

  // Session::CurrentStall()
  //
  // The stall in progress: a step, or a phase outside steps, open past its
  // limit (Options::stall_after_s; docs/definitions.md "Stalls"), as the
  // background worker last looked (every flush interval), or nullopt. Any
  // thread; a short lock of its own. Summary::stalls keeps them all.
  std::optional<Stall> CurrentStall() const;

  // Session::RecordingThreadId()
  //
  // The kernel thread id (gettid(); Python's threading native_id) of the
  // thread that records: the first to open a scope. 0 before that. Any
  // thread: what a stall report names to take that thread's stack.
  int RecordingThreadId() const noexcept;

  // Session::OpenScopes()
  //
  // How many scopes are open on the recording thread right now, the step
  // included: for code that opens and ends scopes on its behalf (the
  // zero-code runner) and must not end a step around scopes the program
  // still holds. Recording thread only. 0 on a session that does not record.
  int OpenScopes() const noexcept;

  // Session::Summarize()
  //
  // A snapshot of the window and the run so far, including every step that
  // has ended. Thread-safe; never blocks the recording thread (it takes the
  // aggregator's lock, which only the background worker and other readers
  // hold). Cost: about 75 us for a window of 4,096 steps of 5 phases, 6.7 ms
  // for 65,536 steps of 100 phases, 8.2 ms when the window has moved on by
  // 256 steps since the last summary (BM_Summarize, BM_SummarizeLive; 2-vCPU
  // AMD EPYC; no sort: see docs/benchmarks.md).
  Summary Summarize() const;

  // Session::Reset()
  //
  // Measurement restarts: the window, the run's histogram and totals (phases
  // outside steps included) and the warm-up totals are dropped, and the
  // next `warmup_steps` completed steps (default: Options::warmup_steps)
  // are warm-up again. For a warm-up the loop defines itself (Reset(0) once
  // it is over), or between epochs or configurations.
  //
  // The cut is at the call: steps that ended before it are dropped, steps
  // that end after it are counted, a step open at the call (begun before,
  // ended after) whole, from its begin, phases ended before the call
  // included. So `Reset()` inside the first step to measure keeps that step.
  // Kept: misuse counts, the rank and rank exchanges, the trace (a timeline
  // of the last steps, not a statistic), the source, step numbers (they go
  // on). Summaries taken before keep what they said.
  //
  // Thread-safe; never blocks the recording thread (it drains the queue and
  // resets under the aggregator lock, as Summarize() does). No-op, returning
  // OkStatus(), on a session that does not record. InvalidArgumentError
  // when `warmup_steps` is outside 0..kMaxWarmupSteps (nothing is reset).
  absl::Status Reset(std::optional<int> warmup_steps = std::nullopt);

  // Session::SetRank()
  //
  // This process's place in a distributed job: in every summary from now on
  // (Summary::rank; the report, JSON, Prometheus labels and trace carry it).
  // InvalidArgumentError unless 0 <= rank < world_size and local_rank >= 0
  // (an empty host is this machine's name; a longer one is cut to 63
  // bytes). A world size other than the last one (an
  // elastic restart) forgets the exchanges heard so far. Thread-safe.
  absl::Status SetRank(const RankIdentity& identity);

  // Session::SetRankRecords()
  //
  // The records of one exchange, gathered by the caller (this rank's own,
  // RankRecordOf(Summarize(), identity), among them): compared with
  // CompareRanks() in the world of SetRank(), and kept. Summary::ranks says
  // what the last exchange found, and how often the straggler's rank was
  // slow in the kRankHistory exchanges before; Diagnose() names the
  // straggler on every rank. FailedPreconditionError before SetRank();
  // InvalidArgumentError for invalid `options`. Records that
  // ValidateRankRecord() refuses are left out, their ranks missing.
  // Thread-safe; costs CompareRanks() (about 100 us for 64 ranks).
  absl::Status SetRankRecords(std::vector<RankRecord> records, const RankOptions& options = {});

  // Session::StepSeries()
  //
  // The window's steps, oldest first (gpuscope/timeline.h): step time, each
  // top-level phase's time, GPU idle by cause, telemetry. Thread-safe; as
  // Summarize(), never blocks the recording thread.
  std::vector<StepPoint> StepSeries() const;

  // Session::StepColumns()
  //
  // The same steps as StepSeries(), one column per field
  // (gpuscope/timeline.h): the form to plot a long window from.
  // Thread-safe; never blocks the recording thread.
  SeriesColumns StepColumns() const;

  // Session::Flush()
  //
  // Drains records that are waiting in the queue. Thread-safe. Summarize()
  // does this itself; Flush() exists for callers that want the worker's view
  // up to date (before a fork, say).
  void Flush();

  // Session::ReleaseCupti()
  //
  // Gives CUPTI back (disables this session's activity kinds, flushes,
  // unsubscribes) so that a profiler (torch.profiler, Nsight) can use it; the
  // session goes on with CUDA events. Steps whose records had not all arrived
  // lose their GPU numbers. No-op unless the source is kCupti. Thread-safe.
  void ReleaseCupti();

  // Session::Close()
  //
  // Stops recording, drains what is queued and leaves the background worker.
  // Idempotent and thread-safe; Summarize() keeps working afterwards.
  void Close();

 private:
  friend class internal::SessionTestPeer;
  friend class internal::ScopeCalibration;
  friend internal::TraceCapture internal::CaptureTrace(const Session& session);
  // Runs on `backends` instead of the process's defaults (tests, simulation).
  Session(Options options, std::unique_ptr<internal::Backends> backends);

  std::atomic<bool> recording_{false};
  std::unique_ptr<internal::SessionImpl> impl_;
};

// AddLoaderWorkers()
//
// Names the data loader's worker processes (pids), so that the telemetry
// counts their CPU, and their own children's, as the loader's
// (TelemetryStats::worker_cores; the input-bound rules judge the loader by
// it) and the process's other descendants apart (child_cores). An empty list
// says the loader has no worker processes (it runs in the training process).
// Until a loader names its workers, every descendant counts as a child
// process of unknown role. Process-wide and additive (a job with several
// loaders names each; pids that exit count for nothing); thread-safe.
// Session.steps() and `gpuscope run` do this for a torch DataLoader.
void AddLoaderWorkers(const std::vector<int>& pids);

}  // namespace gpuscope

#endif  // GPUSCOPE_SESSION_H_
