#include "session/sources.h"

#include <utility>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_driver_timer.h"
#include "backends/cupti/cupti_activity.h"
#include "backends/telemetry/process_telemetry.h"
#include "session/worker.h"
#include "backends/sim/simulated_device.h"

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
  return backends;
}

SourceChoice SelectSource(Backends& backends) {
  SourceChoice choice;
  std::string why;
  if (backends.activity != nullptr) {
    absl::Status status = backends.activity->Start();
    if (status.ok()) {
      // Exact activity makes events redundant; the timer stays, not started,
      // for when CUPTI is released (Session::ReleaseCupti).
      choice.source = Source::kCupti;
      choice.reason = absl::StrCat("activity records from ", backends.activity->name());
      return choice;
    }
    absl::StrAppend(&why, backends.activity->name(), " unavailable: ", status.message(), "; ");
    backends.activity.reset();
  } else {
    absl::StrAppend(&why, "no activity source (CUPTI) in this build; ");
  }
  if (backends.device_timer != nullptr) {
    absl::Status status = backends.device_timer->Start();
    if (status.ok()) {
      choice.source = Source::kEvents;
      choice.reason = absl::StrCat(why, "using ", backends.device_timer->name(),
                                   " (GPU idle % is a lower bound, assuming the data phase "
                                   "enqueues no GPU work)");
      return choice;
    }
    absl::StrAppend(&why, backends.device_timer->name(), " unavailable: ", status.message(), "; ");
    backends.device_timer.reset();
  } else {
    absl::StrAppend(&why, "no device timer (CUDA events) in this build; ");
  }
  choice.source = Source::kHost;
  choice.reason = absl::StrCat(why, "host timing only: no GPU idle %");
  return choice;
}

}  // namespace gpuscope::internal
