// A fake CUPTI (the activity and subscriber entry points gpuscope uses),
// loaded through GPUSCOPE_LIBCUPTI exactly as libcupti.so would be, so that
// CI runs the real CUPTI source's code without a GPU.
//
// Model: one subscriber at a time (a second gets
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED and the first one's name);
// one set of buffer callbacks (the last registered wins, as in CUPTI); the
// test emits activity records, which the next cuptiActivityFlushAll writes
// into a buffer the client gives (bufferRequested) and hands back
// (bufferCompleted). Records of kinds not enabled are not recorded. Records
// use CUPTI's field offsets (gpuscope's declarations, checked against the
// real header by cupti_layout_test) in 128-byte slots.
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

#include "backends/cupti/cupti_records.h"

namespace {

namespace cupti = gpuscope::internal::cupti;
using CUptiResult = int;
constexpr CUptiResult kSuccess = 0;
constexpr CUptiResult kInvalidParameter = 1;
constexpr CUptiResult kMaxLimitReached = 12;
constexpr CUptiResult kMultipleSubscribers = 39;
constexpr size_t kSlot = 128;
constexpr int64_t kOwnClockOffsetNs = 1'000'000'000;

using BufferRequestedFn = void (*)(uint8_t**, size_t*, size_t*);
using BufferCompletedFn = void (*)(void*, uint32_t, uint8_t*, size_t, size_t);
using TimestampFn = uint64_t (*)();

struct SubscriberParams {  // as of CUPTI 13.2
  size_t struct_size;
  const char* subscriber_name;
  char* old_subscriber_name;
  size_t old_subscriber_size;
  uint8_t allow_multiple_subscribers;
};

struct Pending {
  uint32_t kind;
  uint8_t bytes[kSlot];
};

struct State {
  std::mutex mu;
  bool subscribed = false;
  std::string subscriber_name;
  int subscribe_calls = 0;
  int finalize_calls = 0;
  BufferRequestedFn requested = nullptr;
  BufferCompletedFn completed = nullptr;
  TimestampFn timestamp = nullptr;
  std::set<uint32_t> enabled;
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
  if (S().timestamp != nullptr) return static_cast<uint64_t>(host_ns);  // the client's clock is ours
#endif
  return static_cast<uint64_t>(host_ns + kOwnClockOffsetNs);
}

template <typename R>
void Emit(uint32_t kind, const R& r) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (S().enabled.count(kind) == 0 && !(kind == cupti::kConcurrentKernel && S().enabled.count(cupti::kKernel))) {
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
EXPORT void fake_cupti_emit_api(uint32_t correlation, int64_t start_ns, int64_t end_ns) {
  cupti::ApiRecord a{};
  a.kind = cupti::kRuntime;
  a.start = Stamp(start_ns);
  a.end = Stamp(end_ns);
  a.correlation_id = correlation;
  Emit(cupti::kRuntime, a);
}
// The name later kernels carry (static storage, as CUPTI's own names).
const char* g_kernel_name = nullptr;
EXPORT void fake_cupti_set_kernel_name(const char* name) { g_kernel_name = name; }
EXPORT void fake_cupti_emit_kernel(int64_t start_ns, int64_t end_ns, uint32_t device, uint32_t stream,
                                   uint32_t correlation) {
  cupti::KernelRecord k{};
  k.kind = cupti::kConcurrentKernel;
  k.start = Stamp(start_ns);
  k.end = Stamp(end_ns);
  k.device_id = device;
  k.stream_id = stream;
  k.correlation_id = correlation;
  k.name = g_kernel_name;
  Emit(cupti::kConcurrentKernel, k);
}
EXPORT void fake_cupti_emit_memcpy(int64_t start_ns, int64_t end_ns, uint8_t copy_kind, uint8_t src_kind,
                                   uint8_t dst_kind, uint64_t bytes, uint32_t correlation) {
  cupti::MemcpyRecord m{};
  m.kind = cupti::kMemcpy;
  m.copy_kind = copy_kind;
  m.src_kind = src_kind;
  m.dst_kind = dst_kind;
  m.bytes = bytes;
  m.start = Stamp(start_ns);
  m.end = Stamp(end_ns);
  m.correlation_id = correlation;
  Emit(cupti::kMemcpy, m);
}
EXPORT void fake_cupti_emit_sync(int64_t start_ns, int64_t end_ns, uint32_t type) {
  cupti::SyncRecord s{};
  s.kind = cupti::kSynchronization;
  s.type = type;
  s.start = Stamp(start_ns);
  s.end = Stamp(end_ns);
  Emit(cupti::kSynchronization, s);
}

// ---- The CUPTI API subset.
EXPORT void fake_cupti_set_version(uint32_t version) { S().version = version; }
EXPORT size_t fake_cupti_last_params_size() { return S().last_params_size; }
EXPORT int fake_cupti_last_allow_multiple() { return S().last_allow_multiple; }
EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
  *version = S().version;
  return kSuccess;
}
EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char** s) {
  *s = r == kMultipleSubscribers ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
       : r == kInvalidParameter  ? "CUPTI_ERROR_INVALID_PARAMETER"
                                 : "CUPTI_ERROR_UNKNOWN";
  return kSuccess;
}
EXPORT CUptiResult cuptiSubscribe(void** subscriber, void*, void*) {
  std::lock_guard<std::mutex> lock(S().mu);
  ++S().subscribe_calls;
  if (S().subscribed) return kMultipleSubscribers;
  S().subscribed = true;
  S().subscriber_name = "(unnamed)";
  *subscriber = &S();
  return kSuccess;
}
#ifdef FAKE_CUPTI_V2
EXPORT CUptiResult cuptiSubscribe_v2(void** subscriber, void*, void*, SubscriberParams* params) {
  std::lock_guard<std::mutex> lock(S().mu);
  ++S().subscribe_calls;
  S().last_params_size = params != nullptr ? params->struct_size : 0;
  S().last_allow_multiple =
      params != nullptr && params->struct_size >= sizeof(SubscriberParams) ? params->allow_multiple_subscribers : -1;
  if (params != nullptr && params->struct_size > sizeof(SubscriberParams)) return kInvalidParameter;
  if (S().subscribed) {
    if (params != nullptr && params->old_subscriber_name != nullptr && params->old_subscriber_size > 0) {
      std::strncpy(params->old_subscriber_name, S().subscriber_name.c_str(), params->old_subscriber_size - 1);
    }
    return kMultipleSubscribers;
  }
  S().subscribed = true;
  S().subscriber_name = params != nullptr && params->subscriber_name != nullptr ? params->subscriber_name : "";
  *subscriber = &S();
  return kSuccess;
}
EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(TimestampFn fn) {
  S().timestamp = fn;
  return kSuccess;
}
#endif
EXPORT CUptiResult cuptiUnsubscribe(void* subscriber) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (subscriber != &S() || !S().subscribed) return kInvalidParameter;
  S().subscribed = false;
  S().subscriber_name.clear();
  return kSuccess;
}
EXPORT CUptiResult cuptiFinalize() {
  ++S().finalize_calls;
  return kSuccess;
}
EXPORT CUptiResult cuptiActivityRegisterCallbacks(BufferRequestedFn requested, BufferCompletedFn completed) {
  S().requested = requested;
  S().completed = completed;
  return kSuccess;
}
EXPORT CUptiResult cuptiActivityEnable(uint32_t kind) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().enabled.insert(kind);
  return kSuccess;
}
EXPORT CUptiResult cuptiActivityDisable(uint32_t kind) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().enabled.erase(kind);
  return kSuccess;
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
  return kSuccess;
}
EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, void** record) {
  uint8_t* next = *record == nullptr ? buffer : static_cast<uint8_t*>(*record) + kSlot;
  if (next + kSlot > buffer + valid) return kMaxLimitReached;
  *record = next;
  return kSuccess;
}
EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(void*, uint32_t, size_t* dropped) {
  *dropped = S().dropped;
  S().dropped = 0;
  return kSuccess;
}
EXPORT CUptiResult cuptiGetTimestamp(uint64_t* t) {
  *t = static_cast<uint64_t>(MonotonicNs() + kOwnClockOffsetNs);
  return kSuccess;
}

}  // extern "C"
