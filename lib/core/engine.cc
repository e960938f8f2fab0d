#include "core/engine.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"

namespace gpuscope::internal {

// The run's device intervals as an activity source: sorted by begin, and
// delivered as the host ranges move past them, the way CUPTI delivers what
// has happened. The record stream is complete before the latest host range's
// end (every interval that began before it has been delivered).
class Engine::RecordedActivity final : public ActivitySource {
 public:
  explicit RecordedActivity(std::string name) : name_(std::move(name)) {}

  void Add(std::vector<DeviceInterval> intervals) {
    const auto by_begin = [](const DeviceInterval& a, const DeviceInterval& b) {
      return a.begin_ns < b.begin_ns;
    };
    std::stable_sort(intervals.begin(), intervals.end(), by_begin);
    // Only what is not delivered yet is merged: delivered intervals are the
    // resolver's.
    held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(next_));
    next_ = 0;
    const size_t before = held_.size();
    held_.insert(held_.end(), std::make_move_iterator(intervals.begin()),
                 std::make_move_iterator(intervals.end()));
    std::inplace_merge(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(before),
                       held_.end(), by_begin);
  }

  void set_horizon(int64_t horizon_ns) { horizon_ns_ = std::max(horizon_ns_, horizon_ns); }

  absl::string_view name() const override { return name_; }
  absl::Status Start() override { return absl::OkStatus(); }

  int64_t Drain(std::vector<DeviceInterval>* out, bool flush_now) override {
    size_t end = next_;
    while (end < held_.size() && (flush_now || held_[end].begin_ns < horizon_ns_)) ++end;
    for (size_t i = next_; i < end; ++i) {
      if (IsDeviceActivity(held_[i].kind)) ++records_;
      out->push_back(held_[i]);
    }
    next_ = end;
    if (next_ == held_.size()) {
      held_.clear();
      next_ = 0;
    }
    // At the end of the run everything is in: complete past any step.
    return flush_now ? INT64_MAX / 2 : horizon_ns_;
  }

  uint64_t records() const override { return records_; }
  uint64_t dropped() const override { return 0; }
  void Stop() override {}

 private:
  std::string name_;
  std::vector<DeviceInterval> held_;  // sorted by begin; [next_, end) not delivered
  size_t next_ = 0;
  int64_t horizon_ns_ = INT64_MIN / 2;
  uint64_t records_ = 0;
};

Engine::Engine(const Config& config)
    : config_(config),
      phases_(config.max_phases, [](uint16_t, std::string_view) {}),
      aggregator_(std::max(1, config.window), config.max_phases) {
  aggregator_.SetWarmup(config.warmup_steps);
  aggregator_.SetTraceSteps(config.trace_steps);
  if (config.device_activity) {
    activity_ = std::make_unique<RecordedActivity>(config.activity_name);
    aggregator_.SetActivitySource(activity_.get(), config.launch_threshold_ns);
  }
}

Engine::~Engine() = default;

absl::StatusOr<PhaseId> Engine::Phase(std::string_view name) { return phases_.Register(name); }

void Engine::AddDeviceIntervals(std::vector<DeviceInterval> intervals) {
  if (activity_ != nullptr) activity_->Add(std::move(intervals));
}

void Engine::AddHostRange(const Record& record) {
  aggregator_.Consume(record);
  host_until_ns_ = std::max(host_until_ns_, record.end_ns);
  // A step ended: resolve what the intervals given so far cover, so that
  // the pending list and the held intervals stay as short as a live
  // session's.
  if (record.kind == RecordKind::kStep) Resolve(/*final=*/false);
}

void Engine::AddTelemetry(const TelemetrySample& sample, std::string_view source) {
  aggregator_.AddTelemetry(sample);
  aggregator_.SetTelemetrySource(std::string(source));
}

void Engine::Resolve(bool final) {
  if (activity_ == nullptr) return;
  activity_->set_horizon(host_until_ns_);
  aggregator_.ResolvePending(final);
}

WindowSnapshot Engine::Snapshot() {
  Resolve(/*final=*/true);
  return aggregator_.Snapshot(phases_);
}

Summary Engine::Summarize(const SummaryInputs& inputs) {
  return SummarizeWindow(Snapshot(), inputs);
}

TraceCapture Engine::Trace(std::optional<RankIdentity> rank) {
  Resolve(/*final=*/true);
  TraceCapture capture;
  aggregator_.TraceSnapshot(&capture.steps, &capture.launch_threshold_ns);
  capture.phase_names.reserve(static_cast<size_t>(phases_.size()));
  for (int id = 0; id < phases_.size(); ++id)
    capture.phase_names.emplace_back(phases_.Name(static_cast<uint16_t>(id)));
  capture.rank = std::move(rank);
  return capture;
}

}  // namespace gpuscope::internal
