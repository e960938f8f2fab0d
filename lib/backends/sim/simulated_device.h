// The simulated device behind gpuscope::SimulatedDevice: its shared state,
// and the DeviceTimer a session runs on when given one.

#ifndef GPUSCOPE_LIB_BACKENDS_SIM_SIMULATED_DEVICE_H_
#define GPUSCOPE_LIB_BACKENDS_SIM_SIMULATED_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backends/activity_source.h"
#include "backends/cuda/lane_table.h"
#include "backends/cuda/marker_pool.h"
#include "backends/device_timer.h"
#include "backends/memory_inbox.h"
#include "gpuscope/clock.h"
#include "gpuscope/testing.h"

namespace gpuscope::internal {

struct SimSlot {
  int64_t completion_ns = 0;  // written by the recording thread at Record()
  uint16_t lane = 0;          // likewise
};

struct SimKernel {
  int64_t begin_ns;
  int64_t end_ns;
};

struct SimState {
  explicit SimState(SimulatedDevice::Config c) : config(c), pool(c.max_markers) {}

  int64_t Now() const noexcept;

  const SimulatedDevice::Config config;
  std::atomic<SimulatedDevice::Fault> fault{SimulatedDevice::Fault::kNone};

  // Set once, when the first session attaches (keeps its clock alive).
  std::shared_ptr<Clock> clock;
  std::atomic<bool> attached{false};

  // Recording thread: when each stream's enqueued work ends; kernels run.
  std::unordered_map<uint64_t, int64_t> busy_until;
  std::unordered_map<uint64_t, std::vector<SimKernel>> kernels;
  std::unordered_map<uint64_t, int> stream_device;  // PlaceStream(); absent: device 0

  int DeviceOf(uint64_t stream) const {
    const auto it = stream_device.find(stream);
    return it != stream_device.end() ? it->second : 0;
  }

  LaneTable lanes;

  // Activity records not drained yet (Config::activity).
  std::mutex activity_mu;
  std::vector<DeviceInterval> activity;
  std::atomic<int64_t> activity_dropped{0};

  // Enqueues `duration_ns` of work on `stream` at the clock's current time:
  // ground truth, and an activity record of `kind`.
  void Enqueue(ActivityKind kind, int64_t duration_ns, uint64_t stream, uint64_t bytes,
               bool pageable, KernelClass kernel_class = KernelClass::kOther,
               uint32_t name = kNoKernelName);
  void AddActivity(const DeviceInterval& a);

  // The caching allocator's model (SimulatedDevice::Allocate()), per device.
  struct Memory {
    std::unordered_map<uint64_t, uint64_t> live;  // block id -> its size
    std::multimap<uint64_t, uint64_t> cache;      // size -> block id
    uint64_t allocated = 0, reserved = 0, peak_allocated = 0, peak_reserved = 0;
    int64_t retries = 0, ooms = 0;
  };
  std::unordered_map<int, Memory> memory;
  uint64_t next_block = 1;
  // Where the allocator's numbers go: the owning session's (null before one
  // attached).
  std::shared_ptr<MemoryInbox> memory_inbox;
  void ReportMemory(int device);

  MarkerPool<SimSlot> pool;
  std::atomic<int64_t> recorded{0};
  std::atomic<int64_t> released{0};
};

// The backends a session on `device` runs on, reading `clock` (null:
// CLOCK_MONOTONIC): a DeviceTimer, and an ActivitySource when the device
// delivers activity. The first session attached owns the device; others get
// backends whose Start() refuses.
struct SimulatedBackends {
  std::unique_ptr<DeviceTimer> timer;
  std::unique_ptr<ActivitySource> activity;
  std::shared_ptr<MemoryInbox> memory;  // the owner's only
};
SimulatedBackends MakeSimulatedBackends(const std::shared_ptr<SimulatedDevice>& device,
                                        std::shared_ptr<Clock> clock);
inline std::unique_ptr<DeviceTimer> MakeSimulatedTimer(
    const std::shared_ptr<SimulatedDevice>& device, std::shared_ptr<Clock> clock) {
  return MakeSimulatedBackends(device, std::move(clock)).timer;
}

class SimulatedDeviceAccess {
 public:
  static const std::shared_ptr<SimState>& State(const SimulatedDevice& d) { return d.state_; }
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_SIM_SIMULATED_DEVICE_H_
