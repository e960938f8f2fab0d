// A fake CUDA driver (the dozen entry points gpuscope's CUDA events timer
// uses), loaded by the timer through GPUSCOPE_LIBCUDA exactly as it loads
// libcuda.so.1, so CI runs the real timer's code without a GPU.
//
// Model: in-order streams (the handle is the key; 0 is the default stream),
// kernels launched by the test with fake_cuda_launch(), events that complete
// when all work queued on their stream before them has run, timed on
// CLOCK_MONOTONIC. CUDA is uninitialized (cuCtxGetCurrent answers
// CUDA_ERROR_NOT_INITIALIZED) until the test creates a context, which is then
// current on the creating thread only (as torch's is on the training thread);
// other threads must push it, and calls that need a context fail without one.
// Sticky errors, record failures and version failures can be injected; cuInit
// calls and push/pop balance are counted.

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

namespace {

using CUresult = int;
constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kNotReady = 600;
constexpr CUresult kNotInitialized = 3;
constexpr CUresult kInvalidContext = 201;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct Event {
  int64_t completion_ns = -1;  // -1: never recorded
};

struct State {
  std::mutex mu;
  std::map<uintptr_t, int64_t> busy_until;  // stream -> end of queued work
  std::atomic<CUresult> version_result{kSuccess};
  std::atomic<CUresult> sticky{kSuccess};
  std::atomic<CUresult> record_failure{kSuccess};
  std::atomic<bool> initialized{false};
  std::atomic<int> init_calls{0};
  std::atomic<int> push_balance{0};
  std::atomic<int64_t> live_events{0};
  std::atomic<int64_t> records{0};
  uintptr_t next_stream = 0x1000;
  int ctx_token = 0;  // the fake context's address stands for it
};

State& S() {
  static State* s = new State();
  return *s;
}

thread_local int push_depth = 0;
thread_local bool context_current = false;  // the creating thread's

bool HasContext() { return context_current || push_depth > 0; }

}  // namespace

extern "C" {

// ---- Test controls.
__attribute__((visibility("default"))) void fake_cuda_create_context() {
  S().initialized = true;
  context_current = true;
}
__attribute__((visibility("default"))) void fake_cuda_fail_version(int result) { S().version_result = result; }
__attribute__((visibility("default"))) void fake_cuda_fail_records(int result) { S().record_failure = result; }
__attribute__((visibility("default"))) int fake_cuda_init_calls() { return S().init_calls; }
__attribute__((visibility("default"))) int fake_cuda_push_balance() { return S().push_balance; }
__attribute__((visibility("default"))) void fake_cuda_set_sticky_error(int result) { S().sticky = result; }
__attribute__((visibility("default"))) int64_t fake_cuda_live_events() { return S().live_events; }
__attribute__((visibility("default"))) int64_t fake_cuda_records() { return S().records; }
__attribute__((visibility("default"))) void fake_cuda_launch(uintptr_t stream, int64_t duration_ns) {
  std::lock_guard<std::mutex> lock(S().mu);
  int64_t& busy = S().busy_until[stream];
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

CUresult cuCtxGetCurrent(void** ctx) {
  *ctx = nullptr;
  if (!S().initialized) return kNotInitialized;
  if (HasContext()) *ctx = &S().ctx_token;
  return kSuccess;
}
CUresult cuCtxPushCurrent_v2(void* ctx) {
  if (ctx != &S().ctx_token) return kInvalidContext;
  ++push_depth;
  ++S().push_balance;
  return kSuccess;
}
CUresult cuCtxPopCurrent_v2(void** ctx) {
  if (push_depth == 0) return kInvalidContext;
  --push_depth;
  --S().push_balance;
  if (ctx != nullptr) *ctx = &S().ctx_token;
  return kSuccess;
}

CUresult cuStreamCreate(uintptr_t* stream, unsigned) {
  if (!HasContext()) return kInvalidContext;
  std::lock_guard<std::mutex> lock(S().mu);
  *stream = S().next_stream++;
  return kSuccess;
}
CUresult cuStreamDestroy_v2(uintptr_t) { return kSuccess; }

CUresult cuEventCreate(Event** e, unsigned) {
  if (!HasContext()) return kInvalidContext;
  *e = new Event();
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
  const auto it = S().busy_until.find(stream);
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
  const int64_t now = NowNs();
  if (now < start->completion_ns || now < end->completion_ns) return kNotReady;
  *ms = static_cast<float>(static_cast<double>(end->completion_ns - start->completion_ns) / 1e6);
  return kSuccess;
}

}  // extern "C"
