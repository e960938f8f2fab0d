// The backends a session runs on, and the ladder that picks its source.
// sources.cc also holds a session's moves on the ladder (the pump's
// Start(), LowerToHost(), StopActivityLocked() and ReleaseCupti(), declared
// in session/pump.h).

#ifndef GPUSCOPE_LIB_SESSION_SOURCES_H_
#define GPUSCOPE_LIB_SESSION_SOURCES_H_

#include <memory>
#include <string>

#include "backends/activity_source.h"
#include "backends/annotator.h"
#include "backends/device_timer.h"
#include "backends/memory_inbox.h"
#include "backends/telemetry.h"
#include "gpuscope/options.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

// Any of these may be null: no such backend.
struct Backends {
  std::unique_ptr<Annotator> annotator;
  std::unique_ptr<ActivitySource> activity;
  std::unique_ptr<DeviceTimer> device_timer;
  std::unique_ptr<Telemetry> telemetry;
  // Allocator samples (Session::RecordMemory(), the simulated device's
  // allocator). Never null once DefaultBackends() made it.
  std::shared_ptr<MemoryInbox> memory;
  // The GPU sources are gpuscope's simulated device, not a GPU: summaries
  // say so (Summary::simulated).
  bool simulated = false;
};

// The backends a session starts with unless given its own: NVTX
// annotations; with a simulated device (Options::simulated_device or
// GPUSCOPE_SIMULATE=1) its timer and activity; otherwise, with no custom
// clock and outside a forked child, the CUDA events timer, CUPTI activity and
// (telemetry_interval_ms > 0) the process's shared telemetry sampler. Nothing
// is started here: SelectSource() starts what it picks.
Backends DefaultBackends(const Options& options);

// The chosen source and why the better ones were not chosen.
struct SourceChoice {
  Source source = Source::kHost;
  std::string reason;
};

// SelectSource()
//
// The source ladder (docs/architecture.md): `cupti` if the activity source starts, else
// `events` if the device timer starts, else `host`. Starts the winner, and
// resets (to null) every GPU backend that lost, so nothing half-started stays
// attached; when `cupti` wins, the device timer stays, not started, for
// Session::ReleaseCupti(). The reason names each failed rung and its error.
SourceChoice SelectSource(Backends& backends);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_SESSION_SOURCES_H_
