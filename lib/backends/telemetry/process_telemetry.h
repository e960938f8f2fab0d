// The process's one system telemetry (NVML, /proc), shared by every session
// that samples the system: it is sampled once per interval however many
// sessions are open (at the finest interval any of them asks for), and each
// session takes in every sample. NVML is loaded and its devices are listed
// once, by the first session.

#ifndef GPUSCOPE_LIB_BACKENDS_TELEMETRY_PROCESS_TELEMETRY_H_
#define GPUSCOPE_LIB_BACKENDS_TELEMETRY_PROCESS_TELEMETRY_H_

#include <cstdint>
#include <memory>

#include "backends/telemetry.h"

namespace gpuscope::internal {

// A session's view of the process telemetry. Its Start() attaches to the
// shared sampler (starting it on first use: MakeSystemTelemetry()); its
// Collect() returns the samples taken since the view last asked, taking one
// when the newest is older than the finest interval of the attached views;
// destroying it detaches. Sessions created in a forked child never get one.
std::unique_ptr<Telemetry> MakeProcessTelemetry(int interval_ms);

// Samples the shared sampler has taken in this process (for tests and
// benchmarks: it grows with time, never with the number of sessions).
uint64_t ProcessTelemetrySamples();

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_TELEMETRY_PROCESS_TELEMETRY_H_
