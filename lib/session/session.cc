// The public facade: gpuscope::Session's methods, each forwarding to
// SessionImpl, and a SessionImpl's construction,
// closing and destruction. The rest of SessionImpl lives by role:
// session/recorder.cc (the recording thread's hot path), session/pump.cc
// (draining and reading, under the aggregator lock) and session/sources.cc
// (the source ladder).

#include "gpuscope/session.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/annotator.h"
#include "backends/host/clock.h"
#include "backends/host/tsc.h"
#include "backends/telemetry/process_roles.h"
#include "base/env.h"
#include "base/fork.h"
#include "base/log.h"
#include "session/session_impl.h"
#include "session/trace_capture.h"

namespace gpuscope {
namespace {

bool DisabledByEnvironment() { return internal::EnvFlag("GPUSCOPE_DISABLE", false); }

// The options a session runs with when `options` could not be used: enough
// to answer Summarize() and status(), nothing more.
Options FallbackOptions(const Options& options) {
  Options fallback;
  fallback.enabled = false;
  fallback.clock = options.clock;
  return fallback;
}

}  // namespace

std::string_view ScopeStatusMessage(ScopeStatus status) {
  switch (status) {
    case ScopeStatus::kOk: return "recorded";
    case ScopeStatus::kDisabled:
      return "the session is not recording (disabled, closed, or in a forked child process)";
    case ScopeStatus::kWrongThread:
      return "a session records from one thread, the first one that began a scope: record other "
             "threads in their own Session";
    case ScopeStatus::kNestedStep:
      return "a step is already open: end it before beginning the next one (steps do not nest)";
    case ScopeStatus::kTooDeep:
      return "too many open scopes (kMaxOpenScopes): end scopes before opening more";
    case ScopeStatus::kInvalidPhase:
      return "invalid phase: names must be 1-64 bytes of visible text (no control or invisible "
             "characters, no leading or trailing space), not 'other' or 'launch', and "
             "fit in Options::max_phases; ids must come from this session";
    case ScopeStatus::kEndedOutOfOrder:
      return "a scope was ended while scopes opened inside it were still open; they were closed "
             "with it: end scopes in reverse order of beginning";
    case ScopeStatus::kAlreadyEnded:
      return "this scope was already ended (twice, or closed with an enclosing scope)";
    case ScopeStatus::kWrongSession:
      return "this scope belongs to another Session: end it on the session that began it";
  }
  return "unknown";
}

namespace internal {
namespace {

// 1..65535, then again: tags tell sessions' ids and tokens apart.
uint16_t NextSessionTag() {
  static std::atomic<uint32_t> next{0};
  return static_cast<uint16_t>(next.fetch_add(1, std::memory_order_relaxed) % 65535 + 1);
}

// Every session has an annotator; the phase table registers names with it.
Backends WithAnnotator(Backends backends) {
  if (backends.annotator == nullptr) backends.annotator = MakeNullAnnotator();
  return backends;
}

}  // namespace

SessionImpl::SessionImpl(const Options& options, absl::Status status, Backends backends,
                         std::atomic<bool>* recording_flag)
    : options_(options),
      status_(std::move(status)),
      fork_generation_(g_fork_generation.load(std::memory_order_relaxed)),
      session_tag_(NextSessionTag()),
      clock_(options.clock.get()),
      tsc_(options.clock == nullptr && options.enabled ? TscClock::Get() : nullptr),
      backends_(WithAnnotator(std::move(backends))),
      annotator_(backends_.annotator.get()),
      recording_flag_(recording_flag),
      phases_(
          options.max_phases,
          [this](uint16_t id, std::string_view name) { annotator_->RegisterName(id, name); },
          session_tag_),
      stream_(options.stream),
      queue_(options.enabled ? static_cast<size_t>(options.queue_capacity) : 2),
      orphaned_markers_(backends_.device_timer != nullptr ? size_t{1} << 16 : 2),
      max_staged_records_(std::max<size_t>(4 * queue_.capacity(), size_t{1} << 18)),
      aggregator_(options.enabled ? options.window : 1, options.max_phases) {
  if (!status_.ok()) {
    source_reason_ = absl::StrCat("session disabled: ", status_.message());
    return;
  }
  if (!options_.enabled) {
    source_reason_ = "session disabled (Options::enabled = false or GPUSCOPE_DISABLE set)";
    return;
  }
  aggregator_.SetTraceSteps(options_.trace_steps);
  aggregator_.SetWarmup(options_.warmup_steps);
  StartSources();
  if (clock_ == nullptr) {
    std::string clock;
    TscClock::Get(&clock);
    LogOnce("host-clock", LogLevel::kInfo, absl::StrCat("host clock: ", clock));
  }
  // Without a worker thread (the process may not start one), readers still
  // drain the queue in Summarize(); records beyond its capacity are dropped.
  registered_.store(Worker::Get().Register(this), std::memory_order_relaxed);
}

SessionImpl::~SessionImpl() {
  Close();
  if (InForkedChild()) return;  // the parent's devices are not ours to touch
  // The activity source was stopped by Close() (or ReleaseCupti()).
  if (timer_ != nullptr) {
    // Scopes cannot outlive the session: whatever they left is here now.
    // Records that arrived after Close() and scopes still open return their
    // markers, so that Stop() finds every marker back in the pool.
    std::lock_guard<std::mutex> lock(agg_mu_);
    DrainQueueLocked();
    orphaned_markers_.Drain([this](uint32_t slot) { timer_->Release(slot); });
    for (int i = 0; i < depth_; ++i) {
      const uint32_t slot = stack_[static_cast<size_t>(i)].begin_event;
      if (slot != kNoEvent) timer_->Release(slot);
    }
    aggregator_.Abandon();
    timer_->Stop();
  }
}

absl::StatusOr<PhaseId> SessionImpl::RegisterPhase(std::string_view name) {
  if (InForkedChild()) {
    return absl::FailedPreconditionError(
        "this session was created before fork(): create a new Session in the child process");
  }
  return phases_.Register(name);
}

void SessionImpl::Close() {
  if (closed_.exchange(true)) return;
  recording_flag_->store(false, std::memory_order_relaxed);
  events_on_.store(false);      // scopes still open end without a marker
  if (InForkedChild()) return;  // the parent's worker is not ours to touch
  if (registered_.exchange(false)) Worker::Get().Unregister(this);
  Flush();
  {
    // A closed session holds CUPTI no longer: a profiler may subscribe.
    std::lock_guard<std::mutex> lock(agg_mu_);
    StopActivityLocked();
  }
  if (timer_ != nullptr) {
    // Markers of steps still waiting for the GPU go back to the pool: after
    // Close() nothing asks for them again.
    std::lock_guard<std::mutex> lock(agg_mu_);
    aggregator_.Abandon();
  }
}

std::unique_ptr<Session> SessionTestPeer::Create(Options options, Backends backends) {
  return std::unique_ptr<Session>(
      new Session(std::move(options), std::make_unique<Backends>(std::move(backends))));
}

SessionImpl& SessionTestPeer::Impl(Session& session) { return *session.impl_; }

}  // namespace internal

// ---------------------------------------------------------------------------
// Session

Session::Session(Options options) : Session(std::move(options), nullptr) {}

Session::Session(Options options, std::unique_ptr<internal::Backends> backends) {
  absl::Status status = options.Validate();
  if (!status.ok()) {
    internal::Log(LogLevel::kError, absl::StrCat("session disabled: ", status.message()));
    options = FallbackOptions(options);
  } else if (DisabledByEnvironment()) {
    options.enabled = false;
  }
  internal::Backends chosen;
  if (options.enabled)
    chosen = backends ? std::move(*backends) : internal::DefaultBackends(options);
  const bool enabled = options.enabled;
  impl_ = std::make_unique<internal::SessionImpl>(options, std::move(status), std::move(chosen),
                                                  &recording_);
  recording_.store(enabled, std::memory_order_relaxed);
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(Options options) {
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  return std::make_unique<Session>(std::move(options));
}

Session::~Session() = default;

const absl::Status& Session::status() const { return impl_->status(); }
const Options& Session::options() const { return impl_->options(); }
Source Session::source() const noexcept { return impl_->source(); }

absl::StatusOr<PhaseId> Session::RegisterPhase(std::string_view name) {
  return impl_->RegisterPhase(name);
}

ScopeToken Session::BeginStep(const StepOptions& step) noexcept {
  if (!recording()) return {};
  return impl_->BeginStep(step);
}

ScopeToken Session::BeginPhase(PhaseId phase) noexcept {
  if (!recording()) return {};
  return impl_->BeginPhase(phase);
}

ScopeToken Session::BeginPhase(std::string_view name) noexcept {
  if (!recording()) return {};
  return impl_->BeginPhase(name);
}

ScopeToken Session::BeginPhase(PhaseId phase, Stream stream) noexcept {
  if (!recording()) return {};
  return impl_->BeginPhase(phase, stream.handle());
}

ScopeToken Session::BeginPhase(std::string_view name, Stream stream) noexcept {
  if (!recording()) return {};
  return impl_->BeginPhase(name, stream.handle());
}

ScopeStatus Session::End(ScopeToken token) noexcept {
  return token.ok() ? impl_->End(token) : token.status;
}

ScopeStatus Session::Cancel(ScopeToken token) noexcept {
  return token.ok() ? impl_->Cancel(token) : token.status;
}

ScopeStatus Session::EndAtLastActivity(ScopeToken token) noexcept {
  return token.ok() ? impl_->EndAtLastActivity(token) : token.status;
}

void Session::SetStepCounts(int64_t samples, int64_t tokens) noexcept {
  if (recording()) impl_->SetStepCounts(samples, tokens);
}

void Session::SetStream(uint64_t stream) noexcept {
  if (recording()) impl_->SetStream(stream);
}

int Session::OpenScopes() const noexcept { return recording() ? impl_->open_scopes() : 0; }

Summary Session::Summarize() const { return impl_->Summarize(); }
absl::Status Session::Reset(std::optional<int> warmup_steps) { return impl_->Reset(warmup_steps); }
absl::Status Session::SetRank(const RankIdentity& identity) { return impl_->SetRank(identity); }
absl::Status Session::SetRankRecords(std::vector<RankRecord> records, const RankOptions& options) {
  return impl_->SetRankRecords(std::move(records), options);
}
std::vector<StepPoint> Session::StepSeries() const { return impl_->StepSeries(); }

internal::TraceCapture internal::CaptureTrace(const Session& session) {
  return session.impl_->Trace();
}
SeriesColumns Session::StepColumns() const { return impl_->StepColumns(); }
void Session::Flush() { impl_->Flush(); }
void Session::Close() { impl_->Close(); }
void Session::ReleaseCupti() { impl_->ReleaseCupti(); }

namespace internal {

absl::Status SessionImpl::SetRank(const RankIdentity& identity) {
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
  std::lock_guard<std::mutex> lock(ranks_mu_);
  if (rank_.has_value() && rank_->world_size != kept.world_size) {
    ranks_.reset();  // another job (an elastic restart): its exchanges say nothing of this one
    slow_history_.clear();
  }
  rank_ = std::move(kept);
  return absl::OkStatus();
}

absl::Status SessionImpl::SetRankRecords(std::vector<RankRecord> records,
                                         const RankOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  int world_size = 0;
  {
    std::lock_guard<std::mutex> lock(ranks_mu_);
    if (!rank_.has_value()) {
      return absl::FailedPreconditionError(
          "Session::SetRankRecords() before SetRank(): say this process's rank and world size "
          "first");
    }
    world_size = rank_->world_size;
  }
  RankComparison c = CompareRanks(std::move(records), world_size, options);  // outside the lock
  std::lock_guard<std::mutex> lock(ranks_mu_);
  if (rank_->world_size != world_size) return absl::OkStatus();  // a new job meanwhile: stale
  // Only an exchange that could judge (3 ranks or more compared) goes into
  // the history: one that heard from too few says nothing about who is slow.
  if (c.ranks.size() >= 3) {
    RankHistoryEntry judged;
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
    for (const RankHistoryEntry& e : slow_history_) {
      if (!has(e.compared, who)) continue;
      ++stats.recent_exchanges;
      if (has(e.slow, who)) ++stats.straggler_exchanges;
    }
  }
  ranks_ = std::move(stats);
  ranks_at_ns_ = ReadMonotonicNs();
  return absl::OkStatus();
}

std::optional<RankIdentity> SessionImpl::rank() const {
  std::lock_guard<std::mutex> lock(ranks_mu_);
  return rank_;
}

}  // namespace internal

void AddLoaderWorkers(const std::vector<int>& pids) { internal::AddLoaderWorkers(pids); }

namespace internal {

class ScopeCalibration {
 public:
  static std::optional<double> Run() {
    Options options;
    options.window = 64;
    options.telemetry_interval_ms = 0;
    options.cupti = Cupti::kOff;
    options.trace_steps = 0;
    auto backends = std::make_unique<Backends>();
    backends->annotator = MakeNvtxAnnotator(options.max_phases);
    Session session(options, std::move(backends));
    if (!session.recording()) return std::nullopt;
    session.impl_->DontNameTrainingThread();
    absl::StatusOr<PhaseId> phase = session.RegisterPhase("gpuscope calibration");
    if (!phase.ok()) return std::nullopt;
    constexpr int kRounds = 5, kSteps = 64, kPhases = 15;
    std::vector<double> per_scope;
    for (int round = 0; round < kRounds; ++round) {
      const int64_t begin = ReadMonotonicNs();
      for (int i = 0; i < kSteps; ++i) {
        const ScopeToken step = session.BeginStep();
        for (int j = 0; j < kPhases; ++j) session.End(session.BeginPhase(*phase));
        session.End(step);
      }
      per_scope.push_back(static_cast<double>(ReadMonotonicNs() - begin) / (kSteps * kPhases));
    }
    std::sort(per_scope.begin(), per_scope.end());
    return per_scope[per_scope.size() / 2];
  }
};

std::optional<double> MeasuredScopeNs() {
  if (g_fork_generation.load(std::memory_order_relaxed) != 0) return std::nullopt;
  static const std::optional<double> measured = ScopeCalibration::Run();
  return measured;
}

}  // namespace internal

}  // namespace gpuscope
