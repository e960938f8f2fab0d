// The public facade: gpuscope::Session's methods, each forwarding to
// SessionImpl (session/session_impl.h), and SessionImpl itself: its
// construction, closing and destruction, and the readers that assemble what
// its parts (the recorder, the pump, the rank board) hold.

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
#include "backends/cuda/cuda_driver_timer.h"
#include "backends/host/clock.h"
#include "backends/host/tsc.h"
#include "backends/telemetry/process_roles.h"
#include "base/env.h"
#include "base/fork.h"
#include "base/log.h"
#include "core/efficiency.h"
#include "core/step_series.h"
#include "core/summarize.h"
#include "gpuscope/version.h"
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
      backends_(WithAnnotator(std::move(backends))),
      phases_(
          options.max_phases,
          [annotator = backends_.annotator.get()](uint16_t id, std::string_view name) {
            annotator->RegisterName(id, name);
          },
          NextSessionTag()),
      recorder_(options_, phases_.session_tag(), options.clock.get(),
                options.clock == nullptr && options.enabled ? TscClock::Get() : nullptr,
                backends_.annotator.get(), &phases_, recording_flag,
                backends_.device_timer != nullptr),
      pump_(options_, backends_, recorder_, phases_),
      recording_flag_(recording_flag) {
  if (!status_.ok()) {
    pump_.SetDisabledReason(absl::StrCat("session disabled: ", status_.message()));
    return;
  }
  if (!options_.enabled) {
    pump_.SetDisabledReason("session disabled (Options::enabled = false or GPUSCOPE_DISABLE set)");
    return;
  }
  pump_.Start();
  if (options_.clock == nullptr) {
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
  pump_.Destroy();
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
  recorder_.SetDeviceTimer(nullptr);  // scopes still open end without a marker
  if (InForkedChild()) return;        // the parent's worker is not ours to touch
  if (registered_.exchange(false)) Worker::Get().Unregister(this);
  pump_.Close();
}

void SessionImpl::ReleaseCupti() {
  if (InForkedChild()) return;
  pump_.ReleaseCupti(closed_.load());
}

Summary SessionImpl::Summarize() {
  if (InForkedChild()) {
    Summary s;
    s.version = GPUSCOPE_VERSION;
    s.window = options_.window;
    s.source_reason =
        "recording is off in a forked child process: sessions created before fork() record "
        "nothing here; create a new Session in the child";
    return s;
  }
  SummaryInputs inputs;
  const WindowSnapshot snapshot = pump_.Snapshot(&inputs);
  inputs.overhead.scope_ns = MeasuredScopeNs();
  inputs.efficiency = EfficiencyInputs::From(options_, DeviceNameForPeak());
  inputs.rank = ranks_.rank();
  inputs.ranks = ranks_.ranks(ReadMonotonicNs());
  return SummarizeWindow(snapshot, inputs);
}

std::string SessionImpl::DeviceNameForPeak() {
  // Only where the table is to be read: MFU asked for, no peak and no name
  // given, and a real GPU (a simulated one has no model).
  if ((!(options_.flops_per_step > 0) && !(options_.flops_per_sample > 0)) ||
      options_.peak_flops > 0 || !options_.device_name.empty() ||
      options_.simulated_device != nullptr) {
    return options_.device_name;
  }
  std::lock_guard<std::mutex> lock(device_name_mu_);
  if (device_name_.empty()) {
    if (absl::StatusOr<std::string> name = ProcessCudaDeviceName(); name.ok()) device_name_ = *name;
  }
  return device_name_;
}

absl::Status SessionImpl::Reset(std::optional<int> warmup_steps) {
  const int warmup = warmup_steps.value_or(options_.warmup_steps);
  if (warmup < 0 || warmup > kMaxWarmupSteps) {
    return absl::InvalidArgumentError(absl::StrCat("Session::Reset(warmup_steps = ", warmup,
                                                   "): use a value from 0 to ", kMaxWarmupSteps,
                                                   " (nothing was reset)"));
  }
  // A session that records nothing has nothing to drop; in a forked child
  // the aggregator is the parent's.
  if (!status_.ok() || !options_.enabled || InForkedChild()) return absl::OkStatus();
  pump_.Reset(warmup);
  return absl::OkStatus();
}

std::vector<StepPoint> SessionImpl::StepSeries() {
  std::vector<StepPoint> series;
  if (InForkedChild()) return series;
  const WindowSnapshot snapshot = pump_.Snapshot();
  FillSeries(snapshot.window, snapshot.phase_names, &series);
  return series;
}

SeriesColumns SessionImpl::StepColumns() {
  SeriesColumns columns;
  if (InForkedChild()) return columns;
  const WindowSnapshot snapshot = pump_.Snapshot();
  FillColumns(snapshot.window, snapshot.phase_names, &columns);
  return columns;
}

TraceCapture SessionImpl::Trace() {
  TraceCapture capture;
  if (InForkedChild()) return capture;
  pump_.TraceSteps(&capture.steps, &capture.launch_threshold_ns);
  capture.phase_names.reserve(static_cast<size_t>(phases_.size()));
  for (int id = 0; id < phases_.size(); ++id)
    capture.phase_names.emplace_back(phases_.Name(static_cast<uint16_t>(id)));
  capture.rank = ranks_.rank();
  return capture;
}

void SessionImpl::RecordOom(OomEvent oom, std::string_view source) {
  if (InForkedChild() || !status_.ok()) return;
  uint64_t seq = 0;  // the open step's sequence number: the pump numbers it as it completes
  if (oom.step < 0 && oom.phase_path.empty() && recorder_.owner_is_caller() &&
      recorder_.open_scopes() > 0) {
    std::vector<uint16_t> path;
    seq = recorder_.OpenPath(&path);
    for (uint16_t id : path) {
      if (!oom.phase_path.empty()) oom.phase_path += '/';
      oom.phase_path += phases_.Name(id);
    }
    if (!path.empty()) oom.phase = std::string(phases_.Name(path.back()));
  }
  pump_.RecordOom(oom, source, seq);
}

void SessionImpl::Flush() {
  if (InForkedChild()) return;
  pump_.Flush();
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
  return impl_->recorder().BeginStep(step);
}

ScopeToken Session::BeginPhase(PhaseId phase) noexcept {
  if (!recording()) return {};
  return impl_->recorder().BeginPhase(phase);
}

ScopeToken Session::BeginPhase(std::string_view name) noexcept {
  if (!recording()) return {};
  return impl_->recorder().BeginPhase(name);
}

ScopeToken Session::BeginPhase(PhaseId phase, Stream stream) noexcept {
  if (!recording()) return {};
  return impl_->recorder().BeginPhase(phase, stream.handle());
}

ScopeToken Session::BeginPhase(std::string_view name, Stream stream) noexcept {
  if (!recording()) return {};
  return impl_->recorder().BeginPhase(name, stream.handle());
}

ScopeStatus Session::End(ScopeToken token) noexcept {
  return token.ok() ? impl_->recorder().End(token) : token.status;
}

ScopeStatus Session::Cancel(ScopeToken token) noexcept {
  return token.ok() ? impl_->recorder().Cancel(token) : token.status;
}

ScopeStatus Session::EndAtLastActivity(ScopeToken token) noexcept {
  return token.ok() ? impl_->recorder().EndAtLastActivity(token) : token.status;
}

void Session::SetStepCounts(int64_t samples, int64_t tokens) noexcept {
  if (recording()) impl_->recorder().SetStepCounts(samples, tokens);
}

void Session::SetStream(uint64_t stream) noexcept {
  if (recording()) impl_->recorder().SetStream(stream);
}

void Session::RecordMemory(const AllocatorStats& stats, std::string_view source) {
  impl_->RecordMemory(stats, source);
}

void Session::RecordOom(OomEvent oom, std::string_view source) {
  impl_->RecordOom(std::move(oom), source);
}

std::optional<Stall> Session::CurrentStall() const {
  return recording() ? impl_->CurrentStall() : std::nullopt;
}

int Session::RecordingThreadId() const noexcept { return impl_->recorder().owner_tid(); }

int Session::OpenScopes() const noexcept {
  return recording() ? impl_->recorder().open_scopes() : 0;
}

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
