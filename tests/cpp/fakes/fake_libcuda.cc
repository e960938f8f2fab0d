// A fake CUDA driver (the dozen entry points gpuscope's CUDA events timer
// uses), loaded by the timer through GPUSCOPE_LIBCUDA exactly as it loads
// libcuda.so.1, so CI runs the real timer's code without a GPU.
//
// Model: one context per device (device 0's made by
// fake_cuda_create_context(), others by fake_cuda_set_device()), in-order
// streams that belong to one context (handles 0, 1 and 2, the legacy and
// per-thread default streams, mean the current context's), kernels launched
// by the test with fake_cuda_launch(), events that belong to the context
// current at creation and complete when all work queued on their stream
// before them has run, timed on CLOCK_MONOTONIC. Recording an event on
// another context's stream fails with CUDA_ERROR_INVALID_HANDLE, as on a real
// GPU. CUDA is uninitialized (cuCtxGetCurrent answers
// CUDA_ERROR_NOT_INITIALIZED) until the test creates a context, which is then
// current on the creating thread only (as torch's is on the training thread);
// other threads must push it, and calls that need a context fail without one.
// Sticky errors, record failures and version failures can be injected; cuInit
// calls and push/pop balance are counted. Entry points, handles and codes
// are cuda.h's: a context is the fake's CUctx_st, an event its CUevent_st,
// and a stream handle a number (0, 1, 2, then one per created stream).

#include <cuda.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "fakes/fake_cuda.h"  // the test controls defined here

// The driver's opaque handles, given a body here.
struct CUctx_st {
  int device = 0;
  bool created = false;  // the device's primary context is active
  char bus_id[16] = "";  // "" : the default, 0000:<0x17 + 0x10 * device>:00.0
  char name[64] = "";    // "" : the default, "NVIDIA H100 80GB HBM3"
};

struct CUevent_st {
  CUctx_st* ctx = nullptr;
  int64_t completion_ns = -1;  // -1: never recorded
};

namespace {

using Context = CUctx_st;
using Event = CUevent_st;
constexpr int kMaxDevices = 4;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct State {
  std::mutex mu;
  Context contexts[kMaxDevices];
  // (context, stream handle) -> end of queued work.
  std::map<std::pair<Context*, uintptr_t>, int64_t> busy_until;
  std::map<uintptr_t, Context*> stream_ctx;  // created streams
  std::atomic<CUresult> version_result{CUDA_SUCCESS};
  std::atomic<CUresult> sticky{CUDA_SUCCESS};
  std::atomic<CUresult> record_failure{CUDA_SUCCESS};
  std::atomic<bool> initialized{false};
  std::atomic<int> init_calls{0};
  std::atomic<int> push_balance{0};
  std::atomic<int64_t> live_events{0};
  std::atomic<int64_t> records{0};
  std::atomic<int64_t> wrong_context_records{0};
  uintptr_t next_stream = 0x1000;
};

State& S() {
  static State* s = new State();
  return *s;
}

thread_local std::vector<Context*> pushed;  // cuCtxPushCurrent's stack
thread_local Context* current = nullptr;    // the thread's own (cudaSetDevice)

Context* Current() { return !pushed.empty() ? pushed.back() : current; }
bool HasContext() { return Current() != nullptr; }
bool IsDefaultStream(uintptr_t stream) { return stream <= 2; }
uintptr_t Handle(CUstream stream) { return reinterpret_cast<uintptr_t>(stream); }

// The context `stream` belongs to (the current one for a default stream), or
// null when there is none.
Context* StreamContext(uintptr_t stream) {
  if (IsDefaultStream(stream)) return Current();
  const auto it = S().stream_ctx.find(stream);
  return it != S().stream_ctx.end() ? it->second : nullptr;
}

}  // namespace

extern "C" {

// ---- Test controls.
__attribute__((visibility("default"))) void fake_cuda_set_device(int device) {
  S().initialized = true;
  Context& c = S().contexts[std::clamp(device, 0, kMaxDevices - 1)];
  c.device = device;
  c.created = true;
  current = &c;
}
__attribute__((visibility("default"))) void fake_cuda_create_context() { fake_cuda_set_device(0); }
// Back to "CUDA not initialized, no context": for tests that need that start
// whatever ran before them in the process.
__attribute__((visibility("default"))) void fake_cuda_reset() {
  std::lock_guard<std::mutex> lock(S().mu);
  for (Context& c : S().contexts) c = Context{};
  S().busy_until.clear();
  S().stream_ctx.clear();
  S().initialized = false;
  current = nullptr;  // the calling thread's; others' are the test's to reset
  pushed.clear();
}
__attribute__((visibility("default"))) void fake_cuda_set_bus_id(int device, const char* bus_id) {
  Context& c = S().contexts[std::clamp(device, 0, kMaxDevices - 1)];
  std::snprintf(c.bus_id, sizeof(c.bus_id), "%s", bus_id);
}
__attribute__((visibility("default"))) void fake_cuda_set_name(int device, const char* name) {
  Context& c = S().contexts[std::clamp(device, 0, kMaxDevices - 1)];
  std::snprintf(c.name, sizeof(c.name), "%s", name);
}
__attribute__((visibility("default"))) uintptr_t fake_cuda_create_stream(int device) {
  std::lock_guard<std::mutex> lock(S().mu);
  const uintptr_t stream = S().next_stream++;
  S().stream_ctx[stream] = &S().contexts[std::clamp(device, 0, kMaxDevices - 1)];
  return stream;
}
__attribute__((visibility("default"))) void fake_cuda_fail_version(int result) {
  S().version_result = static_cast<CUresult>(result);
}
__attribute__((visibility("default"))) void fake_cuda_fail_records(int result) {
  S().record_failure = static_cast<CUresult>(result);
}
__attribute__((visibility("default"))) int fake_cuda_init_calls() { return S().init_calls; }
__attribute__((visibility("default"))) int fake_cuda_push_balance() { return S().push_balance; }
__attribute__((visibility("default"))) void fake_cuda_set_sticky_error(int result) {
  S().sticky = static_cast<CUresult>(result);
}
__attribute__((visibility("default"))) int64_t fake_cuda_live_events() { return S().live_events; }
__attribute__((visibility("default"))) int64_t fake_cuda_records() { return S().records; }
__attribute__((visibility("default"))) int64_t fake_cuda_wrong_context_records() {
  return S().wrong_context_records;
}
__attribute__((visibility("default"))) void fake_cuda_launch(uintptr_t stream,
                                                             int64_t duration_ns) {
  std::lock_guard<std::mutex> lock(S().mu);
  int64_t& busy = S().busy_until[{StreamContext(stream), stream}];
  busy = std::max(busy, NowNs()) + duration_ns;
}

// ---- The driver API subset, as cuda.h declares it.
CUresult cuInit(unsigned) {
  ++S().init_calls;
  S().initialized = true;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  *version = 13000;
  return S().version_result;
}

// The driver's names for the codes a test injects or the fake answers; like
// the driver, CUDA_ERROR_INVALID_VALUE for a code it does not know.
CUresult cuGetErrorName(CUresult r, const char** name) {
#define FAKE_CUDA_NAME(code) \
  case code: *name = #code; return CUDA_SUCCESS
  switch (r) {
    FAKE_CUDA_NAME(CUDA_SUCCESS);
    FAKE_CUDA_NAME(CUDA_ERROR_INVALID_VALUE);
    FAKE_CUDA_NAME(CUDA_ERROR_NOT_INITIALIZED);
    FAKE_CUDA_NAME(CUDA_ERROR_NO_DEVICE);
    FAKE_CUDA_NAME(CUDA_ERROR_INVALID_CONTEXT);
    FAKE_CUDA_NAME(CUDA_ERROR_INVALID_HANDLE);
    FAKE_CUDA_NAME(CUDA_ERROR_NOT_READY);
    FAKE_CUDA_NAME(CUDA_ERROR_ILLEGAL_ADDRESS);
    FAKE_CUDA_NAME(CUDA_ERROR_CONTEXT_IS_DESTROYED);
    FAKE_CUDA_NAME(CUDA_ERROR_UNKNOWN);
    default: *name = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
#undef FAKE_CUDA_NAME
}

CUresult cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = nullptr;
  if (!S().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *ctx = Current();
  return CUDA_SUCCESS;
}
CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  bool known = false;
  for (Context& c : S().contexts) known = known || (&c == ctx && c.created);
  if (!known) return CUDA_ERROR_INVALID_CONTEXT;
  pushed.push_back(ctx);
  ++S().push_balance;
  return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  if (pushed.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx != nullptr) *ctx = pushed.back();
  pushed.pop_back();
  --S().push_balance;
  return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice(CUdevice* device) {
  if (!HasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  *device = Current()->device;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int* count) {
  if (!S().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *count = kMaxDevices;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!S().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= kMaxDevices) return CUDA_ERROR_INVALID_VALUE;
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxGetState(CUdevice device, unsigned* flags, int* active) {
  if (!S().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (device < 0 || device >= kMaxDevices) return CUDA_ERROR_INVALID_VALUE;
  *flags = 0;
  *active = S().contexts[device].created ? 1 : 0;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetPCIBusId(char* out, int len, CUdevice device) {
  if (!S().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (device < 0 || device >= kMaxDevices || len < 13) return CUDA_ERROR_INVALID_VALUE;
  const Context& c = S().contexts[device];
  if (c.bus_id[0] != '\0') {
    std::snprintf(out, static_cast<size_t>(len), "%s", c.bus_id);
  } else {
    std::snprintf(out, static_cast<size_t>(len), "0000:%02X:00.0", 0x17 + 0x10 * device);
  }
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char* out, int len, CUdevice device) {
  if (!S().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (device < 0 || device >= kMaxDevices || len < 1) return CUDA_ERROR_INVALID_VALUE;
  const Context& c = S().contexts[device];
  std::snprintf(out, static_cast<size_t>(len), "%s",
                c.name[0] != '\0' ? c.name : "NVIDIA H100 80GB HBM3");
  return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx(CUstream stream, CUcontext* ctx) {
  std::lock_guard<std::mutex> lock(S().mu);
  *ctx = StreamContext(Handle(stream));
  if (*ctx != nullptr) return CUDA_SUCCESS;
  return IsDefaultStream(Handle(stream)) ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuStreamCreate(CUstream* stream, unsigned) {
  if (!HasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(S().mu);
  const uintptr_t handle = S().next_stream++;
  S().stream_ctx[handle] = Current();
  *stream = reinterpret_cast<CUstream>(handle);
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy_v2(CUstream) { return CUDA_SUCCESS; }

CUresult cuEventCreate(CUevent* e, unsigned) {
  if (!HasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  *e = new Event();
  (*e)->ctx = Current();
  ++S().live_events;
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent e) {
  delete e;
  --S().live_events;
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream stream) {
  if (S().sticky != CUDA_SUCCESS) return S().sticky;
  if (S().record_failure != CUDA_SUCCESS) return S().record_failure;
  if (!HasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(S().mu);
  Context* ctx = StreamContext(Handle(stream));
  if (ctx == nullptr || ctx != e->ctx) {
    ++S().wrong_context_records;
    return CUDA_ERROR_INVALID_HANDLE;  // the event and the stream must share a context
  }
  const auto it = S().busy_until.find({ctx, Handle(stream)});
  e->completion_ns = std::max(NowNs(), it == S().busy_until.end() ? 0 : it->second);
  ++S().records;
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent e) {
  if (S().sticky != CUDA_SUCCESS) return S().sticky;
  if (e == nullptr || e->completion_ns < 0) return CUDA_ERROR_INVALID_VALUE;
  return NowNs() >= e->completion_ns ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  if (S().sticky != CUDA_SUCCESS) return S().sticky;
  if (start == nullptr || end == nullptr || start->completion_ns < 0 || end->completion_ns < 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (start->ctx != end->ctx) return CUDA_ERROR_INVALID_HANDLE;
  const int64_t now = NowNs();
  if (now < start->completion_ns || now < end->completion_ns) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(static_cast<double>(end->completion_ns - start->completion_ns) / 1e6);
  return CUDA_SUCCESS;
}

}  // extern "C"
