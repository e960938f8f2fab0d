#include "backends/sim/simulated_device.h"

#include <algorithm>
#include <utility>

#include "backends/host/clock.h"
#include "backends/vendor_status.h"
#include "base/env.h"

namespace gpuscope {
namespace internal {
namespace {

class SimulatedTimer final : public DeviceTimer {
 public:
  SimulatedTimer(std::shared_ptr<SimState> state, bool owner)
      : state_(std::move(state)), owner_(owner) {}

  absl::string_view name() const override { return "simulated device"; }

  absl::Status Start() override {
    if (state_->fault.load() == SimulatedDevice::Fault::kNoDriver) {
      return absl::NotFoundError(
          "libcuda.so.1: cannot open shared object file (simulated device: no driver)");
    }
    if (!owner_) {
      return absl::FailedPreconditionError(
          "this SimulatedDevice already serves another session: give each session its own");
    }
    state_->pool.Grow(state_->config.initial_markers, [](SimSlot&) { return true; });
    return absl::OkStatus();
  }

  uint32_t Record(StreamHandle stream) noexcept override {
    if (Faulted()) return kNoEvent;  // as cuEventRecord fails after a sticky error
    const uint16_t lane =
        state_->lanes.Find(static_cast<uint64_t>(state_->DeviceOf(stream)), stream);
    if (lane == LaneTable::kNoLane) return kNoEvent;
    const uint32_t id = state_->pool.Acquire();
    if (id == kNoEvent) return kNoEvent;
    state_->pool[id].lane = lane;
    const int64_t now = state_->Now();
    int64_t completion = now;
    const auto it = state_->busy_until.find(stream);
    if (it != state_->busy_until.end()) completion = std::max(completion, it->second);
    state_->pool[id].completion_ns = completion + state_->config.marker_latency_ns;
    state_->recorded.fetch_add(1, std::memory_order_relaxed);
    return id;
  }

  uint16_t LaneOf(uint32_t slot) const override { return state_->pool[slot].lane; }

  int LaneDevice(uint16_t lane) const override {
    return static_cast<int>(state_->lanes.context(lane));
  }

  MarkerState Query(uint32_t slot, int64_t* host_ns) override {
    if (Faulted()) return MarkerState::kLost;
    const int64_t completion = state_->pool[slot].completion_ns;
    if (completion > state_->Now()) return MarkerState::kPending;
    *host_ns = completion;
    return MarkerState::kComplete;
  }

  void Release(uint32_t slot) override {
    state_->pool.Release(slot);
    state_->released.fetch_add(1, std::memory_order_relaxed);
  }

  absl::Status Maintain() override {
    switch (state_->fault.load()) {
      case SimulatedDevice::Fault::kStickyError:
        // As the CUDA timer reports a driver call failing (vendor_status.h).
        return VendorCallError(absl::StatusCode::kInternal, "cuEventQuery",
                               "CUDA_ERROR_ILLEGAL_ADDRESS",
                               "simulated, sticky: the context is unusable", __FILE__, __LINE__);
      case SimulatedDevice::Fault::kContextDestroyed:
        return VendorCallError(absl::StatusCode::kFailedPrecondition, "cuCtxPushCurrent",
                               "CUDA_ERROR_CONTEXT_IS_DESTROYED", "simulated", __FILE__, __LINE__);
      default: break;
    }
    // Off the hot path: double the pool when under a quarter is free.
    MarkerPool<SimSlot>& pool = state_->pool;
    if (pool.free_approx() < pool.created() / 4 + 1) {
      pool.Grow(std::max<uint32_t>(pool.created(), 64), [](SimSlot&) { return true; });
    }
    return absl::OkStatus();
  }

  int64_t accuracy_ns() const override { return 0; }

  void Stop() override {}

 private:
  bool Faulted() const {
    const SimulatedDevice::Fault f = state_->fault.load(std::memory_order_relaxed);
    return f == SimulatedDevice::Fault::kStickyError ||
           f == SimulatedDevice::Fault::kContextDestroyed;
  }

  std::shared_ptr<SimState> state_;
  const bool owner_;  // the first session attached; others are refused at Start()
};

class SimulatedActivity final : public ActivitySource {
 public:
  SimulatedActivity(std::shared_ptr<SimState> state, bool owner)
      : state_(std::move(state)), owner_(owner) {}

  absl::string_view name() const override { return "simulated CUPTI"; }

  absl::Status Start() override {
    switch (state_->fault.load()) {
      case SimulatedDevice::Fault::kNoDriver:
        return absl::NotFoundError("libcupti.so: cannot open shared object file (simulated)");
      case SimulatedDevice::Fault::kActivityRefused:
        return VendorCallError(absl::StatusCode::kFailedPrecondition, "cuptiSubscribe_v2",
                               "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
                               "simulated: another profiler holds CUPTI", __FILE__, __LINE__);
      default: break;
    }
    if (!owner_) {
      return absl::FailedPreconditionError(
          "this SimulatedDevice already serves another session: give each session its own");
    }
    return absl::OkStatus();
  }

  int64_t Drain(std::vector<DeviceInterval>* out, bool) override {
    const int64_t now = state_->Now();
    std::lock_guard<std::mutex> lock(state_->activity_mu);
    // Like CUPTI, deliver what has completed; the rest stays for later.
    std::vector<DeviceInterval>& held = state_->activity;
    const auto done = std::stable_partition(
        held.begin(), held.end(), [now](const DeviceInterval& a) { return a.end_ns <= now; });
    records_ += static_cast<uint64_t>(done - held.begin());
    out->insert(out->end(), held.begin(), done);
    held.erase(held.begin(), done);
    // Complete before the earliest work still running or queued: a step
    // that work overlaps must wait for its record.
    int64_t horizon = now;
    for (const DeviceInterval& a : held) horizon = std::min(horizon, a.begin_ns);
    return horizon;
  }

  uint64_t records() const override { return records_; }
  uint64_t dropped() const override {
    return static_cast<uint64_t>(state_->activity_dropped.load());
  }
  void Stop() override {}

 private:
  std::shared_ptr<SimState> state_;
  const bool owner_;
  uint64_t records_ = 0;
};

}  // namespace

void SimState::AddActivity(const DeviceInterval& a) {
  std::lock_guard<std::mutex> lock(activity_mu);
  if (activity.size() >= config.activity_capacity) {
    activity_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  activity.push_back(a);
}

void SimState::Enqueue(ActivityKind kind, int64_t duration_ns, uint64_t stream, uint64_t bytes,
                       bool pageable, KernelClass kernel_class, uint32_t name) {
  const int64_t now = Now();
  int64_t& busy = busy_until[stream];
  const int64_t begin = std::max(now, busy);
  busy = begin + std::max<int64_t>(0, duration_ns);
  kernels[stream].push_back({begin, busy});
  if (!config.activity) return;
  DeviceInterval a;
  a.begin_ns = begin;
  a.end_ns = busy;
  a.launch_ns = now;
  a.device = static_cast<uint32_t>(DeviceOf(stream));
  a.stream = static_cast<uint32_t>(stream);
  a.kind = kind;
  a.pageable = pageable;
  a.bytes = bytes;
  a.kernel_class = kernel_class;
  a.name = name;
  AddActivity(a);
}

int64_t SimState::Now() const noexcept {
  return clock != nullptr ? clock->NowNs() : ReadMonotonicNs();
}

SimulatedBackends MakeSimulatedBackends(const std::shared_ptr<SimulatedDevice>& device,
                                        std::shared_ptr<Clock> clock) {
  const std::shared_ptr<SimState>& state = SimulatedDeviceAccess::State(*device);
  const bool owner = !state->attached.exchange(true);
  // The session's constructor happens before its recording thread uses the
  // device, which orders this write before every read of the clock.
  if (owner) state->clock = std::move(clock);
  SimulatedBackends b;
  if (owner) {
    state->memory_inbox = std::make_shared<MemoryInbox>("simulated");
    b.memory = state->memory_inbox;
  }
  b.timer = std::make_unique<SimulatedTimer>(state, owner);
  if (state->config.activity) b.activity = std::make_unique<SimulatedActivity>(state, owner);
  return b;
}

}  // namespace internal

SimulatedDevice::SimulatedDevice() : SimulatedDevice(Config{}) {}

namespace {

SimulatedDevice::Config Clamped(SimulatedDevice::Config c) {
  constexpr uint32_t kMaxMarkers = 1 << 16;  // the session's side rings hold this many
  c.max_markers = std::clamp<uint32_t>(c.max_markers, 1, kMaxMarkers);
  c.initial_markers = std::clamp<uint32_t>(c.initial_markers, 1, c.max_markers);
  return c;
}

}  // namespace

SimulatedDevice::SimulatedDevice(Config config)
    : state_(std::make_shared<internal::SimState>(Clamped(config))) {}

SimulatedDevice::~SimulatedDevice() = default;

void SimulatedDevice::Launch(int64_t duration_ns, uint64_t stream, std::string_view name) {
  state_->Enqueue(internal::ActivityKind::kKernel, duration_ns, stream, 0, false,
                  name.empty() ? internal::KernelClass::kOther : internal::ClassifyKernel(name),
                  internal::InternKernelName(name));
}

void SimulatedDevice::LaunchCopy(Copy kind, uint64_t bytes, int64_t duration_ns, bool pageable,
                                 uint64_t stream) {
  const internal::ActivityKind k = kind == Copy::kHostToDevice ? internal::ActivityKind::kMemcpyH2D
                                   : kind == Copy::kDeviceToHost
                                       ? internal::ActivityKind::kMemcpyD2H
                                       : internal::ActivityKind::kMemcpyOther;
  state_->Enqueue(k, duration_ns, stream, bytes, pageable);
}

void SimulatedDevice::LaunchMemset(uint64_t bytes, int64_t duration_ns, uint64_t stream) {
  state_->Enqueue(internal::ActivityKind::kMemset, duration_ns, stream, bytes, false);
}

void internal::SimState::ReportMemory(int device) {
  if (memory_inbox == nullptr) return;
  const Memory& m = memory[device];
  internal::MemorySample s;
  s.host_ns = Now();
  s.stats.device = device;
  s.stats.allocated_bytes = static_cast<double>(m.allocated);
  s.stats.reserved_bytes = static_cast<double>(m.reserved);
  s.stats.peak_allocated_bytes = static_cast<double>(m.peak_allocated);
  s.stats.peak_reserved_bytes = static_cast<double>(m.peak_reserved);
  s.stats.alloc_retries = m.retries;
  s.stats.ooms = m.ooms;
  s.stats.total_bytes = static_cast<double>(config.memory_bytes);
  memory_inbox->Push(s);
}

uint64_t SimulatedDevice::Allocate(uint64_t bytes, int device) {
  internal::SimState& st = *state_;
  internal::SimState::Memory& m = st.memory[device];
  const uint64_t unit = std::max<uint64_t>(1, st.config.memory_block_bytes);
  const uint64_t size = std::max<uint64_t>(1, (bytes + unit - 1) / unit) * unit;
  uint64_t id = 0;
  if (auto it = m.cache.find(size); it != m.cache.end()) {
    id = it->second;
    m.live.emplace(id, it->first);
    m.allocated += it->first;
    m.cache.erase(it);
  } else {
    if (m.reserved + size > st.config.memory_bytes && !m.cache.empty()) {
      ++m.retries;  // free the cache, then try again
      for (const auto& [block_size, block] : m.cache) m.reserved -= block_size;
      m.cache.clear();
    }
    if (m.reserved + size > st.config.memory_bytes) {
      ++m.ooms;
      st.ReportMemory(device);
      return 0;
    }
    id = st.next_block++;
    m.live.emplace(id, size);
    m.allocated += size;
    m.reserved += size;
  }
  m.peak_allocated = std::max(m.peak_allocated, m.allocated);
  m.peak_reserved = std::max(m.peak_reserved, m.reserved);
  st.ReportMemory(device);
  return id;
}

void SimulatedDevice::Free(uint64_t block, int device) {
  internal::SimState& st = *state_;
  internal::SimState::Memory& m = st.memory[device];
  const auto it = m.live.find(block);
  if (it == m.live.end()) return;
  m.allocated -= it->second;
  m.cache.emplace(it->second, block);
  m.live.erase(it);
  st.ReportMemory(device);
}

void SimulatedDevice::EmptyCache(int device) {
  internal::SimState& st = *state_;
  internal::SimState::Memory& m = st.memory[device];
  for (const auto& [size, block] : m.cache) m.reserved -= size;
  m.cache.clear();
  st.ReportMemory(device);
}

int64_t SimulatedDevice::Synchronize(uint64_t stream) {
  const int64_t now = state_->Now();
  const auto it = state_->busy_until.find(stream);
  const int64_t wait = it != state_->busy_until.end() ? std::max<int64_t>(0, it->second - now) : 0;
  if (state_->config.activity) {
    internal::DeviceInterval sync;
    sync.begin_ns = now;
    sync.end_ns = now + wait;
    sync.device = static_cast<uint32_t>(state_->DeviceOf(stream));
    sync.stream = static_cast<uint32_t>(stream);
    sync.kind = internal::ActivityKind::kSync;
    state_->AddActivity(sync);
  }
  return wait;
}

int64_t SimulatedDevice::activity_dropped() const { return state_->activity_dropped.load(); }

void SimulatedDevice::PlaceStream(uint64_t stream, int device) {
  state_->stream_device[stream] = std::max(0, device);
}

void SimulatedDevice::InjectFault(Fault fault) { state_->fault.store(fault); }

int64_t SimulatedDevice::BusyBetween(int64_t begin_ns, int64_t end_ns, uint64_t stream) const {
  const auto it = state_->kernels.find(stream);
  if (it == state_->kernels.end()) return 0;
  int64_t busy = 0;  // kernels on one stream never overlap
  for (const internal::SimKernel& k : it->second) {
    busy += std::max<int64_t>(0, std::min(end_ns, k.end_ns) - std::max(begin_ns, k.begin_ns));
  }
  return busy;
}

int64_t SimulatedDevice::DeviceBusyBetween(int64_t begin_ns, int64_t end_ns, int device) const {
  // Kernels of the device's streams may overlap: merge them.
  std::vector<internal::SimKernel> ks;
  for (const auto& [stream, kernels] : state_->kernels) {
    if (state_->DeviceOf(stream) != device) continue;
    for (const internal::SimKernel& k : kernels) {
      const int64_t b = std::max(begin_ns, k.begin_ns);
      const int64_t e = std::min(end_ns, k.end_ns);
      if (e > b) ks.push_back({b, e});
    }
  }
  std::sort(ks.begin(), ks.end(),
            [](const auto& a, const auto& b) { return a.begin_ns < b.begin_ns; });
  int64_t busy = 0;
  int64_t cursor = begin_ns;
  for (const internal::SimKernel& k : ks) {
    const int64_t b = std::max(cursor, k.begin_ns);
    if (k.end_ns > b) busy += k.end_ns - b;
    cursor = std::max(cursor, k.end_ns);
  }
  return busy;
}

int64_t SimulatedDevice::live_markers() const {
  return state_->recorded.load() - state_->released.load();
}

int64_t SimulatedDevice::markers_recorded() const { return state_->recorded.load(); }

uint32_t SimulatedDevice::markers_created() const { return state_->pool.created(); }

bool SimulationRequested() { return internal::EnvFlag("GPUSCOPE_SIMULATE", false); }

}  // namespace gpuscope
