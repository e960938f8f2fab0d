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
// calls and push/pop balance are counted.

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace {

using CUresult = int;
constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kNotReady = 600;
constexpr CUresult kNotInitialized = 3;
constexpr CUresult kInvalidContext = 201;
constexpr CUresult kInvalidHandle = 400;
constexpr int kMaxDevices = 4;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct Context {
  int device = 0;
  bool created = false;  // the device's primary context is active
  char bus_id[16] = "";  // "" : the default, 0000:<0x17 + 0x10 * device>:00.0
};

struct Event {
  Context* ctx = nullptr;
  int64_t completion_ns = -1;  // -1: never recorded
};

struct State {
  std::mutex mu;
  Context contexts[kMaxDevices];
  // (context, stream handle) -> end of queued work.
  std::map<std::pair<Context*, uintptr_t>, int64_t> busy_until;
  std::map<uintptr_t, Context*> stream_ctx;  // created streams
  std::atomic<CUresult> version_result{kSuccess};
  std::atomic<CUresult> sticky{kSuccess};
  std::atomic<CUresult> record_failure{kSuccess};
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

thread_local std::vector<Context*> pushed;    // cuCtxPushCurrent's stack
thread_local Context* current = nullptr;      // the thread's own (cudaSetDevice)

Context* Current() { return !pushed.empty() ? pushed.back() : current; }
bool HasContext() { return Current() != nullptr; }
bool IsDefaultStream(uintptr_t stream) { return stream <= 2; }

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
__attribute__((visibility("default"))) uintptr_t fake_cuda_create_stream(int device) {
  std::lock_guard<std::mutex> lock(S().mu);
  const uintptr_t stream = S().next_stream++;
  S().stream_ctx[stream] = &S().contexts[std::clamp(device, 0, kMaxDevices - 1)];
  return stream;
}
__attribute__((visibility("default"))) void fake_cuda_fail_version(int result) { S().version_result = result; }
__attribute__((visibility("default"))) void fake_cuda_fail_records(int result) { S().record_failure = result; }
__attribute__((visibility("default"))) int fake_cuda_init_calls() { return S().init_calls; }
__attribute__((visibility("default"))) int fake_cuda_push_balance() { return S().push_balance; }
__attribute__((visibility("default"))) void fake_cuda_set_sticky_error(int result) { S().sticky = result; }
__attribute__((visibility("default"))) int64_t fake_cuda_live_events() { return S().live_events; }
__attribute__((visibility("default"))) int64_t fake_cuda_records() { return S().records; }
__attribute__((visibility("default"))) int64_t fake_cuda_wrong_context_records() {
  return S().wrong_context_records;
}
__attribute__((visibility("default"))) void fake_cuda_launch(uintptr_t stream, int64_t duration_ns) {
  std::lock_guard<std::mutex> lock(S().mu);
  int64_t& busy = S().busy_until[{StreamContext(stream), stream}];
  busy = std::max(busy, NowNs()) + duration_ns;
}

// ---- The driver API subset.
CUresult cuInit(unsigned) {
  ++S().init_calls;
  S().initialized = true;
  return kSuccess;
}

CUresult cuDriverGetVersion(int* version) {
  *version = 13000;
  return S().version_result;
}

CUresult cuGetErrorName(CUresult r, const char** name) {
  switch (r) {
    case 0: *name = "CUDA_SUCCESS"; return kSuccess;
    case 3: *name = "CUDA_ERROR_NOT_INITIALIZED"; return kSuccess;
    case 100: *name = "CUDA_ERROR_NO_DEVICE"; return kSuccess;
    case 201: *name = "CUDA_ERROR_INVALID_CONTEXT"; return kSuccess;
    case 400: *name = "CUDA_ERROR_INVALID_HANDLE"; return kSuccess;
    case 600: *name = "CUDA_ERROR_NOT_READY"; return kSuccess;
    case 700: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; return kSuccess;
    case 709: *name = "CUDA_ERROR_CONTEXT_IS_DESTROYED"; return kSuccess;
    default: *name = "CUDA_ERROR_UNKNOWN"; return kSuccess;
  }
}

CUresult cuCtxGetCurrent(Context** ctx) {
  *ctx = nullptr;
  if (!S().initialized) return kNotInitialized;
  *ctx = Current();
  return kSuccess;
}
CUresult cuCtxPushCurrent_v2(Context* ctx) {
  bool known = false;
  for (Context& c : S().contexts) known = known || (&c == ctx && c.created);
  if (!known) return kInvalidContext;
  pushed.push_back(ctx);
  ++S().push_balance;
  return kSuccess;
}
CUresult cuCtxPopCurrent_v2(Context** ctx) {
  if (pushed.empty()) return kInvalidContext;
  if (ctx != nullptr) *ctx = pushed.back();
  pushed.pop_back();
  --S().push_balance;
  return kSuccess;
}
CUresult cuCtxGetDevice(int* device) {
  if (!HasContext()) return kInvalidContext;
  *device = Current()->device;
  return kSuccess;
}
CUresult cuDeviceGetCount(int* count) {
  if (!S().initialized) return kNotInitialized;
  *count = kMaxDevices;
  return kSuccess;
}
CUresult cuDeviceGet(int* device, int ordinal) {
  if (!S().initialized) return kNotInitialized;
  if (ordinal < 0 || ordinal >= kMaxDevices) return kInvalidValue;
  *device = ordinal;
  return kSuccess;
}
CUresult cuDevicePrimaryCtxGetState(int device, unsigned* flags, int* active) {
  if (!S().initialized) return kNotInitialized;
  if (device < 0 || device >= kMaxDevices) return kInvalidValue;
  *flags = 0;
  *active = S().contexts[device].created ? 1 : 0;
  return kSuccess;
}
CUresult cuDeviceGetPCIBusId(char* out, int len, int device) {
  if (!S().initialized) return kNotInitialized;
  if (device < 0 || device >= kMaxDevices || len < 13) return kInvalidValue;
  const Context& c = S().contexts[device];
  if (c.bus_id[0] != '\0') {
    std::snprintf(out, static_cast<size_t>(len), "%s", c.bus_id);
  } else {
    std::snprintf(out, static_cast<size_t>(len), "0000:%02X:00.0", 0x17 + 0x10 * device);
  }
  return kSuccess;
}
CUresult cuStreamGetCtx(uintptr_t stream, Context** ctx) {
  std::lock_guard<std::mutex> lock(S().mu);
  *ctx = StreamContext(stream);
  return *ctx != nullptr ? kSuccess : (IsDefaultStream(stream) ? kInvalidContext : kInvalidHandle);
}

CUresult cuStreamCreate(uintptr_t* stream, unsigned) {
  if (!HasContext()) return kInvalidContext;
  std::lock_guard<std::mutex> lock(S().mu);
  *stream = S().next_stream++;
  S().stream_ctx[*stream] = Current();
  return kSuccess;
}
CUresult cuStreamDestroy_v2(uintptr_t) { return kSuccess; }

CUresult cuEventCreate(Event** e, unsigned) {
  if (!HasContext()) return kInvalidContext;
  *e = new Event();
  (*e)->ctx = Current();
  ++S().live_events;
  return kSuccess;
}
CUresult cuEventDestroy_v2(Event* e) {
  delete e;
  --S().live_events;
  return kSuccess;
}

CUresult cuEventRecord(Event* e, uintptr_t stream) {
  if (S().sticky != kSuccess) return S().sticky;
  if (S().record_failure != kSuccess) return S().record_failure;
  if (!HasContext()) return kInvalidContext;
  if (e == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lock(S().mu);
  Context* ctx = StreamContext(stream);
  if (ctx == nullptr || ctx != e->ctx) {
    ++S().wrong_context_records;
    return kInvalidHandle;  // the event and the stream must share a context
  }
  const auto it = S().busy_until.find({ctx, stream});
  e->completion_ns = std::max(NowNs(), it == S().busy_until.end() ? 0 : it->second);
  ++S().records;
  return kSuccess;
}

CUresult cuEventQuery(Event* e) {
  if (S().sticky != kSuccess) return S().sticky;
  if (e == nullptr || e->completion_ns < 0) return kInvalidValue;
  return NowNs() >= e->completion_ns ? kSuccess : kNotReady;
}

CUresult cuEventElapsedTime_v2(float* ms, Event* start, Event* end) {
  if (S().sticky != kSuccess) return S().sticky;
  if (start == nullptr || end == nullptr || start->completion_ns < 0 || end->completion_ns < 0) {
    return kInvalidValue;
  }
  if (start->ctx != end->ctx) return kInvalidHandle;
  const int64_t now = NowNs();
  if (now < start->completion_ns || now < end->completion_ns) return kNotReady;
  *ms = static_cast<float>(static_cast<double>(end->completion_ns - start->completion_ns) / 1e6);
  return kSuccess;
}

}  // extern "C"
