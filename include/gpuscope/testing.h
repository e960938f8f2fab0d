// File: gpuscope/testing.h
// -----------------------------------------------------------------------------
//
// A simulated GPU, so that every GPU code path of gpuscope runs (and is
// tested) on machines without one. It models streams on which kernels of
// given durations run in order (streams may be placed on other device
// ordinals, to model a process that drives several GPUs), and device markers (what CUDA events are
// to gpuscope) that complete when all work enqueued before them has run, exactly as an in-order
// CUDA stream completes events. Faults can be injected.
//
// Time comes from the session's clock (`Options::clock`, usually a
// `ManualClock`): a kernel launched at host time t on a stream that is busy
// until u runs from max(t, u) for its duration; a marker recorded at t
// completes at max(t, u) plus the configured latency.
//
// Example:
//
//   auto clock = std::make_shared<gpuscope::ManualClock>();
//   auto gpu = std::make_shared<gpuscope::SimulatedDevice>();
//   gpuscope::Session session(
//       gpuscope::Options{.clock = clock, .stream = 0, .simulated_device = gpu});
//   {
//     gpuscope::StepScope step(session);
//     { gpuscope::PhaseScope p(session, gpuscope::Phase::kData); clock->Advance(30'000'000); }
//     { gpuscope::PhaseScope p(session, gpuscope::Phase::kForward);
//       gpu->Launch(10'000'000);        // a 10 ms kernel
//       clock->Advance(10'000'000); }   // the host waits for it (a sync)
//   }
//   clock->Advance(1'000'000);
//   // session.Summarize(): source "events", gpu_idle_pct 75, idle_by_cause {"data": 75}

#ifndef GPUSCOPE_TESTING_H_
#define GPUSCOPE_TESTING_H_

#include <cstdint>
#include <memory>
#include <string_view>

namespace gpuscope {

namespace internal {
struct SimState;
class SimulatedDeviceAccess;
}  // namespace internal

// A SimulatedDevice serves one session (the first one created with it; any
// other falls back to host timing and says why), like a GPU context in use by
// one training loop.
class SimulatedDevice {
 public:
  struct Config {
    int64_t marker_latency_ns =
        0;  // a marker on an idle stream completes this long after it is recorded
    uint32_t initial_markers = 256;  // markers created when a session starts
    uint32_t max_markers = 1 << 16;  // the pool grows up to this (at most 65536)
    // Also deliver activity records (kernels, copies, memsets, syncs with
    // their times), as CUPTI does: sessions get source "cupti".
    bool activity = false;
    // Records the device holds between two drains; beyond it records are
    // dropped and counted, like a full CUPTI buffer pool.
    uint32_t activity_capacity = 1 << 20;
    // Each device's memory, and the unit its allocator reserves memory in
    // (a cached block is one allocation rounded up to it).
    uint64_t memory_bytes = uint64_t{80} << 30;
    uint64_t memory_block_bytes = uint64_t{2} << 20;
  };

  enum class Copy : uint8_t { kHostToDevice, kDeviceToHost, kDeviceToDevice };

  enum class Fault : uint8_t {
    kNone = 0,
    kNoDriver,          // sessions that start from now on find no driver: source "host"
    kStickyError,       // like CUDA_ERROR_ILLEGAL_ADDRESS: every marker is lost from now on
    kContextDestroyed,  // like CUDA_ERROR_CONTEXT_IS_DESTROYED
    kActivityRefused,   // sessions that start from now on cannot subscribe to activity
                        // (another profiler holds CUPTI): they fall back to events
  };

  SimulatedDevice();
  explicit SimulatedDevice(Config config);
  ~SimulatedDevice();

  SimulatedDevice(const SimulatedDevice&) = delete;
  SimulatedDevice& operator=(const SimulatedDevice&) = delete;

  // SimulatedDevice::Launch()
  //
  // Enqueues a kernel of `duration_ns` on `stream` at the session clock's
  // current time. Call it from the session's recording thread (where a
  // framework would launch kernels). Before a session attaches, the clock is
  // CLOCK_MONOTONIC. `name`, if given, is the kernel's name as CUPTI would
  // report it ("ampere_sgemm_128x64_nn"): activity records carry what it
  // says (an FP32 GEMM, an NCCL collective, ...), as real ones do.
  void Launch(int64_t duration_ns, uint64_t stream = 0, std::string_view name = {});

  // SimulatedDevice::LaunchCopy() / LaunchMemset()
  //
  // Enqueue a copy (`pageable`: from or to pageable host memory) or a memset
  // of `bytes` taking `duration_ns` on `stream`, as Launch() does a kernel.
  void LaunchCopy(Copy kind, uint64_t bytes, int64_t duration_ns, bool pageable = false,
                  uint64_t stream = 0);
  void LaunchMemset(uint64_t bytes, int64_t duration_ns, uint64_t stream = 0);

  // SimulatedDevice::Synchronize()
  //
  // The host blocks until `stream`'s work is done (an `.item()`, a
  // cudaStreamSynchronize): records the synchronization and returns how long
  // the host must wait, for the caller to advance its clock by.
  int64_t Synchronize(uint64_t stream = 0);

  // Activity records dropped because the device held activity_capacity.
  int64_t activity_dropped() const;

  // SimulatedDevice::Allocate() / Free() / EmptyCache()
  //
  // The process's caching allocator on device `device`, modelled after
  // PyTorch's: Allocate() reuses a cached block of its size (`bytes`
  // rounded up to Config::memory_block_bytes; blocks are not split or
  // merged, so a loop whose shapes vary fragments the cache), else reserves
  // a new block from the device; when
  // the device has no room it frees every cached block and tries again (an
  // allocation retry), and if it still has none it fails (an out-of-memory
  // error): Allocate() returns 0, else the block's id for Free(). Free()
  // returns a block to the cache (still reserved); EmptyCache() gives the
  // cache back to the device. Each call hands the session attached to the
  // device its allocator's numbers at the clock's time, as an allocator that
  // reports every change would (Session::RecordMemory()), with source
  // "simulated". Call them from the recording thread.
  uint64_t Allocate(uint64_t bytes, int device = 0);
  void Free(uint64_t block, int device = 0);
  void EmptyCache(int device = 0);

  // SimulatedDevice::PlaceStream()
  //
  // Puts `stream` on device ordinal `device` (every stream starts on device
  // 0), as a CUDA stream belongs to one device. Call it before the stream's
  // first marker or kernel, from the recording thread.
  void PlaceStream(uint64_t stream, int device);

  // SimulatedDevice::InjectFault()
  //
  // From now on the device behaves as `fault` says. Thread-safe.
  void InjectFault(Fault fault);

  // SimulatedDevice::BusyBetween()
  //
  // Ground truth for tests: nanoseconds of [begin_ns, end_ns) during which a
  // kernel ran on `stream`.
  int64_t BusyBetween(int64_t begin_ns, int64_t end_ns, uint64_t stream = 0) const;

  // SimulatedDevice::DeviceBusyBetween()
  //
  // Ground truth for tests: nanoseconds of [begin_ns, end_ns) during which a
  // kernel ran on any stream of device `device`.
  int64_t DeviceBusyBetween(int64_t begin_ns, int64_t end_ns, int device = 0) const;

  // Markers recorded and not yet released: 0 once every session using the
  // device has closed, or gpuscope leaked one.
  int64_t live_markers() const;
  int64_t markers_recorded() const;
  // Markers the pool holds (it grows when it runs low).
  uint32_t markers_created() const;

 private:
  friend class internal::SimulatedDeviceAccess;
  std::shared_ptr<internal::SimState> state_;
};

// SimulationRequested()
//
// Whether GPUSCOPE_SIMULATE asks every session of the process to run on a
// simulated device: 1, true, yes or on (any case). Unset, empty, 0, false,
// no and off leave it off; any other value is logged once and ignored.
// Sessions on a simulated device say so: `Summary::simulated`.
bool SimulationRequested();

}  // namespace gpuscope

#endif  // GPUSCOPE_TESTING_H_
