#include "backends/cuda/cuda_driver_timer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

// The driver's types and entry points from its own headers; the library is
// still only dlopen()ed, never linked.
#include <cuda.h>
#include <cudaTypedefs.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/cuda/lane_table.h"
#include "backends/cuda/marker_pool.h"
#include "backends/host/clock.h"
#include "backends/vendor_status.h"
#include "base/dynlib.h"
#include "base/log.h"
#include "base/spsc_queue.h"

namespace gpuscope::internal {
namespace {

// The entry points, each typed by cudaTypedefs.h's PFN_<name>_v<version> for
// the exact symbol bound below, not by decltype(&cuX): cuda.h maps names
// onto other entry points (cuCtxCreate is cuCtxCreate_v4, with another
// signature; cuEventRecord becomes cuEventRecord_ptsz when per-thread
// default streams are on), so decltype would follow the header's choice,
// not the symbol looked up. Where a _v2 is bound, the older name is the
// fallback for older drivers, with the same signature.
struct Driver {
  PFN_cuDriverGetVersion_v2020 DriverGetVersion = nullptr;
  PFN_cuGetErrorName_v6000 GetErrorName = nullptr;
  PFN_cuCtxGetCurrent_v4000 CtxGetCurrent = nullptr;
  PFN_cuCtxPushCurrent_v4000 CtxPushCurrent = nullptr;
  PFN_cuCtxPopCurrent_v4000 CtxPopCurrent = nullptr;
  PFN_cuCtxGetDevice_v2000 CtxGetDevice = nullptr;
  PFN_cuStreamGetCtx_v9020 StreamGetCtx = nullptr;
  PFN_cuEventCreate_v2000 EventCreate = nullptr;
  PFN_cuEventDestroy_v4000 EventDestroy = nullptr;
  PFN_cuEventRecord_v2000 EventRecord = nullptr;
  PFN_cuEventQuery_v2000 EventQuery = nullptr;
  PFN_cuEventElapsedTime_v2000 EventElapsedTime = nullptr;
  PFN_cuStreamCreate_v2000 StreamCreate = nullptr;
  PFN_cuStreamDestroy_v4000 StreamDestroy = nullptr;
  PFN_cuDeviceGetCount_v2000 DeviceGetCount = nullptr;
  PFN_cuDeviceGet_v2000 DeviceGet = nullptr;
  PFN_cuDevicePrimaryCtxGetState_v7000 DevicePrimaryCtxGetState = nullptr;
  PFN_cuDeviceGetPCIBusId_v4010 DeviceGetPCIBusId = nullptr;
  PFN_cuDeviceGetName_v2000 DeviceGetName = nullptr;  // optional: only the device's name needs it
};
#if CUDA_VERSION >= 12080  // the header has cuEventElapsedTime_v2, bound first: the same signature
static_assert(std::is_same_v<PFN_cuEventElapsedTime_v12080, PFN_cuEventElapsedTime_v2000>);
#endif

absl::StatusOr<Driver> BindDriver(const DynLib& lib) {
  Driver d;
  for (absl::Status s :
       {lib.Bind(&d.DriverGetVersion, {"cuDriverGetVersion"}),
        lib.Bind(&d.GetErrorName, {"cuGetErrorName"}),
        lib.Bind(&d.CtxGetCurrent, {"cuCtxGetCurrent"}),
        lib.Bind(&d.CtxPushCurrent, {"cuCtxPushCurrent_v2", "cuCtxPushCurrent"}),
        lib.Bind(&d.CtxPopCurrent, {"cuCtxPopCurrent_v2", "cuCtxPopCurrent"}),
        lib.Bind(&d.CtxGetDevice, {"cuCtxGetDevice"}),
        lib.Bind(&d.StreamGetCtx, {"cuStreamGetCtx"}), lib.Bind(&d.EventCreate, {"cuEventCreate"}),
        lib.Bind(&d.EventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"}),
        lib.Bind(&d.EventRecord, {"cuEventRecord"}), lib.Bind(&d.EventQuery, {"cuEventQuery"}),
        lib.Bind(&d.EventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}),
        lib.Bind(&d.StreamCreate, {"cuStreamCreate"}),
        lib.Bind(&d.StreamDestroy, {"cuStreamDestroy_v2", "cuStreamDestroy"}),
        lib.Bind(&d.DeviceGetCount, {"cuDeviceGetCount"}), lib.Bind(&d.DeviceGet, {"cuDeviceGet"}),
        lib.Bind(&d.DevicePrimaryCtxGetState, {"cuDevicePrimaryCtxGetState"}),
        lib.Bind(&d.DeviceGetPCIBusId, {"cuDeviceGetPCIBusId"})}) {
    if (!s.ok()) return s;
  }
  (void)lib.Bind(&d.DeviceGetName, {"cuDeviceGetName"});
  return d;
}

// The process's driver, loaded once and never unloaded.
absl::StatusOr<const Driver*> LoadDriver() {
  static const absl::StatusOr<const Driver*>* loaded = [] {
    auto* result = new absl::StatusOr<const Driver*>(absl::UnknownError(""));
    absl::StatusOr<DynLib> lib = DynLib::Open(CudaDriverLibraryName());
    if (!lib.ok()) {
      *result = lib.status();
      return result;
    }
    absl::StatusOr<Driver> driver = BindDriver(*lib);
    if (!driver.ok()) {
      *result = driver.status();
      return result;
    }
    lib->Leak();
    *result = new Driver(*driver);
    return result;
  }();
  return *loaded;
}

// The driver's name for `r` ("CUDA_ERROR_NOT_READY"), or its number when the
// driver cannot name it.
std::string CudaErrorName(const Driver& d, CUresult r) {
  const char* name = nullptr;
  if (d.GetErrorName(r, &name) == CUDA_SUCCESS && name != nullptr) return name;
  return UnnamedVendorError("CUDA", r);
}

// Every driver call that can fail goes through GPUSCOPE_CU_CALL, in the
// convention of backends/vendor_status.h.
absl::Status CuStatus(const Driver& d, CUresult r, const char* call, const char* file, int line) {
  if (r == CUDA_SUCCESS) return absl::OkStatus();
  return VendorCallError(absl::StatusCode::kInternal, call, CudaErrorName(d, r), "", file, line);
}

// GPUSCOPE_CU_CALL(d, EventQuery(ev)) calls d.EventQuery(ev), reported as
// "cuEventQuery(ev) failed: CUDA_ERROR_... at cuda_driver_timer.cc:<line>".
#define GPUSCOPE_CU_CALL(driver, call) \
  ::gpuscope::internal::CuStatus((driver), (driver).call, "cu" #call, __FILE__, __LINE__)

struct CudaSlot {
  CUevent event = nullptr;
  uint16_t lane = 0;  // written by the recording thread at Record()
};

constexpr uint32_t kInitialEvents = 256;
constexpr uint32_t kMaxEvents = 1 << 15;
constexpr int kMaxContexts = 8;
constexpr int kSlotBits = 16;  // a marker is (context index << 16) | event index
static_assert(kMaxEvents <= (1u << kSlotBits));
constexpr int64_t kRecalibrateNs = 10'000'000'000;  // drift: refresh every 10 s
constexpr int64_t kCalibrationTimeoutNs = 20'000'000;

// The legacy (0 and 1) and per-thread (2) default streams: their handles
// mean "the current context's".
bool IsDefaultStream(StreamHandle stream) { return stream <= 2; }

// One context the recording thread marks streams of: its event pool, and a
// private stream and events that map its device's clock onto the host's.
struct ContextTimer {
  explicit ContextTimer(CUcontext c) : ctx(c), pool(kMaxEvents) {}

  const CUcontext ctx;
  MarkerPool<CudaSlot> pool;
  std::atomic<int> device{-1};
  // Background side.
  CUstream stream = nullptr;
  CUevent calib_event = nullptr;
  CUevent spare_event = nullptr;
  int64_t calib_host_ns = 0;
  int64_t calib_taken_ns = 0;
  int64_t accuracy_ns = 0;
};

class CudaDriverTimer final : public DeviceTimer {
 public:
  CudaDriverTimer() : failed_(kMaxEvents) {}

  absl::string_view name() const override { return "CUDA events"; }

  // Never calls cuInit: initializing CUDA is the framework's decision (a
  // process that initialized CUDA cannot use it in children it forks, which
  // DataLoader workers are). Until a stream's context exists (and
  // cuCtxGetCurrent answers NOT_INITIALIZED before anyone initialized CUDA),
  // scopes on it carry no markers.
  absl::Status Start() override {
    absl::StatusOr<const Driver*> d = LoadDriver();
    if (!d.ok()) return d.status();
    d_ = *d;
    int version = 0;
    return GPUSCOPE_CU_CALL(*d_, DriverGetVersion(&version));
  }

  uint32_t Record(StreamHandle stream) noexcept override {
    const CUcontext ctx = ContextOf(stream);
    if (ctx == nullptr) return kNoEvent;
    const int index = ContextIndex(ctx);
    if (index < 0) return kNoEvent;
    ContextTimer* c = armed_[static_cast<size_t>(index)].load(std::memory_order_acquire);
    if (c == nullptr) return kNoEvent;  // the background side arms it at its next pass
    const uint16_t lane = lanes_.Find(reinterpret_cast<uint64_t>(ctx), stream);
    if (lane == LaneTable::kNoLane) return kNoEvent;
    const uint32_t id = c->pool.Acquire();
    if (id == kNoEvent) return kNoEvent;
    c->pool[id].lane = lane;
    const uint32_t slot = (static_cast<uint32_t>(index) << kSlotBits) | id;
    const CUresult r = d_->EventRecord(c->pool[id].event, reinterpret_cast<CUstream>(stream));
    if (r != CUDA_SUCCESS) {
      last_record_error_.store(r, std::memory_order_relaxed);
      ForgetStream(stream);   // a stale handle (destroyed, reused elsewhere): ask again next time
      failed_.TryPush(slot);  // back to the pool through the background side
      return kNoEvent;
    }
    recorded_.store(recorded_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return slot;
  }

  uint16_t LaneOf(uint32_t slot) const override { return Pool(slot)[Index(slot)].lane; }

  int LaneDevice(uint16_t lane) const override {
    const auto ctx = reinterpret_cast<CUcontext>(lanes_.context(lane));
    for (const auto& c : contexts_) {
      if (c != nullptr && c->ctx == ctx) return c->device.load(std::memory_order_relaxed);
    }
    return -1;
  }

  MarkerState Query(uint32_t slot, int64_t* host_ns) override {
    if (!error_.ok()) return MarkerState::kLost;
    ContextTimer& c = *contexts_[slot >> kSlotBits];
    ScopedContext in(*d_, c.ctx);
    if (!in.ok()) {
      error_ = in.status();
      return MarkerState::kLost;
    }
    const CUevent ev = c.pool[Index(slot)].event;
    const CUresult r = d_->EventQuery(ev);
    if (r == CUDA_ERROR_NOT_READY) return MarkerState::kPending;
    if (r != CUDA_SUCCESS) {
      error_ = GPUSCOPE_CU_CALL(*d_, EventQuery(ev));
      return MarkerState::kLost;
    }
    float ms = 0;
    if (absl::Status s = GPUSCOPE_CU_CALL(*d_, EventElapsedTime(&ms, c.calib_event, ev)); !s.ok()) {
      error_ = s;
      return MarkerState::kLost;
    }
    *host_ns = c.calib_host_ns + static_cast<int64_t>(std::llround(static_cast<double>(ms) * 1e6));
    return MarkerState::kComplete;
  }

  void Release(uint32_t slot) override { Pool(slot).Release(Index(slot)); }

  absl::Status Maintain() override {
    if (!error_.ok()) return error_;
    // Contexts the recording thread met since the last pass.
    for (size_t i = 0; i < contexts_.size(); ++i) {
      if (contexts_[i] != nullptr) continue;
      const CUcontext ctx = noted_[i].load(std::memory_order_acquire);
      if (ctx == nullptr) break;
      contexts_[i] = std::make_unique<ContextTimer>(ctx);
      error_ = Arm(*contexts_[i]);
      if (!error_.ok()) return error_;
      armed_[i].store(contexts_[i].get(), std::memory_order_release);
    }
    for (const auto& c : contexts_) {
      if (c == nullptr) break;
      ScopedContext in(*d_, c->ctx);
      if (!in.ok()) {
        error_ = in.status();
        return error_;
      }
      // A sticky error (an illegal address, a destroyed context) fails every
      // call from then on: probe with the calibration event.
      if (const CUresult r = d_->EventQuery(c->calib_event);
          r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) {
        error_ = GPUSCOPE_CU_CALL(*d_, EventQuery(c->calib_event));
        return error_;
      }
      if (c->pool.free_approx() < c->pool.created() / 4 + 1) {
        c->pool.Grow(c->pool.created(),
                     [this](CudaSlot& slot) { return CreateEvent(&slot.event); });
      }
      if (const int64_t now = ReadMonotonicNs(); now - c->calib_taken_ns > kRecalibrateNs) {
        // A failed refresh keeps the previous calibration (drift is slow) and
        // is retried 10 s later, not at every pass.
        if (!Calibrate(*c).ok()) c->calib_taken_ns = now;
      }
    }
    // Records failing pass after pass, with none succeeding: the streams no
    // longer fit the events.
    uint64_t failures = 0;
    failed_.Drain([this, &failures](uint32_t slot) {
      Release(slot);
      ++failures;
    });
    const uint64_t recorded = recorded_.load(std::memory_order_relaxed);
    if (recorded != recorded_at_last_pass_) {
      failing_passes_ = 0;  // a record went through
    } else if (failures > 0) {
      ++failing_passes_;  // passes without scopes leave the count alone
    }
    recorded_at_last_pass_ = recorded;
    if (failing_passes_ >= 3) {
      error_ = absl::FailedPreconditionError(absl::StrCat(
          "cuEventRecord keeps failing (", CudaErrorName(*d_, last_record_error_.load()),
          "): was a stream destroyed, or its context?"));
      return error_;
    }
    return absl::OkStatus();
  }

  int64_t accuracy_ns() const override {
    int64_t worst = 0;
    for (const auto& c : contexts_) {
      if (c != nullptr) worst = std::max(worst, c->accuracy_ns);
    }
    return worst;
  }

  void Stop() override {
    // Whatever exists is destroyed, armed or not (an Arm() that failed half
    // way). Errors are ignored: at exit the driver may be shut down already.
    for (const auto& c : contexts_) {
      if (c == nullptr) continue;
      ScopedContext in(*d_, c->ctx);
      c->pool.ForEachCreated([this](CudaSlot& slot) {
        if (slot.event != nullptr) d_->EventDestroy(slot.event);
        slot.event = nullptr;
      });
      for (CUevent* e : {&c->calib_event, &c->spare_event}) {
        if (*e != nullptr) d_->EventDestroy(*e);
        *e = nullptr;
      }
      if (c->stream != nullptr) d_->StreamDestroy(c->stream);
      c->stream = nullptr;
    }
  }

 private:
  // Makes `ctx` current on this (background) thread for the scope's lifetime.
  class ScopedContext {
   public:
    ScopedContext(const Driver& d, CUcontext ctx) : d_(d) {
      status_ = GPUSCOPE_CU_CALL(d_, CtxPushCurrent(ctx));
      pushed_ = status_.ok();
    }
    ~ScopedContext() {
      CUcontext ignored = nullptr;
      if (pushed_) d_.CtxPopCurrent(&ignored);
    }
    bool ok() const { return status_.ok(); }
    const absl::Status& status() const { return status_; }

   private:
    const Driver& d_;
    bool pushed_ = false;
    absl::Status status_;
  };

  static uint32_t Index(uint32_t slot) { return slot & ((1u << kSlotBits) - 1); }
  MarkerPool<CudaSlot>& Pool(uint32_t slot) const { return contexts_[slot >> kSlotBits]->pool; }

  // Recording thread: the context `stream` belongs to, or null (CUDA not
  // initialized, no current context, a bad handle). A default stream's is
  // the current context; another stream's is asked once and remembered.
  CUcontext ContextOf(StreamHandle stream) noexcept {
    if (d_ == nullptr) return nullptr;
    CUcontext ctx = nullptr;
    if (IsDefaultStream(stream)) {
      return d_->CtxGetCurrent(&ctx) == CUDA_SUCCESS ? ctx : nullptr;
    }
    for (const StreamContext& known : stream_ctx_) {
      if (known.ctx != nullptr && known.stream == stream) return known.ctx;
    }
    if (d_->StreamGetCtx(reinterpret_cast<CUstream>(stream), &ctx) != CUDA_SUCCESS) return nullptr;
    stream_ctx_[next_stream_ctx_] = {stream, ctx};
    next_stream_ctx_ = (next_stream_ctx_ + 1) % stream_ctx_.size();
    return ctx;
  }
  void ForgetStream(StreamHandle stream) noexcept {
    for (StreamContext& known : stream_ctx_) {
      if (known.stream == stream) known = {};
    }
  }

  // Recording thread: the index of `ctx` among the contexts met so far; a
  // new one is handed to the background side to arm. -1 when kMaxContexts
  // are in use.
  int ContextIndex(CUcontext ctx) noexcept {
    for (int i = 0; i < contexts_met_; ++i) {
      if (met_[static_cast<size_t>(i)] == ctx) return i;
    }
    if (contexts_met_ == kMaxContexts) return -1;
    met_[static_cast<size_t>(contexts_met_)] = ctx;
    noted_[static_cast<size_t>(contexts_met_)].store(ctx, std::memory_order_release);
    return contexts_met_++;
  }

  bool CreateEvent(CUevent* e) { return d_->EventCreate(e, CU_EVENT_DEFAULT) == CUDA_SUCCESS; }

  absl::Status Arm(ContextTimer& c) {
    ScopedContext in(*d_, c.ctx);
    if (!in.ok()) return in.status();
    int device = -1;
    if (absl::Status s = GPUSCOPE_CU_CALL(*d_, CtxGetDevice(&device)); !s.ok()) return s;
    c.device.store(device, std::memory_order_relaxed);
    if (absl::Status s = GPUSCOPE_CU_CALL(*d_, StreamCreate(&c.stream, CU_STREAM_NON_BLOCKING));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = GPUSCOPE_CU_CALL(*d_, EventCreate(&c.calib_event, CU_EVENT_DEFAULT));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = GPUSCOPE_CU_CALL(*d_, EventCreate(&c.spare_event, CU_EVENT_DEFAULT));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = Calibrate(c); !s.ok()) return s;
    if (c.pool.Grow(kInitialEvents, [this](CudaSlot& slot) { return CreateEvent(&slot.event); }) ==
        0) {
      return absl::ResourceExhaustedError("cuEventCreate failed: no CUDA event could be created");
    }
    LogOnce(absl::StrCat("cuda-armed-", device), LogLevel::kInfo,
            absl::StrFormat("CUDA events armed on device %d (device-to-host mapping accurate to "
                            "%.1f us)",
                            device, static_cast<double>(c.accuracy_ns) / 1e3));
    return absl::OkStatus();
  }

  // Records the spare event on the private stream and polls it: the host
  // time at completion lies within the polling bracket. Context pushed.
  absl::Status Calibrate(ContextTimer& c) {
    const int64_t before = ReadMonotonicNs();
    if (absl::Status s = GPUSCOPE_CU_CALL(*d_, EventRecord(c.spare_event, c.stream)); !s.ok())
      return s;
    CUresult r = CUDA_ERROR_NOT_READY;
    int64_t after = before;
    while ((r = d_->EventQuery(c.spare_event)) == CUDA_ERROR_NOT_READY) {
      after = ReadMonotonicNs();
      if (after - before > kCalibrationTimeoutNs) {
        return absl::DeadlineExceededError("calibration event did not complete within 20 ms");
      }
    }
    if (r != CUDA_SUCCESS) return GPUSCOPE_CU_CALL(*d_, EventQuery(c.spare_event));
    after = ReadMonotonicNs();
    std::swap(c.calib_event, c.spare_event);
    c.calib_host_ns = before + (after - before) / 2;
    c.calib_taken_ns = after;
    c.accuracy_ns = (after - before) / 2 + 500;  // + cuEventElapsedTime's resolution
    return absl::OkStatus();
  }

  const Driver* d_ = nullptr;

  // Recording thread.
  struct StreamContext {
    StreamHandle stream = 0;
    CUcontext ctx = nullptr;
  };
  std::array<StreamContext, 8> stream_ctx_{};
  size_t next_stream_ctx_ = 0;
  std::array<CUcontext, kMaxContexts> met_{};
  int contexts_met_ = 0;
  std::atomic<uint64_t> recorded_{0};  // written by the recording thread only
  std::atomic<CUresult> last_record_error_{CUDA_SUCCESS};
  LaneTable lanes_;

  // Handed from the recording thread to the background side, and back.
  std::array<std::atomic<CUcontext>, kMaxContexts> noted_{};
  std::array<std::atomic<ContextTimer*>, kMaxContexts> armed_{};
  SpscQueue<uint32_t> failed_;  // slots whose cuEventRecord failed

  // Background side (under the session's aggregator lock). Entries are
  // created in order and live until the timer is destroyed.
  std::array<std::unique_ptr<ContextTimer>, kMaxContexts> contexts_;
  int failing_passes_ = 0;
  uint64_t recorded_at_last_pass_ = 0;
  absl::Status error_;
};

}  // namespace

std::string CudaDriverLibraryName() {
  const char* override_path = std::getenv("GPUSCOPE_LIBCUDA");
  return override_path != nullptr && override_path[0] != '\0' ? override_path : "libcuda.so.1";
}

std::unique_ptr<DeviceTimer> MakeCudaDriverTimer() { return std::make_unique<CudaDriverTimer>(); }

absl::Status CudaInitializedInProcess() {
  absl::StatusOr<const Driver*> d = LoadDriver();
  if (!d.ok()) return d.status();
  CUcontext ctx = nullptr;
  if ((*d)->CtxGetCurrent(&ctx) == CUDA_ERROR_NOT_INITIALIZED) {
    return absl::FailedPreconditionError(
        "CUDA was not initialized in this process when the session started (create the session "
        "after the framework has used the GPU, e.g. after model.cuda())");
  }
  return absl::OkStatus();
}

namespace {

// The devices whose primary context is active in this process (the ones the
// framework uses), in ordinal order. CUDA must be initialized.
absl::StatusOr<std::vector<CUdevice>> DevicesInUse(const Driver& d) {
  int count = 0;
  if (absl::Status s = GPUSCOPE_CU_CALL(d, DeviceGetCount(&count)); !s.ok()) return s;
  std::vector<CUdevice> devices;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    unsigned flags = 0;
    int active = 0;
    if (d.DeviceGet(&device, ordinal) == CUDA_SUCCESS &&
        d.DevicePrimaryCtxGetState(device, &flags, &active) == CUDA_SUCCESS && active != 0) {
      devices.push_back(device);
    }
  }
  return devices;
}

}  // namespace

absl::StatusOr<std::string> ProcessCudaDeviceName() {
  if (absl::Status ready = CudaInitializedInProcess(); !ready.ok()) return ready;
  const Driver& d = **LoadDriver();
  if (d.DeviceGetName == nullptr)
    return absl::UnimplementedError("the CUDA driver has no cuDeviceGetName");
  // This thread's context's device, else the first one in use.
  CUcontext ctx = nullptr;
  CUdevice device = 0;
  if (d.CtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr ||
      d.CtxGetDevice(&device) != CUDA_SUCCESS) {
    absl::StatusOr<std::vector<CUdevice>> in_use = DevicesInUse(d);
    if (!in_use.ok()) return in_use.status();
    if (in_use->empty()) return absl::NotFoundError("this process uses no CUDA device yet");
    device = in_use->front();
  }
  char name[256] = {0};
  if (absl::Status s = GPUSCOPE_CU_CALL(d, DeviceGetName(name, sizeof(name) - 1, device)); !s.ok())
    return s;
  return std::string(name);
}

absl::StatusOr<std::vector<std::string>> ProcessCudaDeviceBusIds() {
  if (absl::Status ready = CudaInitializedInProcess(); !ready.ok()) return ready;
  const Driver& d = **LoadDriver();
  absl::StatusOr<std::vector<CUdevice>> in_use = DevicesInUse(d);
  if (!in_use.ok()) return in_use.status();
  std::vector<std::string> ids;
  for (CUdevice device : *in_use) {
    char bus_id[32] = {0};
    if (d.DeviceGetPCIBusId(bus_id, sizeof(bus_id) - 1, device) == CUDA_SUCCESS)
      ids.emplace_back(bus_id);
  }
  return ids;
}

}  // namespace gpuscope::internal
