// A training loop on a ManualClock and a SimulatedDevice, written once for
// the end-to-end tests of the device sources (events_test.cc, the events
// source; activity_test.cc, the cupti source): it records the host window of
// every step, so that a test can compute the true GPU idle time from the
// simulated device and hold gpuscope's number against it.

#ifndef GPUSCOPE_TESTS_CPP_SIM_LOOP_H_
#define GPUSCOPE_TESTS_CPP_SIM_LOOP_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "gpuscope/gpuscope.h"
#include "gpuscope/testing.h"
#include "test_util.h"

namespace gpuscope::testing {

struct SimLoop {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::shared_ptr<SimulatedDevice> gpu;
  std::unique_ptr<Session> session;
  std::vector<std::pair<int64_t, int64_t>> windows;  // each step's [begin, end) on the host

  // A device with activity records (config.activity) serves the cupti
  // source; one without, the events source. `options` gets the clock and
  // the device, and stream 0 (the stream kernels are launched on) unless it
  // names one.
  explicit SimLoop(SimulatedDevice::Config config = {}, Options options = {})
      : gpu(std::make_shared<SimulatedDevice>(config)) {
    options.clock = clock;
    options.simulated_device = gpu;
    if (options.stream == kNoStream) options.stream = 0;
    session = std::make_unique<Session>(std::move(options));
  }

  // One step: `body` runs inside a StepScope, and the step's window is kept.
  template <typename Body>
  void Step(Body body) {
    const int64_t begin = clock->NowNs();
    {
      StepScope step(*session);
      body();
    }
    windows.emplace_back(begin, clock->NowNs());
  }
  // A phase that launches a kernel (if kernel_ns > 0) and keeps the host
  // busy for host_ns: host_ns >= kernel_ns models a host that waits for the
  // kernel (.item(), a synchronizing copy).
  void Phase(gpuscope::Phase p, int64_t host_ns, int64_t kernel_ns = 0) {
    PhaseScope scope(*session, p);
    if (kernel_ns > 0) gpu->Launch(kernel_ns);
    clock->Advance(host_ns);
  }
  // Lets the GPU finish everything enqueued, then summarizes.
  Summary DrainAndSummarize() {
    clock->Advance(10'000 * kMs);
    return session->Summarize();
  }

  // The true idle % over the steps' windows: of `device` (busy while a kernel
  // runs on any of its streams), or of stream 0 (the one Phase() launches on).
  double TrueIdlePctOnDevice(int device) const {
    int64_t window = 0, busy = 0;
    for (const auto& [b, e] : windows) {
      window += e - b;
      busy += gpu->DeviceBusyBetween(b, e, device);
    }
    return 100.0 * static_cast<double>(window - busy) / static_cast<double>(window);
  }
  double TrueIdlePct() const {
    int64_t window = 0, busy = 0;
    for (const auto& [b, e] : windows) {
      window += e - b;
      busy += gpu->BusyBetween(b, e);
    }
    return 100.0 * static_cast<double>(window - busy) / static_cast<double>(window);
  }
};

}  // namespace gpuscope::testing

#endif  // GPUSCOPE_TESTS_CPP_SIM_LOOP_H_
