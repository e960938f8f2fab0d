#include "gpuscope/session.h"

#include <pthread.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "backends/host/clock.h"
#include "core/activity_timeline.h"
#include "session/session_impl.h"
#include "gpuscope/version.h"
#include "base/env.h"
#include "base/log.h"

namespace gpuscope {
namespace {

bool DisabledByEnvironment() { return internal::EnvFlag("GPUSCOPE_DISABLE", false); }

absl::Status RangeError(const char* field, int64_t value, int64_t lo, int64_t hi) {
  return absl::InvalidArgumentError(absl::StrCat("Options::", field, " = ", value,
                                                 " is out of range: use a value from ", lo,
                                                 " to ", hi));
}

// The options a session runs with when `options` could not be used: enough
// to answer Summarize() and status(), nothing more.
Options FallbackOptions(const Options& options) {
  Options fallback;
  fallback.enabled = false;
  fallback.clock = options.clock;
  return fallback;
}

}  // namespace

absl::Status Options::Validate() const {
  if (window < 1 || window > kMaxWindow) return RangeError("window", window, 1, kMaxWindow);
  if (max_phases <= kNumBuiltinPhases || max_phases > kMaxPhases) {
    return RangeError("max_phases", max_phases, kNumBuiltinPhases + 1, kMaxPhases);
  }
  if (queue_capacity < 64 || queue_capacity > kMaxQueueCapacity) {
    return RangeError("queue_capacity", queue_capacity, 64, kMaxQueueCapacity);
  }
  if (flush_interval_ms < 1 || flush_interval_ms > 10000) {
    return RangeError("flush_interval_ms", flush_interval_ms, 1, 10000);
  }
  if (telemetry_interval_ms < 0 || telemetry_interval_ms > 60000) {
    return RangeError("telemetry_interval_ms", telemetry_interval_ms, 0, 60000);
  }
  if (trace_steps < 0 || trace_steps > 4096) return RangeError("trace_steps", trace_steps, 0, 4096);
  return absl::OkStatus();
}

std::string_view ScopeStatusMessage(ScopeStatus status) {
  switch (status) {
    case ScopeStatus::kOk:
      return "recorded";
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
      phases_(options.max_phases,
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
  SourceChoice choice = SelectSource(backends_);
  source_ = choice.source;
  source_reason_ = std::move(choice.reason);
  if (source_ == Source::kCupti) {
    activity_ = backends_.activity.get();
    aggregator_.SetActivitySource(activity_, kDefaultLaunchThresholdNs);
    fallback_timer_ = backends_.device_timer.get();  // kept, not started
  } else {
    timer_ = backends_.device_timer.get();  // null unless the events source won
  }
  hot_timer_.store(timer_, std::memory_order_relaxed);
  events_on_.store(timer_ != nullptr, std::memory_order_release);
  aggregator_.SetDeviceTimer(timer_);
  if (backends_.telemetry != nullptr && options_.telemetry_interval_ms > 0) {
    if (absl::Status started = backends_.telemetry->Start(); started.ok()) {
      telemetry_ = backends_.telemetry.get();
      aggregator_.SetTelemetrySource(telemetry_->description());
    } else {
      LogOnce("telemetry-off", LogLevel::kInfo, absl::StrCat("no telemetry: ", started.message()));
    }
  }
  if (source_ == Source::kHost) {
    LogOnce("source-host", LogLevel::kInfo, absl::StrCat("data source: host. ", source_reason_));
  }
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

// ---------------------------------------------------------------------------
// Hot path. Recording thread only; no allocation, no lock, no system call
// beyond the clock.

ScopeStatus SessionImpl::ForkedAway() noexcept {
  recording_flag_->store(false, std::memory_order_relaxed);  // scopes now cost one branch
  return ScopeStatus::kDisabled;
}

ScopeStatus SessionImpl::ClaimOrReject(uint64_t self) noexcept {
  uint64_t owner = 0;
  if (owner_thread_.compare_exchange_strong(owner, self, std::memory_order_relaxed)) {
    return ScopeStatus::kOk;  // the first caller becomes the recording thread
  }
  if (owner == self) return ScopeStatus::kOk;
  wrong_thread_.fetch_add(1, std::memory_order_relaxed);
  return ScopeStatus::kWrongThread;
}

ScopeToken SessionImpl::BeginStep(const StepOptions& step) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  if (step_frame_ >= 0) {
    nested_step_.Increment();
    return {0, 0, ScopeStatus::kNestedStep};
  }
  if (depth_ >= kMaxOpenScopes) {
    too_deep_.Increment();
    return {0, 0, ScopeStatus::kTooDeep};
  }
  ++step_seq_;
  step_samples_ = step.samples;
  step_tokens_ = step.tokens;
  step_incomplete_ = false;
  step_frame_ = depth_;
  Frame& f = stack_[static_cast<size_t>(depth_)];
  f.serial = NextSerial();
  f.name_id = 0;
  f.is_step = true;
  annotator_->PushStep(step_seq_ - 1);
  // The marker first, then the clock: a boundary's host time is never
  // before its marker was enqueued, so an idle GPU completes the marker no
  // later than that time (plus its latency) even if this thread is preempted
  // in between.
  f.stream = stream_;
  f.named_stream = false;
  f.begin_event = RecordMarker(f.stream);
  f.begin_ns = Now();
  return {f.serial, static_cast<uint8_t>(depth_++), ScopeStatus::kOk, session_tag_};
}

ScopeToken SessionImpl::OpenPhase(uint16_t id, uint64_t stream, bool named_stream) noexcept {
  if (depth_ >= kMaxOpenScopes) {
    too_deep_.Increment();
    return {0, 0, ScopeStatus::kTooDeep};
  }
  Frame& f = stack_[static_cast<size_t>(depth_)];
  f.serial = NextSerial();
  f.name_id = id;
  f.is_step = false;
  annotator_->PushPhase(id);
  // Phases outside steps, or in a step without markers, are timed on the
  // host only: no marker.
  f.stream = stream;
  f.named_stream = named_stream;
  f.begin_event = step_frame_ >= 0 && stack_[static_cast<size_t>(step_frame_)].begin_event != kNoEvent
                      ? RecordMarker(stream)
                      : kNoEvent;
  f.begin_ns = Now();
  return {f.serial, static_cast<uint8_t>(depth_++), ScopeStatus::kOk, session_tag_};
}

std::optional<uint16_t> SessionImpl::Validate(PhaseId phase) noexcept {
  if (phase.value() >= phases_.size() ||
      (!phase.builtin() && phase.session_tag() != session_tag_)) {  // another session's id
    invalid_phase_.Increment();
    return std::nullopt;
  }
  return phase.value();
}

std::optional<uint16_t> SessionImpl::LookUp(std::string_view name) noexcept {
  std::optional<PhaseId> id = phases_.Find(name);
  if (!id.has_value() && !phases_.full() && PhaseNameProblem(name) == nullptr) {
    // First use of a custom name: registration locks and allocates, once.
    absl::StatusOr<PhaseId> registered = phases_.Register(name);
    if (registered.ok()) id = *registered;
  }
  if (!id.has_value()) {
    invalid_phase_.Increment();
    return std::nullopt;
  }
  return id->value();
}

ScopeToken SessionImpl::BeginPhase(PhaseId phase) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  const std::optional<uint16_t> id = Validate(phase);
  return id.has_value() ? OpenPhase(*id, stream_, false) : ScopeToken{0, 0, ScopeStatus::kInvalidPhase};
}

ScopeToken SessionImpl::BeginPhase(std::string_view name) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  const std::optional<uint16_t> id = LookUp(name);
  return id.has_value() ? OpenPhase(*id, stream_, false) : ScopeToken{0, 0, ScopeStatus::kInvalidPhase};
}

ScopeToken SessionImpl::BeginPhase(PhaseId phase, uint64_t stream) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  const std::optional<uint16_t> id = Validate(phase);
  return id.has_value() ? OpenPhase(*id, stream, true) : ScopeToken{0, 0, ScopeStatus::kInvalidPhase};
}

ScopeToken SessionImpl::BeginPhase(std::string_view name, uint64_t stream) noexcept {
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return {0, 0, s};
  const std::optional<uint16_t> id = LookUp(name);
  return id.has_value() ? OpenPhase(*id, stream, true) : ScopeToken{0, 0, ScopeStatus::kInvalidPhase};
}

ScopeStatus SessionImpl::Close(ScopeToken token, bool record, bool at_last_activity) noexcept {
  if (!token.ok()) return token.status;
  if (const ScopeStatus s = CheckCaller(); s != ScopeStatus::kOk) return s;
  if (token.session_tag != session_tag_) {
    stale_end_.Increment();
    return ScopeStatus::kWrongSession;
  }
  const int d = token.depth;
  if (d >= depth_ || stack_[static_cast<size_t>(d)].serial != token.serial) {
    stale_end_.Increment();  // ended twice, or closed with an enclosing scope
    return ScopeStatus::kAlreadyEnded;
  }
  const bool out_of_order = d + 1 != depth_;
  if (out_of_order) out_of_order_end_.Increment();
  // End markers first (innermost first, as the scopes close), then one clock
  // read for all of them: see BeginStep() for why the clock comes last.
  uint32_t end_markers[kMaxOpenScopes];
  for (int i = depth_ - 1; i >= d; --i) {
    const Frame& f = stack_[static_cast<size_t>(i)];
    // A scope ended after the fact gets no end marker: one recorded now
    // would take in whatever the GPU ran since. Its step keeps host numbers
    // only (a marker missing: see Aggregator::MakePending).
    end_markers[i] = f.begin_event != kNoEvent && !at_last_activity ? RecordMarker(f.stream) : kNoEvent;
  }
  int64_t now = Now();
  if (at_last_activity) {
    // Never before a scope being closed began: begins grow with depth, so
    // the innermost open frame's is the latest.
    now = std::max(last_end_, stack_[static_cast<size_t>(depth_ - 1)].begin_ns);
  } else {
    last_end_ = now;
  }
  while (depth_ > d) {
    --depth_;
    const Frame& f = stack_[static_cast<size_t>(depth_)];
    uint16_t flags = depth_ == d ? 0 : kRecordAutoClosed;
    // A cancelled scope still sends its record, flagged: the aggregator then
    // drops it (and a step's phases) and returns its markers to the pool.
    if (!record) flags = static_cast<uint16_t>(flags | kRecordCancelled);
    annotator_->Pop();
    Emit(f, depth_, now, flags, end_markers[depth_]);
  }
  return out_of_order ? ScopeStatus::kEndedOutOfOrder : ScopeStatus::kOk;
}

void SessionImpl::SetStepCounts(int64_t samples, int64_t tokens) noexcept {
  if (CheckCaller() != ScopeStatus::kOk || step_frame_ < 0) return;
  step_samples_ = samples;
  step_tokens_ = tokens;
}

void SessionImpl::SetStream(uint64_t stream) noexcept {
  if (CheckCaller() == ScopeStatus::kOk) stream_ = stream;
}

void SessionImpl::Emit(const Frame& frame, int index, int64_t end_ns, uint16_t flags,
                       uint32_t end_marker) noexcept {
  Record r;
  r.begin_ns = frame.begin_ns;
  r.end_ns = end_ns;
  r.begin_event = frame.begin_event;
  r.end_event = end_marker;
  r.flags = frame.named_stream ? static_cast<uint16_t>(flags | kRecordNamedStream) : flags;
  if (frame.is_step) {
    r.kind = RecordKind::kStep;
    r.name_id = 0;
    r.depth = 0;
    r.step_seq = step_seq_;
    r.samples = step_samples_;
    r.tokens = step_tokens_;
    if (step_incomplete_) r.flags = static_cast<uint16_t>(r.flags | kRecordIncomplete);
    step_frame_ = -1;
  } else {
    r.kind = RecordKind::kPhase;
    r.name_id = frame.name_id;
    r.samples = -1;
    r.tokens = -1;
    if (step_frame_ >= 0 && index > step_frame_) {
      r.step_seq = step_seq_;
      r.depth = static_cast<uint8_t>(index - step_frame_ - 1);
    } else {
      r.step_seq = 0;  // a phase outside any step
      r.depth = static_cast<uint8_t>(index);
    }
  }
  if (!queue_.TryPush(r)) {
    dropped_records_.Increment();
    if (step_frame_ >= 0) step_incomplete_ = true;
    // The markers must still go back to the pool: hand them over apart.
    if (r.begin_event != kNoEvent) orphaned_markers_.TryPush(r.begin_event);
    if (r.end_event != kNoEvent) orphaned_markers_.TryPush(r.end_event);
  }
}

// ---------------------------------------------------------------------------
// Aggregation side.

double SessionImpl::Pump() {
  // One pump at a time (the worker; tests drive passes by hand too).
  std::lock_guard<std::mutex> pumping(pump_mu_);
  // Telemetry is sampled by the pump only, for the whole process at once
  // (backends/telemetry/process_telemetry.h), and outside the aggregator lock (an NVML
  // query can take milliseconds: Summarize() must not wait for one).
  if (telemetry_ != nullptr) {
    const int64_t now = clock_ != nullptr ? clock_->NowNs() : ReadMonotonicNs();
    telemetry_->Collect(now, int64_t{options_.telemetry_interval_ms} * 1'000'000, &samples_);
  }
  std::unique_lock<std::mutex> lock(agg_mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    // A reader is summarizing (or tracing) under the aggregator lock, which
    // may take a while for a large window: keep the queue from filling. The
    // samples wait for the next pass.
    return static_cast<double>(StageQueue()) / static_cast<double>(queue_.capacity());
  }
  // Steps ending now see the latest sample: samples go in before the queue
  // is drained.
  if (!samples_.empty()) {
    for (const TelemetrySample& sample : samples_) aggregator_.AddTelemetry(sample);
    samples_.clear();
    aggregator_.SetTelemetrySource(telemetry_->description());
  }
  const size_t staged = staged_size_.load(std::memory_order_relaxed);
  PumpLocked();
  return static_cast<double>(last_drained_ + staged) / static_cast<double>(queue_.capacity());
}

void SessionImpl::PumpLocked() {
  if (timer_ != nullptr && events_on_.load(std::memory_order_relaxed)) {
    if (absl::Status healthy = timer_->Maintain(); !healthy.ok()) LowerToHost(healthy);
  }
  DrainQueueLocked();
  if (timer_ != nullptr) {
    orphaned_markers_.Drain([this](uint32_t slot) { timer_->Release(slot); });
    if (aggregator_.ResolvePending() == Aggregator::Resolution::kMarkerLost) {
      LowerToHost(absl::DataLossError(absl::StrCat(timer_->name(), " lost a marker")));
    }
  } else if (activity_ != nullptr) {
    aggregator_.ResolvePending(/*final=*/closed_.load(std::memory_order_relaxed));
  }
  ReportNewMisuse();
  SampleCountersLocked();
}

void SessionImpl::SampleCountersLocked() {
  // At most every 100 ms, and only when steps completed meanwhile: the
  // counter tracks follow the window as it moves.
  constexpr int64_t kCounterIntervalNs = 100'000'000;
  if (!annotator_->WantsCounters() || aggregator_.completed() == counters_at_step_) return;
  const int64_t now = clock_ != nullptr ? clock_->NowNs() : ReadMonotonicNs();
  if (now - counters_at_ns_ < kCounterIntervalNs) return;
  double p95 = 0;
  std::optional<double> idle;
  if (!aggregator_.RollingCounters(&p95, &idle)) return;
  annotator_->SampleCounters(p95 * 1e3, idle);
  counters_at_ns_ = now;
  counters_at_step_ = aggregator_.completed();
}

void SessionImpl::Consume(const Record& r) {
  if (tsc_ == nullptr) {
    aggregator_.Consume(r);
    return;
  }
  Record converted = r;  // TSC ticks -> CLOCK_MONOTONIC ns
  converted.begin_ns = tsc_->ToNs(r.begin_ns);
  converted.end_ns = tsc_->ToNs(r.end_ns);
  aggregator_.Consume(converted);
}

size_t SessionImpl::DrainQueueLocked() {
  // Staged records are older than the queue's: they go first. The worker
  // may stage more while a batch is consumed; the loop takes those too
  // before it turns to the queue.
  for (;;) {
    std::vector<Record> batch;
    {
      std::lock_guard<std::mutex> staging(drain_mu_);
      if (staged_.empty()) {
        last_drained_ = queue_.Drain([this](const Record& r) { Consume(r); });
        return last_drained_;
      }
      batch.swap(staged_);
      staged_size_.store(0, std::memory_order_relaxed);
    }
    for (const Record& r : batch) Consume(r);
  }
}

size_t SessionImpl::StageQueue() {
  std::lock_guard<std::mutex> staging(drain_mu_);
  // Past the bound (overshooting it by at most one queue), the queue fills
  // and the recording thread counts what it drops.
  if (staged_.size() >= max_staged_records_) return 0;
  const size_t moved = queue_.Drain([this](const Record& r) { staged_.push_back(r); });
  staged_size_.store(staged_.size(), std::memory_order_relaxed);
  return moved;
}

void SessionImpl::LowerToHost(const absl::Status& why) {
  if (source_ == Source::kHost) return;
  events_on_.store(false);
  // From now on every marker goes straight back to the pool, those of steps
  // already waiting and those of records still in the queue alike.
  aggregator_.StopResolving();
  source_ = Source::kHost;
  source_reason_ = absl::StrCat("lowered to host: ", timer_->name(), " failed (", why.message(),
                                "); the training loop goes on, timed on the host only");
  LogOnce(absl::StrCat("lowered-", timer_->name()), LogLevel::kWarning, source_reason_);
}

void SessionImpl::ReportNewMisuse() {
  struct Check {
    int64_t now;
    int64_t* seen;
    const char* key;
    const char* message;
  };
  const Check checks[] = {
      {out_of_order_end_.Get(), &reported_.out_of_order_end, "misuse-out-of-order",
       "a scope was ended while scopes opened inside it were still open; they were closed with "
       "it. Check that scopes end in reverse order of beginning."},
      {stale_end_.Get(), &reported_.stale_end, "misuse-stale-end",
       "a scope was ended twice, or after an enclosing scope had closed it; the extra end was "
       "ignored."},
      {nested_step_.Get(), &reported_.nested_step, "misuse-nested-step",
       "a step was begun inside an open step and ignored: steps do not nest."},
      {wrong_thread_.load(std::memory_order_relaxed), &reported_.wrong_thread,
       "misuse-wrong-thread",
       "scopes were used from a second thread and ignored: a Session records one thread; give "
       "other threads their own Session."},
      {too_deep_.Get(), &reported_.too_deep, "misuse-too-deep",
       "more than 32 scopes were open at once; the deeper ones were not recorded."},
      {invalid_phase_.Get(), &reported_.invalid_phase, "misuse-invalid-phase",
       "a phase with an invalid name (empty, over 64 bytes, control or invisible characters, "
       "'other'), a name "
       "beyond Options::max_phases, or another session's PhaseId was ignored."},
      {dropped_records_.Get(), &reported_.dropped_records, "misuse-dropped",
       "records were dropped because the queue was full: raise Options::queue_capacity or "
       "lower Options::flush_interval_ms."},
  };
  for (const Check& c : checks) {
    if (c.now > *c.seen) {
      *c.seen = c.now;
      LogOnce(c.key, LogLevel::kWarning, c.message);
    }
  }
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
  std::lock_guard<std::mutex> lock(agg_mu_);
  PumpLocked();
  return SummarizeWindow(aggregator_.Snapshot(phases_), FactsLocked());
}

SessionFacts SessionImpl::FactsLocked() const {
  SessionFacts facts;
  facts.window = options_.window;
  facts.source = source_;
  facts.source_reason = source_reason_;
  facts.simulated = backends_.simulated;
  if (timer_ != nullptr && source_ != Source::kHost) {
    facts.gpu_clock_error = static_cast<double>(timer_->accuracy_ns()) * 1e-9;
  }
  facts.awaiting_activity = activity_ != nullptr && activity_->records() == 0;
  facts.misuse.out_of_order_end = out_of_order_end_.Get();
  facts.misuse.stale_end = stale_end_.Get();
  facts.misuse.nested_step = nested_step_.Get();
  facts.misuse.wrong_thread = wrong_thread_.load(std::memory_order_relaxed);
  facts.misuse.too_deep = too_deep_.Get();
  facts.misuse.invalid_phase = invalid_phase_.Get();
  facts.misuse.dropped_records = dropped_records_.Get();
  return facts;
}

std::vector<StepPoint> SessionImpl::StepSeries() {
  std::vector<StepPoint> series;
  if (InForkedChild()) return series;
  std::lock_guard<std::mutex> lock(agg_mu_);
  PumpLocked();
  aggregator_.FillSeries(phases_, &series);
  return series;
}

void SessionImpl::TraceSnapshot(std::vector<TraceStep>* steps, int64_t* launch_threshold_ns) {
  if (InForkedChild()) return;
  // Copied under the lock, formatted outside it (export/chrome_trace.cc): a
  // large trace must not keep the worker from draining the queue.
  std::lock_guard<std::mutex> lock(agg_mu_);
  PumpLocked();
  aggregator_.TraceSnapshot(steps, launch_threshold_ns);
}

std::string_view SessionImpl::PhaseName(uint16_t id) const {
  return id < phases_.size() ? phases_.Name(id) : std::string_view("?");
}

void SessionImpl::Flush() {
  if (InForkedChild()) return;
  std::lock_guard<std::mutex> lock(agg_mu_);
  PumpLocked();
}

void SessionImpl::StopActivityLocked() {
  if (activity_ == nullptr) return;
  aggregator_.ResolvePending(/*final=*/true);  // what the records already cover keeps its numbers
  activity_->Stop();
  aggregator_.DropPending();
}

void SessionImpl::ReleaseCupti() {
  if (InForkedChild()) return;
  std::lock_guard<std::mutex> lock(agg_mu_);
  if (activity_ == nullptr) return;
  DrainQueueLocked();
  StopActivityLocked();
  aggregator_.SetActivitySource(nullptr, kDefaultLaunchThresholdNs);
  activity_ = nullptr;
  std::string why = "CUPTI released (ReleaseCupti / release_cupti())";
  if (fallback_timer_ != nullptr && !closed_.load()) {
    if (absl::Status started = fallback_timer_->Start(); started.ok()) {
      timer_ = fallback_timer_;
      aggregator_.SetDeviceTimer(timer_);
      hot_timer_.store(timer_, std::memory_order_relaxed);
      events_on_.store(true, std::memory_order_release);
      source_ = Source::kEvents;
      source_reason_ = absl::StrCat(why, "; using ", timer_->name(),
                                    " (GPU idle % is a lower bound, assuming the data phase "
                                    "enqueues no GPU work)");
      LogOnce("cupti-released", LogLevel::kInfo, source_reason_);
      return;
    } else {
      absl::StrAppend(&why, "; ", fallback_timer_->name(), " unavailable: ", started.message());
    }
  }
  source_ = Source::kHost;
  source_reason_ = absl::StrCat(why, "; host timing only");
  LogOnce("cupti-released", LogLevel::kInfo, source_reason_);
}

void SessionImpl::Close() {
  if (closed_.exchange(true)) return;
  recording_flag_->store(false, std::memory_order_relaxed);
  events_on_.store(false);  // scopes still open end without a marker
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
  if (options.enabled) chosen = backends ? std::move(*backends) : internal::DefaultBackends(options);
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

Summary Session::Summarize() const { return impl_->Summarize(); }
std::vector<StepPoint> Session::StepSeries() const { return impl_->StepSeries(); }
void Session::Flush() { impl_->Flush(); }
void Session::Close() { impl_->Close(); }
void Session::ReleaseCupti() { impl_->ReleaseCupti(); }

}  // namespace gpuscope
