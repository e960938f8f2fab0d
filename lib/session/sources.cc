// The source ladder: which backends a session starts with, the rung it
// stands on, and its moves down it (lowering to host when the timer fails,
// releasing CUPTI for the events timer). A session's moves run under its
// pump's aggregator lock (Pump::Start(): in the constructor, before any
// other thread can see the session).

#include "session/sources.h"

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_driver_timer.h"
#include "backends/cupti/cupti_activity.h"
#include "backends/sim/simulated_device.h"
#include "backends/telemetry/process_telemetry.h"
#include "base/log.h"
#include "core/activity_timeline.h"
#include "session/pump.h"
#include "session/worker.h"

namespace gpuscope::internal {

Backends DefaultBackends(const Options& options) {
  Backends backends;
  backends.annotator = MakeNvtxAnnotator(options.max_phases);
  std::shared_ptr<SimulatedDevice> sim = options.simulated_device;
  if (sim == nullptr && SimulationRequested()) sim = std::make_shared<SimulatedDevice>();
  if (sim != nullptr) {
    SimulatedBackends simulated = MakeSimulatedBackends(sim, options.clock);
    backends.device_timer = std::move(simulated.timer);
    backends.activity = std::move(simulated.activity);
    backends.memory = std::move(simulated.memory);
    backends.simulated = true;
  } else if (options.clock == nullptr && g_fork_generation.load() == 0) {
    // A real GPU times on CLOCK_MONOTONIC, so not with a custom clock; and
    // CUDA is unusable in a forked child, so never there.
    backends.device_timer = MakeCudaDriverTimer();
    backends.activity = MakeCuptiActivitySource(options.cupti);
    if (options.telemetry_interval_ms > 0) {
      backends.telemetry = MakeProcessTelemetry(options.telemetry_interval_ms);
    }
  }
  if (backends.memory == nullptr) backends.memory = std::make_shared<MemoryInbox>();
  return backends;
}

namespace {

// Why the better sources were not used, each distinct cause said once: with
// no driver every rung fails for the same reason ("CUPTI and CUDA events
// unavailable: libcuda.so.1: cannot open shared object file ...").
std::string DescribeFailures(const std::vector<std::pair<std::string, std::string>>& failures) {
  std::string why;
  std::vector<bool> said(failures.size(), false);
  for (size_t i = 0; i < failures.size(); ++i) {
    if (said[i]) continue;
    std::string names = failures[i].first;
    for (size_t j = i + 1; j < failures.size(); ++j) {
      if (!said[j] && failures[j].second == failures[i].second) {
        said[j] = true;
        absl::StrAppend(&names, " and ", failures[j].first);
      }
    }
    absl::StrAppend(&why, names, " unavailable: ", failures[i].second, "; ");
  }
  return why;
}

}  // namespace

SourceChoice SelectSource(Backends& backends) {
  SourceChoice choice;
  std::string missing;  // backends this build or configuration has none of
  std::vector<std::pair<std::string, std::string>> failures;  // (backend, why it did not start)
  if (backends.activity != nullptr) {
    absl::Status status = backends.activity->Start();
    if (status.ok()) {
      // Exact activity makes events redundant; the timer stays, not started,
      // for when CUPTI is released (Session::ReleaseCupti).
      choice.source = Source::kCupti;
      choice.reason = absl::StrCat("activity records from ", backends.activity->name());
      return choice;
    }
    failures.emplace_back(std::string(backends.activity->name()), std::string(status.message()));
    backends.activity.reset();
  } else {
    absl::StrAppend(&missing, "no activity source (CUPTI) in this build; ");
  }
  if (backends.device_timer != nullptr) {
    absl::Status status = backends.device_timer->Start();
    if (status.ok()) {
      choice.source = Source::kEvents;
      choice.reason =
          absl::StrCat(missing, DescribeFailures(failures), "using ", backends.device_timer->name(),
                       " (GPU idle % is a lower bound, assuming the data phase "
                       "enqueues no GPU work)");
      return choice;
    }
    failures.emplace_back(std::string(backends.device_timer->name()),
                          std::string(status.message()));
    backends.device_timer.reset();
  } else {
    absl::StrAppend(&missing, "no device timer (CUDA events) in this build; ");
  }
  choice.source = Source::kHost;
  choice.reason =
      absl::StrCat(missing, DescribeFailures(failures), "host timing only: no GPU idle %");
  return choice;
}

// ---------------------------------------------------------------------------
// A session on the ladder.

void Pump::Start() {
  aggregator_.SetTraceSteps(options_.trace_steps);
  aggregator_.SetWarmup(options_.warmup_steps);
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
  recorder_.SetDeviceTimer(timer_);
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
}

void Pump::LowerToHost(const absl::Status& why) {
  if (source_ == Source::kHost) return;
  recorder_.SetDeviceTimer(nullptr);
  // From now on every marker goes straight back to the pool, those of steps
  // already waiting and those of records still in the queue alike.
  aggregator_.StopResolving();
  source_ = Source::kHost;
  source_reason_ = absl::StrCat("lowered to host: ", timer_->name(), " failed (", why.message(),
                                "); the training loop goes on, timed on the host only");
  LogOnce(absl::StrCat("lowered-", timer_->name()), LogLevel::kWarning, source_reason_);
}

void Pump::StopActivityLocked() {
  if (activity_ == nullptr) return;
  aggregator_.ResolvePending(/*final=*/true);  // what the records already cover keeps its numbers
  activity_->Stop();
  aggregator_.DropPending();
}

void Pump::ReleaseCupti(bool closed) {
  std::lock_guard<std::mutex> lock(agg_mu_);
  if (activity_ == nullptr) return;
  DrainQueueLocked();
  StopActivityLocked();
  aggregator_.SetActivitySource(nullptr, kDefaultLaunchThresholdNs);
  activity_ = nullptr;
  std::string why = "CUPTI released (ReleaseCupti / release_cupti())";
  if (fallback_timer_ != nullptr && !closed && !closed_) {
    if (absl::Status started = fallback_timer_->Start(); started.ok()) {
      timer_ = fallback_timer_;
      aggregator_.SetDeviceTimer(timer_);
      recorder_.SetDeviceTimer(timer_);
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

}  // namespace gpuscope::internal
