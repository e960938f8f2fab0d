// A fake CUPTI (the activity and subscriber entry points gpuscope uses),
// loaded through GPUSCOPE_LIBCUPTI exactly as libcupti.so would be, so that
// CI runs the real CUPTI source's code without a GPU.
//
// Model: one subscriber at a time (a second gets
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED and the first one's name);
// one set of buffer callbacks (the last registered wins, as in CUPTI); the
// test emits activity records, which the next cuptiActivityFlushAll writes
// into a buffer the client gives (bufferRequested) and hands back
// (bufferCompleted). Records of kinds not enabled are not recorded. Entry
// points, records and codes are cupti.h's: the fake writes the record
// versions its CUPTI would (13: CUpti_ActivityKernel10, Memcpy6,
// Synchronization2; 12: Kernel9, Memcpy5, Synchronization), in 256-byte
// slots, and gpuscope reads them through its own (older) versions.
//
// Built twice: with FAKE_CUPTI_V2 (CUPTI 13: cuptiSubscribe_v2 and the
// timestamp callback) and without (an older CUPTI: neither exists, and
// timestamps are on CUPTI's own clock, CLOCK_MONOTONIC + 1 s).

#include <time.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backends/cupti/cupti_records.h"  // cupti.h, and gpuscope's 13.2 subscriber parameters
#include "fakes/fake_cupti.h"              // the test controls defined here

namespace {

namespace cupti = gpuscope::internal::cupti;
constexpr size_t kSlot = 256;
constexpr int64_t kOwnClockOffsetNs = 1'000'000'000;

#if defined(FAKE_CUPTI_V2) && CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
using SyncRecord = CUpti_ActivitySynchronization2;
#else
using KernelRecord = CUpti_ActivityKernel9;
using MemcpyRecord = CUpti_ActivityMemcpy5;
using SyncRecord = CUpti_ActivitySynchronization;
#endif

struct Pending {
  CUpti_ActivityKind kind;
  alignas(8) uint8_t bytes[kSlot];
};

struct State {
  std::mutex mu;
  bool subscribed = false;
  std::string subscriber_name;
  int subscribe_calls = 0;
  int finalize_calls = 0;
  CUpti_BuffersCallbackRequestFunc requested = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  CUpti_TimestampCallbackFunc timestamp = nullptr;
  CUptiResult enable_result = CUPTI_SUCCESS;
  std::set<CUpti_ActivityKind> enabled;
#ifdef FAKE_CUPTI_V2
  uint32_t version = 130200;
#else
  uint32_t version = 120800;
#endif
  size_t last_params_size = 0;
  int last_allow_multiple = -1;
  std::vector<Pending> pending;
  size_t dropped = 0;
};

State& S() {
  static State* s = new State();
  return *s;
}

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Host time (CLOCK_MONOTONIC ns, as tests give it) on the clock CUPTI stamps
// records with.
uint64_t Stamp(int64_t host_ns) {
#ifdef FAKE_CUPTI_V2
  if (S().timestamp != nullptr)
    return static_cast<uint64_t>(host_ns);  // the client's clock is ours
#endif
  return static_cast<uint64_t>(host_ns + kOwnClockOffsetNs);
}

template <typename R>
void Emit(const R& r) {
  const CUpti_ActivityKind kind = r.kind;
  std::lock_guard<std::mutex> lock(S().mu);
  if (S().enabled.count(kind) == 0 && !(kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
                                        S().enabled.count(CUPTI_ACTIVITY_KIND_KERNEL))) {
    return;
  }
  Pending p{kind, {}};
  static_assert(sizeof(R) <= kSlot);
  std::memcpy(p.bytes, &r, sizeof(R));
  S().pending.push_back(p);
}

}  // namespace

extern "C" {

#define EXPORT __attribute__((visibility("default")))

// ---- Test controls.
EXPORT void fake_cupti_hold(const char* name) {  // another tool subscribes first
  std::lock_guard<std::mutex> lock(S().mu);
  S().subscribed = true;
  S().subscriber_name = name;
}
EXPORT void fake_cupti_release() {
  std::lock_guard<std::mutex> lock(S().mu);
  S().subscribed = false;
  S().subscriber_name.clear();
}
EXPORT int fake_cupti_subscribed() { return S().subscribed ? 1 : 0; }
EXPORT const char* fake_cupti_subscriber_name() { return S().subscriber_name.c_str(); }
EXPORT int fake_cupti_enabled_kinds() { return static_cast<int>(S().enabled.size()); }
EXPORT int fake_cupti_finalize_calls() { return S().finalize_calls; }
EXPORT int fake_cupti_has_callbacks() { return S().requested != nullptr ? 1 : 0; }
EXPORT void fake_cupti_drop(size_t n) { S().dropped += n; }
// cuptiActivityEnable answers `result` from now on (0: succeeds again).
EXPORT void fake_cupti_fail_enable(int result) {
  S().enable_result = static_cast<CUptiResult>(result);
}
EXPORT void fake_cupti_emit_api(uint32_t correlation, int64_t start_ns, int64_t end_ns) {
  CUpti_ActivityAPI a{};
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.start = Stamp(start_ns);
  a.end = Stamp(end_ns);
  a.correlationId = correlation;
  Emit(a);
}
// The name later kernels carry (static storage, as CUPTI's own names).
const char* g_kernel_name = nullptr;
EXPORT void fake_cupti_set_kernel_name(const char* name) { g_kernel_name = name; }
EXPORT void fake_cupti_emit_kernel(int64_t start_ns, int64_t end_ns, uint32_t device,
                                   uint32_t stream, uint32_t correlation) {
  KernelRecord k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = Stamp(start_ns);
  k.end = Stamp(end_ns);
  k.deviceId = device;
  k.streamId = stream;
  k.correlationId = correlation;
  k.name = g_kernel_name;
  Emit(k);
}
EXPORT void fake_cupti_emit_memcpy(int64_t start_ns, int64_t end_ns, uint8_t copy_kind,
                                   uint8_t src_kind, uint8_t dst_kind, uint64_t bytes,
                                   uint32_t correlation) {
  MemcpyRecord m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = copy_kind;
  m.srcKind = src_kind;
  m.dstKind = dst_kind;
  m.bytes = bytes;
  m.start = Stamp(start_ns);
  m.end = Stamp(end_ns);
  m.correlationId = correlation;
  Emit(m);
}
EXPORT void fake_cupti_emit_sync(int64_t start_ns, int64_t end_ns, uint32_t type) {
  SyncRecord s{};
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = static_cast<CUpti_ActivitySynchronizationType>(type);
  s.start = Stamp(start_ns);
  s.end = Stamp(end_ns);
  Emit(s);
}

// ---- The CUPTI API subset, as cupti.h declares it.
EXPORT void fake_cupti_set_version(uint32_t version) { S().version = version; }
EXPORT size_t fake_cupti_last_params_size() { return S().last_params_size; }
EXPORT int fake_cupti_last_allow_multiple() { return S().last_allow_multiple; }
EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
  *version = S().version;
  return CUPTI_SUCCESS;
}
// CUPTI's names for the codes the fake answers; any other is not CUPTI's,
// and CUPTI refuses to name it.
EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char** s) {
#define FAKE_CUPTI_NAME(code) \
  case code: *s = #code; return CUPTI_SUCCESS
  switch (r) {
    FAKE_CUPTI_NAME(CUPTI_SUCCESS);
    FAKE_CUPTI_NAME(CUPTI_ERROR_INVALID_PARAMETER);
    FAKE_CUPTI_NAME(CUPTI_ERROR_MAX_LIMIT_REACHED);
    FAKE_CUPTI_NAME(CUPTI_ERROR_NOT_INITIALIZED);
    FAKE_CUPTI_NAME(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
    FAKE_CUPTI_NAME(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    FAKE_CUPTI_NAME(CUPTI_ERROR_UNKNOWN);
    default: *s = nullptr; return CUPTI_ERROR_INVALID_PARAMETER;
  }
#undef FAKE_CUPTI_NAME
}
EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc, void*) {
  std::lock_guard<std::mutex> lock(S().mu);
  ++S().subscribe_calls;
  if (S().subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  S().subscribed = true;
  S().subscriber_name = "(unnamed)";
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&S());
  return CUPTI_SUCCESS;
}
#ifdef FAKE_CUPTI_V2
// As CUPTI 13.2: the parameters are read up to structSize, which may not
// exceed 13.2's.
EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc, void*,
                                     cupti::SubscribeV2Params* declared) {
  auto* params = reinterpret_cast<cupti::SubscriberParams*>(declared);
  std::lock_guard<std::mutex> lock(S().mu);
  ++S().subscribe_calls;
  S().last_params_size = params != nullptr ? params->structSize : 0;
  S().last_allow_multiple =
      params != nullptr && params->structSize >= cupti::kSubscriberParamsSize132
          ? params->allowMultipleSubscribers
          : -1;
  if (params != nullptr && params->structSize > cupti::kSubscriberParamsSize132)
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (S().subscribed) {
    if (params != nullptr && params->oldSubscriberName != nullptr &&
        params->oldSubscriberSize > 0) {
      std::strncpy(params->oldSubscriberName, S().subscriber_name.c_str(),
                   params->oldSubscriberSize - 1);
    }
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  S().subscribed = true;
  S().subscriber_name =
      params != nullptr && params->subscriberName != nullptr ? params->subscriberName : "";
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&S());
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn) {
  S().timestamp = fn;
  return CUPTI_SUCCESS;
}
#endif
EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&S()) || !S().subscribed) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  S().subscribed = false;
  S().subscriber_name.clear();
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiFinalize() {
  ++S().finalize_calls;
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                  CUpti_BuffersCallbackCompleteFunc completed) {
  S().requested = requested;
  S().completed = completed;
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (S().enable_result != CUPTI_SUCCESS) return S().enable_result;
  S().enabled.insert(kind);
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().enabled.erase(kind);
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityFlushAll(uint32_t) {
  std::vector<Pending> pending;
  {
    std::lock_guard<std::mutex> lock(S().mu);
    pending.swap(S().pending);
  }
  size_t i = 0;
  while (i < pending.size() && S().requested != nullptr) {
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    S().requested(&buffer, &size, &max_records);
    if (buffer == nullptr || size < kSlot) {
      S().dropped += pending.size() - i;  // no buffer: CUPTI drops and counts
      break;
    }
    size_t used = 0;
    for (; i < pending.size() && used + kSlot <= size; ++i, used += kSlot) {
      std::memcpy(buffer + used, pending[i].bytes, kSlot);
    }
    S().completed(nullptr, 0, buffer, size, used);
  }
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                              CUpti_Activity** record) {
  uint8_t* next = *record == nullptr ? buffer : reinterpret_cast<uint8_t*>(*record) + kSlot;
  if (next + kSlot > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = S().dropped;
  S().dropped = 0;
  return CUPTI_SUCCESS;
}
EXPORT CUptiResult cuptiGetTimestamp(uint64_t* t) {
  *t = static_cast<uint64_t>(MonotonicNs() + kOwnClockOffsetNs);
  return CUPTI_SUCCESS;
}

}  // extern "C"
