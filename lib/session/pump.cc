// The pump: the session's aggregation side. Whoever holds `agg_mu_` drains
// the queue into the aggregator, resolves device data, reports misuse and
// samples the NVTX counters: the background worker (Pump(), every flush
// interval), and readers, which pump before they read (Flush(),
// Summarize(), StepSeries(), TraceSnapshot()), so that a step that has
// ended is always in what they return.
//
// Lock order: the worker's lock, pump_mu_, agg_mu_, drain_mu_ (see
// session/session_impl.h). The recording thread takes none of them.

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_driver_timer.h"
#include "backends/host/clock.h"
#include "base/log.h"
#include "core/efficiency.h"
#include "core/step_series.h"
#include "core/summarize.h"
#include "gpuscope/version.h"
#include "session/session_impl.h"

namespace gpuscope::internal {

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
  const int64_t consumed_before = records_consumed_;
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
  ++records_consumed_;
  if (r.kind == RecordKind::kStep) ++steps_consumed_;
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
  WindowSnapshot snapshot;
  SummaryInputs inputs;
  {
    // Pumped and snapshotted under the lock (a copy of the window's totals;
    // its steps are shared, copy on write), summarized outside it: a large
    // window never holds up the worker.
    std::lock_guard<std::mutex> lock(agg_mu_);
    PumpLocked();
    snapshot = aggregator_.Snapshot(phases_);
    inputs = InputsLocked();
  }
  inputs.overhead.scope_ns = MeasuredScopeNs();
  inputs.efficiency = EfficiencyInputs::From(options_, DeviceNameForPeak());
  {
    std::lock_guard<std::mutex> lock(ranks_mu_);
    inputs.rank = rank_;
    inputs.ranks = ranks_;
    if (inputs.ranks.has_value()) {
      inputs.ranks->age =
          std::max<double>(0, 1e-9 * static_cast<double>(ReadMonotonicNs() - ranks_at_ns_));
    }
  }
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
  // What ended before the call is in the queue or staged: drained into the
  // window first, then dropped with it. A step still open ends later and is
  // counted; its phases already drained wait in step assembly, untouched.
  std::lock_guard<std::mutex> lock(agg_mu_);
  PumpLocked();
  aggregator_.Reset(warmup);
  return absl::OkStatus();
}

SummaryInputs SessionImpl::InputsLocked() const {
  SummaryInputs facts;
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
  OverheadStats& overhead = facts.overhead;
  overhead.records_per_step = steps_consumed_ > 0 ? static_cast<double>(records_consumed_) /
                                                        static_cast<double>(steps_consumed_)
                                                  : 0.0;
  if (activity_ != nullptr) overhead.activity_buffers = static_cast<int64_t>(activity_->buffers());
  overhead.worker_cpu_s = worker_cpu_s_;
  overhead.worker_cpu_share = worker_cpu_share_;
  return facts;
}

WindowSnapshot SessionImpl::PumpedSnapshot() {
  // Pumped and taken under the lock; the caller reads it outside.
  std::lock_guard<std::mutex> lock(agg_mu_);
  PumpLocked();
  return aggregator_.Snapshot(phases_);
}

std::vector<StepPoint> SessionImpl::StepSeries() {
  std::vector<StepPoint> series;
  if (InForkedChild()) return series;
  const WindowSnapshot snapshot = PumpedSnapshot();
  FillSeries(snapshot.window, snapshot.phase_names, &series);
  return series;
}

SeriesColumns SessionImpl::StepColumns() {
  SeriesColumns columns;
  if (InForkedChild()) return columns;
  const WindowSnapshot snapshot = PumpedSnapshot();
  FillColumns(snapshot.window, snapshot.phase_names, &columns);
  return columns;
}

TraceCapture SessionImpl::Trace() {
  TraceCapture capture;
  if (InForkedChild()) return capture;
  {
    // Copied under the lock, encoded outside it (export/chrome_trace.cc): a
    // large trace must not keep the worker from draining the queue.
    std::lock_guard<std::mutex> lock(agg_mu_);
    PumpLocked();
    aggregator_.TraceSnapshot(&capture.steps, &capture.launch_threshold_ns);
  }
  capture.phase_names.reserve(static_cast<size_t>(phases_.size()));
  for (int id = 0; id < phases_.size(); ++id)
    capture.phase_names.emplace_back(phases_.Name(static_cast<uint16_t>(id)));
  capture.rank = rank();
  return capture;
}

std::string_view SessionImpl::PhaseName(uint16_t id) const {
  return id < phases_.size() ? phases_.Name(id) : std::string_view("?");
}

void SessionImpl::Flush() {
  if (InForkedChild()) return;
  std::lock_guard<std::mutex> lock(agg_mu_);
  PumpLocked();
}

}  // namespace gpuscope::internal
