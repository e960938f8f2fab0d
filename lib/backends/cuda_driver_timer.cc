#include "backends/cuda_driver_timer.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/clock.h"
#include "backends/marker_pool.h"
#include "core/spsc_queue.h"
#include "util/dynlib.h"
#include "util/log.h"

namespace gpuscope::internal {
namespace {

// The driver API types and values used here, declared locally (values as in
// cuda.h of CUDA 12 and 13) so that building needs no CUDA header.
using CUresult = int;
struct CUctx_st;
using CUcontext = CUctx_st*;
struct CUevent_st;
using CUevent = CUevent_st*;
struct CUstream_st;
using CUstream = CUstream_st*;
constexpr CUresult kCudaSuccess = 0;
constexpr CUresult kCudaErrorNotReady = 600;
constexpr unsigned kEventDefault = 0;       // CU_EVENT_DEFAULT: timing enabled
constexpr unsigned kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING

struct Driver {
  CUresult (*DriverGetVersion)(int*) = nullptr;
  CUresult (*GetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*CtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*CtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*CtxPopCurrent)(CUcontext*) = nullptr;
  CUresult (*EventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*EventDestroy)(CUevent) = nullptr;
  CUresult (*EventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*EventQuery)(CUevent) = nullptr;
  CUresult (*EventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*StreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*StreamDestroy)(CUstream) = nullptr;
};

// Resolves one entry point (trying the versioned names cuda.h maps to first).
template <typename Fn>
absl::Status Bind(const DynLib& lib, Fn* out, std::initializer_list<const char*> names) {
  absl::StatusOr<Fn> fn = lib.Get<Fn>(names);
  if (!fn.ok()) return fn.status();
  *out = *fn;
  return absl::OkStatus();
}

absl::StatusOr<Driver> BindDriver(const DynLib& lib) {
  Driver d;
  for (absl::Status s :
       {Bind(lib, &d.DriverGetVersion, {"cuDriverGetVersion"}),
        Bind(lib, &d.GetErrorName, {"cuGetErrorName"}),
        Bind(lib, &d.CtxGetCurrent, {"cuCtxGetCurrent"}),
        Bind(lib, &d.CtxPushCurrent, {"cuCtxPushCurrent_v2", "cuCtxPushCurrent"}),
        Bind(lib, &d.CtxPopCurrent, {"cuCtxPopCurrent_v2", "cuCtxPopCurrent"}),
        Bind(lib, &d.EventCreate, {"cuEventCreate"}),
        Bind(lib, &d.EventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"}),
        Bind(lib, &d.EventRecord, {"cuEventRecord"}), Bind(lib, &d.EventQuery, {"cuEventQuery"}),
        Bind(lib, &d.EventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}),
        Bind(lib, &d.StreamCreate, {"cuStreamCreate"}),
        Bind(lib, &d.StreamDestroy, {"cuStreamDestroy_v2", "cuStreamDestroy"})}) {
    if (!s.ok()) return s;
  }
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

std::string ErrorName(const Driver& d, CUresult r) {
  const char* name = nullptr;
  if (d.GetErrorName(r, &name) == kCudaSuccess && name != nullptr) return name;
  return absl::StrCat("CUDA error ", r);
}

// Every driver call that can fail goes through here: a Status naming the
// call, the error and where (house rule 5).
absl::Status CuStatus(const Driver& d, CUresult r, const char* call, const char* file, int line) {
  if (r == kCudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s failed: %s at %s:%d", call, ErrorName(d, r), file, line));
}

// GPUSCOPE_CU_CALL(d, EventQuery(ev)) calls d.EventQuery(ev), reported as
// "cuEventQuery(ev) failed: CUDA_ERROR_... at file:line".
#define GPUSCOPE_CU_CALL(driver, call) \
  ::gpuscope::internal::CuStatus((driver), (driver).call, "cu" #call, __FILE__, __LINE__)

struct CudaSlot {
  CUevent event = nullptr;
};

constexpr uint32_t kInitialEvents = 256;
constexpr uint32_t kMaxEvents = 1 << 15;
constexpr int64_t kRecalibrateNs = 10'000'000'000;  // drift: refresh every 10 s
constexpr int64_t kCalibrationTimeoutNs = 20'000'000;

class CudaDriverTimer final : public DeviceTimer {
 public:
  CudaDriverTimer() : pool_(kMaxEvents), failed_(kMaxEvents) {}

  absl::string_view name() const override { return "CUDA events"; }

  // Never calls cuInit: initializing CUDA is the framework's decision (a
  // process that initialized CUDA cannot use it in children it forks, which
  // DataLoader workers are). Until the recording thread has a context (and
  // cuCtxGetCurrent answers NOT_INITIALIZED before anyone initialized CUDA),
  // scopes carry no markers.
  absl::Status Start() override {
    absl::StatusOr<const Driver*> d = LoadDriver();
    if (!d.ok()) return d.status();
    d_ = *d;
    int version = 0;
    return GPUSCOPE_CU_CALL(*d_, DriverGetVersion(&version));
  }

  uint32_t Record(StreamHandle stream) noexcept override {
    if (!armed_.load(std::memory_order_acquire)) {
      NoteContext();
      return kNoEvent;
    }
    const uint32_t id = pool_.Acquire();
    if (id == kNoEvent) return kNoEvent;
    const CUresult r = d_->EventRecord(pool_[id].event, reinterpret_cast<CUstream>(stream));
    if (r != kCudaSuccess) {
      last_record_error_.store(r, std::memory_order_relaxed);
      failed_.TryPush(id);  // back to the pool through the background side
      return kNoEvent;
    }
    recorded_.store(recorded_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return id;
  }

  MarkerState Query(uint32_t slot, int64_t* host_ns) override {
    if (!error_.ok()) return MarkerState::kLost;
    ScopedContext in(*this);
    if (!in.ok()) {
      error_ = in.status();
      return MarkerState::kLost;
    }
    const CUevent ev = pool_[slot].event;
    const CUresult r = d_->EventQuery(ev);
    if (r == kCudaErrorNotReady) return MarkerState::kPending;
    if (r != kCudaSuccess) {
      error_ = GPUSCOPE_CU_CALL(*d_, EventQuery(ev));
      return MarkerState::kLost;
    }
    float ms = 0;
    if (absl::Status s = GPUSCOPE_CU_CALL(*d_, EventElapsedTime(&ms, calib_event_, ev)); !s.ok()) {
      error_ = s;
      return MarkerState::kLost;
    }
    *host_ns = calib_host_ns_ + static_cast<int64_t>(std::llround(static_cast<double>(ms) * 1e6));
    return MarkerState::kComplete;
  }

  void Release(uint32_t slot) override { pool_.Release(slot); }

  absl::Status Maintain() override {
    if (!error_.ok()) return error_;
    if (!armed_.load(std::memory_order_acquire)) {
      const CUcontext ctx = context_.load(std::memory_order_acquire);
      if (ctx == nullptr) return absl::OkStatus();  // CUDA not in use on the recording thread yet
      error_ = Arm(ctx);
      return error_;
    }
    ScopedContext in(*this);
    if (!in.ok()) {
      error_ = in.status();
      return error_;
    }
    // A sticky error (an illegal address, a destroyed context) fails every
    // call from then on: probe with the calibration event.
    if (const CUresult r = d_->EventQuery(calib_event_); r != kCudaSuccess && r != kCudaErrorNotReady) {
      error_ = GPUSCOPE_CU_CALL(*d_, EventQuery(calib_event_));
      return error_;
    }
    // Records failing pass after pass, with none succeeding: the recording
    // thread's context or stream no longer fits the events.
    uint64_t failures = 0;
    failed_.Drain([this, &failures](uint32_t id) {
      pool_.Release(id);
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
          "cuEventRecord keeps failing (", ErrorName(*d_, last_record_error_.load()),
          "): did the recording thread switch device or context, or does the stream belong to "
          "another context?"));
      return error_;
    }
    if (pool_.free_approx() < pool_.created() / 4 + 1) {
      pool_.Grow(pool_.created(), [this](CudaSlot& slot) { return CreateEvent(&slot.event); });
    }
    if (const int64_t now = ReadMonotonicNs(); now - calib_taken_ns_ > kRecalibrateNs) {
      // A failed refresh keeps the previous calibration (drift is slow) and
      // is retried 10 s later, not at every pass.
      if (!Calibrate().ok()) calib_taken_ns_ = now;
    }
    return absl::OkStatus();
  }

  int64_t accuracy_ns() const override { return accuracy_ns_; }


  void Stop() override {
    if (ctx_ == nullptr) return;  // never armed: nothing was created
    // Whatever exists is destroyed, armed or not (an Arm() that failed half
    // way). Errors are ignored: at exit the driver may be shut down already.
    ScopedContext in(*this);
    pool_.ForEachCreated([this](CudaSlot& slot) {
      if (slot.event != nullptr) d_->EventDestroy(slot.event);
      slot.event = nullptr;
    });
    for (CUevent* e : {&calib_event_, &spare_event_}) {
      if (*e != nullptr) d_->EventDestroy(*e);
      *e = nullptr;
    }
    if (stream_ != nullptr) d_->StreamDestroy(stream_);
    stream_ = nullptr;
  }

 private:
  // Makes the session's context current on this (background) thread for the
  // scope's lifetime.
  class ScopedContext {
   public:
    explicit ScopedContext(CudaDriverTimer& t) : t_(t) {
      if (t_.ctx_ != nullptr) status_ = GPUSCOPE_CU_CALL(*t_.d_, CtxPushCurrent(t_.ctx_));
      pushed_ = t_.ctx_ != nullptr && status_.ok();
    }
    ~ScopedContext() {
      CUcontext ignored = nullptr;
      if (pushed_) t_.d_->CtxPopCurrent(&ignored);
    }
    bool ok() const { return status_.ok(); }
    const absl::Status& status() const { return status_; }

   private:
    CudaDriverTimer& t_;
    bool pushed_ = false;
    absl::Status status_;
  };

  // Recording thread, until armed: remembers the context current there.
  void NoteContext() noexcept {
    if (context_noted_ || d_ == nullptr) return;
    CUcontext ctx = nullptr;
    if (d_->CtxGetCurrent(&ctx) == kCudaSuccess && ctx != nullptr) {
      context_.store(ctx, std::memory_order_release);
      context_noted_ = true;
    }
  }

  bool CreateEvent(CUevent* e) { return d_->EventCreate(e, kEventDefault) == kCudaSuccess; }

  absl::Status Arm(CUcontext ctx) {
    ctx_ = ctx;
    ScopedContext in(*this);
    if (!in.ok()) return in.status();
    if (absl::Status s = GPUSCOPE_CU_CALL(*d_, StreamCreate(&stream_, kStreamNonBlocking)); !s.ok()) {
      return s;
    }
    if (absl::Status s = GPUSCOPE_CU_CALL(*d_, EventCreate(&calib_event_, kEventDefault)); !s.ok()) {
      return s;
    }
    if (absl::Status s = GPUSCOPE_CU_CALL(*d_, EventCreate(&spare_event_, kEventDefault)); !s.ok()) {
      return s;
    }
    if (absl::Status s = Calibrate(); !s.ok()) return s;
    if (pool_.Grow(kInitialEvents, [this](CudaSlot& slot) { return CreateEvent(&slot.event); }) == 0) {
      return absl::ResourceExhaustedError("cuEventCreate failed: no CUDA event could be created");
    }
    armed_.store(true, std::memory_order_release);
    LogOnce("cuda-armed", LogLevel::kInfo,
            absl::StrFormat("CUDA events armed in the recording thread's context (device-to-host "
                            "mapping accurate to %.1f us)",
                            static_cast<double>(accuracy_ns_) / 1e3));
    return absl::OkStatus();
  }

  // Records the spare event on the private stream and polls it: the host
  // time at completion lies within the polling bracket. Context pushed.
  absl::Status Calibrate() {
    const int64_t before = ReadMonotonicNs();
    if (absl::Status s = GPUSCOPE_CU_CALL(*d_, EventRecord(spare_event_, stream_)); !s.ok()) return s;
    CUresult r = kCudaErrorNotReady;
    int64_t after = before;
    while ((r = d_->EventQuery(spare_event_)) == kCudaErrorNotReady) {
      after = ReadMonotonicNs();
      if (after - before > kCalibrationTimeoutNs) {
        return absl::DeadlineExceededError("calibration event did not complete within 20 ms");
      }
    }
    if (r != kCudaSuccess) return GPUSCOPE_CU_CALL(*d_, EventQuery(spare_event_));
    after = ReadMonotonicNs();
    std::swap(calib_event_, spare_event_);
    calib_host_ns_ = before + (after - before) / 2;
    calib_taken_ns_ = after;
    accuracy_ns_ = (after - before) / 2 + 500;  // + cuEventElapsedTime's resolution
    return absl::OkStatus();
  }

  const Driver* d_ = nullptr;
  std::atomic<bool> armed_{false};

  // Recording thread.
  bool context_noted_ = false;
  std::atomic<uint64_t> recorded_{0};  // written by the recording thread only
  std::atomic<CUresult> last_record_error_{kCudaSuccess};

  // Handed from the recording thread to the background side.
  std::atomic<CUcontext> context_{nullptr};
  MarkerPool<CudaSlot> pool_;
  SpscQueue<uint32_t> failed_;  // slots whose cuEventRecord failed

  // Background side (under the session's aggregator lock).
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent calib_event_ = nullptr;
  CUevent spare_event_ = nullptr;
  int64_t calib_host_ns_ = 0;
  int64_t calib_taken_ns_ = 0;
  int64_t accuracy_ns_ = 0;
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

}  // namespace gpuscope::internal
