// The pump (session/pump.h): draining, aggregating and reading under the
// aggregator lock. The source ladder's moves are in session/sources.cc.

#include "session/pump.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_driver_timer.h"
#include "backends/host/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "core/summarize.h"
#include "session/worker.h"

namespace gpuscope::internal {

Pump::Pump(const Options& options, Backends& backends, Recorder& recorder, const PhaseTable& phases)
    : options_(options),
      backends_(backends),
      recorder_(recorder),
      phases_(phases),
      clock_(options.clock.get()),
      annotator_(backends.annotator.get()),
      aggregator_(options.enabled ? options.window : 1, options.max_phases),
      max_staged_records_(std::max<size_t>(4 * recorder.queue().capacity(), size_t{1} << 18)) {}

Pump::~Pump() = default;

double Pump::Pass() {
  // One pump at a time (the worker; tests drive passes by hand too).
  std::unique_lock<std::mutex> pumping(pump_mu_);
  // Telemetry is sampled by the pump only, for the whole process at once
  // (backends/telemetry/process_telemetry.h), and outside the aggregator lock (an NVML
  // query can take milliseconds: Summarize() must not wait for one).
  if (telemetry_ != nullptr) {
    telemetry_->Collect(Now(), int64_t{options_.telemetry_interval_ms} * 1'000'000, &samples_);
  }
  std::unique_lock<std::mutex> lock(agg_mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    // A reader is summarizing (or tracing) under the aggregator lock, which
    // may take a while for a large window: keep the queue from filling. The
    // samples wait for the next pass.
    return static_cast<double>(StageQueue()) / static_cast<double>(recorder_.queue().capacity());
  }
  // Steps ending now see the latest sample: samples go in before the queue
  // is drained.
  if (!samples_.empty()) {
    for (const TelemetrySample& sample : samples_) aggregator_.AddTelemetry(sample);
    const TelemetrySample& last = samples_.back();
    double sum = 0;
    int n = 0;
    for (int i = 0; i < std::min(last.gpu_count, kMaxTelemetryGpus); ++i) {
      const double u = last.gpus[static_cast<size_t>(i)].utilization_pct;
      if (u == u) {
        sum += u;
        ++n;
      }
    }
    last_gpu_utilization_ = n > 0 ? sum / n : kNotSampled;
    samples_.clear();
    aggregator_.SetTelemetrySource(telemetry_->description());
  }
  const std::optional<Stall> began = WatchStallsLocked();
  const size_t staged = staged_size_.load(std::memory_order_relaxed);
  PumpLocked();
  const double fill = static_cast<double>(last_drained_ + staged) /
                      static_cast<double>(recorder_.queue().capacity());
  if (began.has_value()) {
    lock.unlock();
    ReportStall(*began);
  }
  return fill;
}

void Pump::PumpLocked(bool final) {
  if (timer_ != nullptr && recorder_.markers_on()) {
    if (absl::Status healthy = timer_->Maintain(); !healthy.ok()) LowerToHost(healthy);
  }
  const int64_t consumed_before = records_consumed_;
  DrainMemoryLocked();  // before the records: steps ending now take their samples
  DrainQueueLocked();
  if (records_consumed_ != consumed_before) {
    // The worker's cost as of the latest records: a summary changes only
    // when something was recorded.
    const Worker& worker = Worker::Get();
    worker_cpu_s_ = worker.cpu_seconds();
    const double alive = worker.alive_seconds();
    worker_cpu_share_ = alive > 0 ? std::min(1.0, worker_cpu_s_ / alive) : 0.0;
  }
  if (timer_ != nullptr) {
    recorder_.orphaned_markers().Drain([this](uint32_t slot) { timer_->Release(slot); });
    if (aggregator_.ResolvePending() == Aggregator::Resolution::kMarkerLost) {
      LowerToHost(absl::DataLossError(absl::StrCat(timer_->name(), " lost a marker")));
    }
  } else if (activity_ != nullptr) {
    aggregator_.ResolvePending(/*final=*/final || closed_);
  }
  ReportNewMisuse();
  SampleCountersLocked();
}

void Pump::SampleCountersLocked() {
  // At most every 100 ms, and only when steps completed meanwhile: the
  // counter tracks follow the window as it moves.
  constexpr int64_t kCounterIntervalNs = 100'000'000;
  if (!annotator_->WantsCounters() || aggregator_.completed() == counters_at_step_) return;
  const int64_t now = Now();
  if (now - counters_at_ns_ < kCounterIntervalNs) return;
  double p95 = 0;
  std::optional<double> idle;
  if (!aggregator_.RollingCounters(&p95, &idle)) return;
  annotator_->SampleCounters(p95 * 1e3, idle);
  counters_at_ns_ = now;
  counters_at_step_ = aggregator_.completed();
}

void Pump::Consume(const Record& r) {
  ++records_consumed_;
  if (r.kind == RecordKind::kPhase && r.step_seq == 0 && (r.flags & kRecordCancelled) == 0) {
    // A phase outside steps: its longest run, for its stall limit.
    if (outside_longest_ns_.size() <= r.name_id) outside_longest_ns_.resize(r.name_id + 1u, 0);
    const int64_t ns = recorder_.tsc() != nullptr
                           ? recorder_.tsc()->ToNs(r.end_ns) - recorder_.tsc()->ToNs(r.begin_ns)
                           : r.end_ns - r.begin_ns;
    outside_longest_ns_[r.name_id] = std::max(outside_longest_ns_[r.name_id], ns);
  }
  if (stalls_wanted_ && r.begin_ns == stall_begin_raw_ &&
      (r.kind == RecordKind::kStep || r.step_seq == 0)) {
    // The scope that stalled ended: its exact duration.
    const TscClock* const t = recorder_.tsc();
    std::lock_guard<std::mutex> stall_lock(stall_mu_);
    stalls_.Ended(r.kind == RecordKind::kStep, r.kind == RecordKind::kStep ? r.step_seq : 0,
                  r.name_id, r.begin_ns, t != nullptr ? t->ToNs(r.begin_ns) : r.begin_ns,
                  t != nullptr ? t->ToNs(r.end_ns) : r.end_ns);
    stalls_wanted_ = stalls_.wants_record();
  }
  if (r.kind == RecordKind::kStep) {
    ++steps_consumed_;
    // The samples taken before the step ended, and an OOM that ended it,
    // came before its record did: take them now, so that the step is
    // assembled with them (two uncontended locks a step, on the worker).
    DrainMemoryLocked();
  }
  const TscClock* const tsc = recorder_.tsc();
  const uint64_t completed_before = aggregator_.completed_steps();
  if (tsc == nullptr) {
    aggregator_.Consume(r);
    NumberOomStep(r, completed_before);
    return;
  }
  Record converted = r;  // TSC ticks -> CLOCK_MONOTONIC ns
  converted.begin_ns = tsc->ToNs(r.begin_ns);
  converted.end_ns = tsc->ToNs(r.end_ns);
  aggregator_.Consume(converted);
  NumberOomStep(r, completed_before);
}

void Pump::NumberOomStep(const Record& r, uint64_t completed_before) {
  // The step the kept OOM ended has been assembled: its number is the one the
  // window gave it, or, cancelled or left out, the one it would have had.
  if (oom_step_seq_ == 0 || r.kind != RecordKind::kStep || r.step_seq != oom_step_seq_) return;
  oom_step_seq_ = 0;
  const uint64_t completed = aggregator_.completed_steps();
  aggregator_.SetOomStep(
      static_cast<int64_t>(completed > completed_before ? completed - 1 : completed_before));
}

size_t Pump::DrainQueueLocked() {
  // Staged records are older than the queue's: they go first. The worker
  // may stage more while a batch is consumed; the loop takes those too
  // before it turns to the queue.
  for (;;) {
    std::vector<Record> batch;
    {
      std::lock_guard<std::mutex> staging(drain_mu_);
      if (staged_.empty()) {
        last_drained_ = recorder_.queue().Drain([this](const Record& r) { Consume(r); });
        return last_drained_;
      }
      batch.swap(staged_);
      staged_size_.store(0, std::memory_order_relaxed);
    }
    for (const Record& r : batch) Consume(r);
  }
}

size_t Pump::StageQueue() {
  std::lock_guard<std::mutex> staging(drain_mu_);
  // Past the bound (overshooting it by at most one queue), the queue fills
  // and the recording thread counts what it drops.
  if (staged_.size() >= max_staged_records_) return 0;
  const size_t moved = recorder_.queue().Drain([this](const Record& r) { staged_.push_back(r); });
  staged_size_.store(staged_.size(), std::memory_order_relaxed);
  return moved;
}

void Pump::ReportNewMisuse() {
  const MisuseCounts counted = recorder_.misuse();
  struct Check {
    int64_t now;
    int64_t* seen;
    const char* key;
    const char* message;
  };
  const Check checks[] = {
      {counted.out_of_order_end, &reported_.out_of_order_end, "misuse-out-of-order",
       "a scope was ended while scopes opened inside it were still open; they were closed with "
       "it. Check that scopes end in reverse order of beginning."},
      {counted.stale_end, &reported_.stale_end, "misuse-stale-end",
       "a scope was ended twice, or after an enclosing scope had closed it; the extra end was "
       "ignored."},
      {counted.nested_step, &reported_.nested_step, "misuse-nested-step",
       "a step was begun inside an open step and ignored: steps do not nest."},
      {counted.wrong_thread, &reported_.wrong_thread, "misuse-wrong-thread",
       "scopes were used from a second thread and ignored: a Session records one thread; give "
       "other threads their own Session."},
      {counted.too_deep, &reported_.too_deep, "misuse-too-deep",
       "more than 32 scopes were open at once; the deeper ones were not recorded."},
      {counted.invalid_phase, &reported_.invalid_phase, "misuse-invalid-phase",
       "a phase with an invalid name (empty, over 64 bytes, control or invisible characters, "
       "'other'), a name "
       "beyond Options::max_phases, or another session's PhaseId was ignored."},
      {counted.dropped_records, &reported_.dropped_records, "misuse-dropped",
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

std::optional<Stall> Pump::WatchStallsLocked() {
  if (std::isinf(options_.stall_after_s) || !options_.enabled) return std::nullopt;
  Recorder::OpenScopes& open = open_scopes_;
  if (!recorder_.ReadOpenScopes(&open)) return std::nullopt;  // try again next pass
  const TscClock* const tsc = recorder_.tsc();
  const auto ns = [tsc](int64_t t) { return tsc != nullptr ? tsc->ToNs(t) : t; };
  const int64_t now = Now();
  // What is watched: the open step, or else the outermost phase that began
  // after the last step did (a phase around the loop's steps is not one).
  int step_frame = -1;
  for (int i = 0; i < open.depth; ++i) {
    if (open.frames[static_cast<size_t>(i)].is_step) step_frame = i;
  }
  std::optional<OpenScope> watched;
  int first = -1;
  if (step_frame >= 0) {
    first = step_frame;
  } else {
    const int64_t last_step_begin = open.step_seq > 0 ? open.last_step_begin : INT64_MIN;
    for (int i = 0; i < open.depth; ++i) {
      if (open.frames[static_cast<size_t>(i)].begin > last_step_begin) {
        first = i;
        break;
      }
    }
  }
  const int phases_known = phases_.size();
  if (first >= 0) {
    OpenScope& w = watched_;
    const Recorder::OpenFrame& f = open.frames[static_cast<size_t>(first)];
    w.is_step = f.is_step;
    w.step_seq = f.is_step ? open.step_seq : 0;
    w.phase_id = f.is_step ? 0 : f.name_id;
    w.begin_ns = ns(f.begin);
    w.begin_raw = f.begin;
    w.path.clear();
    w.innermost_begin_ns = w.begin_ns;
    for (int i = f.is_step ? first + 1 : first; i < open.depth; ++i) {
      const Recorder::OpenFrame& p = open.frames[static_cast<size_t>(i)];
      if (p.is_step || p.name_id >= phases_known) continue;
      w.path.push_back(p.name_id);
      w.innermost_begin_ns = ns(p.begin);
    }
    watched = w;
  }
  const double limit = watched.has_value() ? StallLimitLocked(*watched, now) : 0;
  std::lock_guard<std::mutex> stall_lock(stall_mu_);
  std::optional<Stall> began = stalls_.Look(watched, now, limit, ReadUnixSeconds(), phases_,
                                            [&] { return StallGpuStateLocked(open, now); });
  stalls_wanted_ = stalls_.wants_record();
  stall_begin_raw_ = stalls_.wanted_begin_raw();  // its record carries it
  return began;
}

double Pump::StallLimitLocked(const OpenScope& open, int64_t now_ns) {
  if (!open.is_step) {
    const int64_t longest =
        open.phase_id < outside_longest_ns_.size() ? outside_longest_ns_[open.phase_id] : 0;
    return OutsideStallLimit(1e-9 * static_cast<double>(longest), options_.stall_after_s);
  }
  const uint64_t completed = aggregator_.completed();
  if (completed != stall_history_steps_ && now_ns - stall_history_at_ns_ >= 1'000'000'000) {
    // At most once a second, and only as steps complete: the window's
    // quantiles cost a pass over it.
    stall_history_ = aggregator_.StallHistoryOf();
    stall_history_steps_ = completed;
    stall_history_at_ns_ = now_ns;
  }
  return StepStallLimit(stall_history_, options_.stall_after_s);
}

StallGpuState Pump::StallGpuStateLocked(const Recorder::OpenScopes& open, int64_t now_ns) {
  StallGpuState g;
  g.utilization_pct = last_gpu_utilization_;
  const Source source = source_.load(std::memory_order_relaxed);
  if (source == Source::kCupti) {
    const int64_t last = aggregator_.latest_activity_end_ns();
    if (last != INT64_MIN) {
      g.idle_seconds = std::max(0.0, 1e-9 * static_cast<double>(now_ns - last));
      g.words =
          absl::StrCat("the last GPU activity CUPTI reported ended ", StallDuration(g.idle_seconds),
                       " ago (a kernel still running, such as one waiting in a collective, "
                       "is reported when it ends)");
    } else {
      g.words = "CUPTI has reported no GPU activity yet";
    }
  } else if (source == Source::kEvents && timer_ != nullptr) {
    // The innermost open scope with a marker: has the GPU reached it?
    for (int i = open.depth - 1; i >= 0; --i) {
      const Recorder::OpenFrame& f = open.frames[static_cast<size_t>(i)];
      if (f.marker == kNoEvent) continue;
      const std::string where =
          f.is_step ? std::string("the step")
                    : absl::StrCat("`",
                                   f.name_id < phases_.size() ? ToAbsl(phases_.Name(f.name_id))
                                                              : absl::string_view("?"),
                                   "`");
      int64_t done_ns = 0;
      const MarkerState state = timer_->Query(f.marker, &done_ns);
      if (state == MarkerState::kComplete) {
        g.idle_seconds = std::max(0.0, 1e-9 * static_cast<double>(now_ns - done_ns));
        g.words = absl::StrCat("the GPU finished the work queued before ", where, " began ",
                               StallDuration(g.idle_seconds),
                               " ago; what was queued since is timed when its scope ends");
      } else if (state == MarkerState::kPending) {
        g.words = absl::StrCat("the GPU is still running work queued before ", where,
                               " began (busy, or hung in a kernel)");
      }
      break;
    }
  }
  if (g.words.empty()) g.words = "no GPU timing (source host)";
  if (g.utilization_pct == g.utilization_pct) {
    absl::StrAppend(&g.words, absl::StrFormat("; NVML utilization %.0f%%", g.utilization_pct),
                    " (which counts a kernel waiting in a collective as busy)");
  }
  return g;
}

void Pump::ReportStall(const Stall& stall) {
  if (options_.log_stalls) {
    Log(LogLevel::kWarning, absl::StrCat("stall: ", DescribeStall(stall)));
  }
  if (options_.on_stall) {
    try {
      options_.on_stall(stall);
    } catch (const std::exception& e) {
      Log(LogLevel::kWarning, absl::StrCat("on_stall raised: ", e.what(), " (ignored)"));
    } catch (...) {
      Log(LogLevel::kWarning, "on_stall raised (ignored)");
    }
  }
}

double Pump::StepInProgress() const {
  Recorder::OpenScopes open;
  if (!recorder_.ReadOpenScopes(&open)) return 0;
  for (int i = 0; i < open.depth; ++i) {
    const Recorder::OpenFrame& f = open.frames[static_cast<size_t>(i)];
    if (!f.is_step) continue;
    const TscClock* const tsc = recorder_.tsc();
    const int64_t begin = tsc != nullptr ? tsc->ToNs(f.begin) : f.begin;
    return std::max(0.0, static_cast<double>(Now() - begin) / 1e9);
  }
  return 0;
}

std::optional<Stall> Pump::CurrentStall() const {
  std::lock_guard<std::mutex> lock(stall_mu_);
  return stalls_.current();
}

std::vector<Stall> Pump::Stalls() const {
  std::lock_guard<std::mutex> lock(stall_mu_);
  return stalls_.All();
}

int64_t Pump::Now() const { return clock_ != nullptr ? clock_->NowNs() : ReadMonotonicNs(); }

void Pump::RecordMemory(const AllocatorStats& stats, std::string_view source) {
  if (backends_.memory != nullptr) backends_.memory->Push(MemorySample{Now(), stats}, source);
}

void Pump::RecordOom(const OomEvent& oom, std::string_view source, uint64_t step_seq) {
  std::lock_guard<std::mutex> lock(oom_mu_);
  pending_oom_ = oom;
  oom_source_ = std::string(source);
  pending_oom_seq_ = step_seq;
}

void Pump::DrainMemoryLocked() {
  std::optional<OomEvent> oom;
  std::string oom_source;
  {
    std::lock_guard<std::mutex> lock(oom_mu_);
    oom.swap(pending_oom_);
    oom_source.swap(oom_source_);
    if (oom.has_value()) oom_step_seq_ = pending_oom_seq_;
  }
  if (oom.has_value()) {
    if (!aggregator_.memory_active()) {
      std::string source = backends_.memory != nullptr ? backends_.memory->source() : "";
      if (source.empty()) source = oom_source;
      aggregator_.SetMemorySource(source.empty() ? "application" : source);
    }
    aggregator_.SetOom(*oom);
  }
  if (backends_.memory == nullptr) return;
  if (const int64_t dropped = backends_.memory->dropped(); dropped > 0) {
    LogOnce("memory-inbox-full", LogLevel::kWarning,
            "GPU memory samples came faster than the worker took them: the oldest were "
            "dropped (peaks stay exact where the allocator's high-water mark rose); sample less "
            "often (Session::RecordMemory's caller)");
  }
  memory_samples_.clear();
  backends_.memory->Drain(&memory_samples_);
  if (memory_samples_.empty()) return;
  if (!aggregator_.memory_active()) {
    std::string source = backends_.memory->source();
    aggregator_.SetMemorySource(source.empty() ? "application" : source);
  }
  for (const MemorySample& s : memory_samples_) aggregator_.AddMemory(s);
}

void Pump::Flush() {
  std::lock_guard<std::mutex> lock(agg_mu_);
  PumpLocked();
}

WindowSnapshot Pump::Snapshot(SummaryInputs* inputs) {
  // Pumped and snapshotted under the lock (a copy of the window's totals;
  // its steps are shared, copy on write), summarized outside it: a large
  // window never holds up the worker.
  std::lock_guard<std::mutex> lock(agg_mu_);
  PumpLocked();
  WindowSnapshot snapshot = aggregator_.Snapshot(phases_);
  if (inputs == nullptr) return snapshot;
  inputs->window = options_.window;
  inputs->source = source_;
  inputs->source_reason = source_reason_;
  inputs->simulated = backends_.simulated;
  if (timer_ != nullptr && source_ != Source::kHost) {
    inputs->gpu_clock_error = static_cast<double>(timer_->accuracy_ns()) * 1e-9;
  }
  inputs->awaiting_activity = activity_ != nullptr && activity_->records() == 0;
  inputs->misuse = recorder_.misuse();
  OverheadStats& overhead = inputs->overhead;
  overhead.records_per_step = steps_consumed_ > 0 ? static_cast<double>(records_consumed_) /
                                                        static_cast<double>(steps_consumed_)
                                                  : 0.0;
  if (activity_ != nullptr) overhead.activity_buffers = static_cast<int64_t>(activity_->buffers());
  overhead.worker_cpu_s = worker_cpu_s_;
  overhead.worker_cpu_share = worker_cpu_share_;
  inputs->stalls = Stalls();
  inputs->step_in_progress = StepInProgress();
  return snapshot;
}

void Pump::Reset(int warmup_steps) {
  // What ended before the call is in the queue or staged: drained into the
  // window first, then dropped with it. A step still open ends later and is
  // counted; its phases already drained wait in step assembly, untouched.
  std::lock_guard<std::mutex> lock(agg_mu_);
  PumpLocked();
  aggregator_.Reset(warmup_steps);
}

void Pump::TraceSteps(std::vector<TraceStep>* steps, int64_t* launch_threshold_ns) {
  // Copied under the lock, encoded outside it (export/chrome_trace.cc): a
  // large trace must not keep the worker from draining the queue.
  std::lock_guard<std::mutex> lock(agg_mu_);
  PumpLocked();
  aggregator_.TraceSnapshot(steps, launch_threshold_ns);
}

void Pump::Close() {
  std::lock_guard<std::mutex> lock(agg_mu_);
  closed_ = true;
  PumpLocked(/*final=*/true);
  // A closed session holds CUPTI no longer: a profiler may subscribe.
  StopActivityLocked();
  // Markers of steps still waiting for the GPU go back to the pool: after
  // Close() nothing asks for them again.
  if (timer_ != nullptr) aggregator_.Abandon();
}

void Pump::Destroy() {
  // The activity source was stopped by Close() (or ReleaseCupti()).
  if (timer_ == nullptr) return;
  // Scopes cannot outlive the session: whatever they left is here now.
  // Records that arrived after Close() and scopes still open return their
  // markers, so that Stop() finds every marker back in the pool.
  std::lock_guard<std::mutex> lock(agg_mu_);
  DrainQueueLocked();
  recorder_.orphaned_markers().Drain([this](uint32_t slot) { timer_->Release(slot); });
  recorder_.ReleaseOpenMarkers([this](uint32_t slot) { timer_->Release(slot); });
  aggregator_.Abandon();
  timer_->Stop();
}

}  // namespace gpuscope::internal
