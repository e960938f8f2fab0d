#include "backends/cupti/cupti_activity.h"

#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backends/cuda/cuda_driver_timer.h"
#include "backends/cupti/cupti_records.h"  // cupti.h, and the layouts read through it
#include "backends/host/clock.h"
#include "backends/kernel_names.h"
#include "backends/vendor_status.h"
#include "base/dynlib.h"
#include "base/env.h"
#include "base/log.h"

namespace gpuscope::internal {
namespace {

// The entry points, typed by cupti.h's declarations. cuptiSubscribe_v2
// (CUPTI 13) and the timestamp callback are optional: an older library lacks
// them, and gpuscope then subscribes the old way and calibrates CUPTI's
// clock itself.
struct CuptiApi {
  decltype(&cuptiGetVersion) GetVersion = nullptr;
  decltype(&cuptiGetResultString) GetResultString = nullptr;
  decltype(&cuptiSubscribe) Subscribe = nullptr;
  cupti::SubscribeV2Fn SubscribeV2 = nullptr;  // optional
  decltype(&cuptiUnsubscribe) Unsubscribe = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
  // Optional, as SubscribeV2.
  decltype(&cuptiActivityRegisterTimestampCallback) ActivityRegisterTimestampCallback = nullptr;
  decltype(&cuptiActivityEnable) ActivityEnable = nullptr;
  decltype(&cuptiActivityDisable) ActivityDisable = nullptr;
  decltype(&cuptiActivityFlushAll) ActivityFlushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords = nullptr;
  decltype(&cuptiGetTimestamp) GetTimestamp = nullptr;
};

// CUPTI's name for `r` ("CUPTI_ERROR_INVALID_PARAMETER"), or its number when
// the library is not loaded or cannot name it.
std::string CuptiResultName(const CuptiApi& api, CUptiResult r) {
  const char* name = nullptr;
  if (api.GetResultString != nullptr && api.GetResultString(r, &name) == CUPTI_SUCCESS &&
      name != nullptr) {
    return name;
  }
  return UnnamedVendorError("CUPTI", r);
}

// A failed CUPTI call in the convention of backends/vendor_status.h.
absl::Status CuptiStatus(const CuptiApi& api, CUptiResult r, absl::string_view call,
                         const char* file, int line,
                         absl::StatusCode code = absl::StatusCode::kInternal,
                         absl::string_view hint = "") {
  if (r == CUPTI_SUCCESS) return absl::OkStatus();
  return VendorCallError(code, call, CuptiResultName(api, r), hint, file, line);
}

// GPUSCOPE_CUPTI_CALL(api, ActivityFlushAll(0)) calls api.ActivityFlushAll(0),
// reported as "cuptiActivityFlushAll(0) failed: CUPTI_ERROR_... at
// cupti_activity.cc:<line>".
#define GPUSCOPE_CUPTI_CALL(api, call) \
  ::gpuscope::internal::CuptiStatus((api), (api).call, "cupti" #call, __FILE__, __LINE__)

absl::StatusOr<CuptiApi> BindCupti(const DynLib& lib) {
  CuptiApi c;
  for (absl::Status s :
       {lib.Bind(&c.GetVersion, {"cuptiGetVersion"}),
        lib.Bind(&c.GetResultString, {"cuptiGetResultString"}),
        lib.Bind(&c.Subscribe, {"cuptiSubscribe"}), lib.Bind(&c.Unsubscribe, {"cuptiUnsubscribe"}),
        lib.Bind(&c.ActivityRegisterCallbacks, {"cuptiActivityRegisterCallbacks"}),
        lib.Bind(&c.ActivityEnable, {"cuptiActivityEnable"}),
        lib.Bind(&c.ActivityDisable, {"cuptiActivityDisable"}),
        lib.Bind(&c.ActivityFlushAll, {"cuptiActivityFlushAll"}),
        lib.Bind(&c.ActivityGetNextRecord, {"cuptiActivityGetNextRecord"}),
        lib.Bind(&c.ActivityGetNumDroppedRecords, {"cuptiActivityGetNumDroppedRecords"}),
        lib.Bind(&c.GetTimestamp, {"cuptiGetTimestamp"})}) {
    if (!s.ok()) return s;
  }
  (void)lib.Bind(&c.SubscribeV2, {"cuptiSubscribe_v2"});
  (void)lib.Bind(&c.ActivityRegisterTimestampCallback, {"cuptiActivityRegisterTimestampCallback"});
  return c;
}

// A libcupti already mapped into the process, or "".
std::string LoadedCuptiPath() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const char* name = info->dlpi_name;
        if (name != nullptr && std::strstr(name, "libcupti.so") != nullptr) {
          *static_cast<std::string*>(data) = name;
          return 1;
        }
        return 0;
      },
      &found);
  return found;
}

// Where to look, best first (see the header).
std::vector<std::string> CuptiCandidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("GPUSCOPE_LIBCUPTI"); env != nullptr && env[0] != '\0') {
    return {env};  // explicit: only this
  }
  if (std::string loaded = LoadedCuptiPath(); !loaded.empty())
    return {loaded};  // never a second copy
  std::vector<std::string> roots;
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && home[0] != '\0')
    roots.push_back(home);
  roots.push_back("/usr/local/cuda");
  for (const std::string& root : roots) {
    for (const char* sub : {"/extras/CUPTI/lib64/", "/lib64/", "/targets/x86_64-linux/lib/"}) {
      out.push_back(absl::StrCat(root, sub, "libcupti.so"));
    }
  }
  if (const char* dirs = std::getenv("GPUSCOPE_CUPTI_PATH"); dirs != nullptr) {
    for (absl::string_view dir : absl::StrSplit(dirs, ':', absl::SkipEmpty())) {
      for (const char* soname : {"libcupti.so", "libcupti.so.13", "libcupti.so.12"}) {
        out.push_back(absl::StrCat(dir, "/", soname));
      }
    }
  }
  out.push_back("libcupti.so");  // the loader's own search path, last
  return out;
}

constexpr size_t kBufferBytes = 1 << 20;  // CUPTI's records are 8-byte aligned
constexpr size_t kBuffers = 16;
constexpr int64_t kFlushIntervalNs = 20'000'000;
constexpr int64_t kMinSettleNs = 1'000'000;
constexpr int64_t kMaxSettleNs = 1'000'000'000;
constexpr size_t kCorrelationSlots = 1 << 16;
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

// Process-wide: CUPTI's buffer callbacks are plain functions. Buffers are
// allocated once and recycled, so the callbacks never allocate; a request
// finding none free gets none, and CUPTI drops (and counts) records.
struct Hub {
  std::mutex mu;        // guards the fields below; held only briefly, never across CUPTI calls
  bool active = false;  // a session owns CUPTI
  std::unique_ptr<uint8_t[]> storage;
  std::array<bool, kBuffers> in_use{};
  struct Completed {
    uint8_t* buffer;
    size_t valid;
  };
  std::array<Completed, kBuffers> completed{};
  size_t completed_count = 0;
  uint64_t refused = 0;  // requests that found no free buffer
  // cuptiActivityGetNumDroppedRecords while a session owns CUPTI, else null.
  decltype(&cuptiActivityGetNumDroppedRecords) get_dropped = nullptr;
  std::atomic<uint64_t> dropped{0};

  uint8_t* Buffer(size_t i) { return storage.get() + i * kBufferBytes; }
  size_t IndexOf(const uint8_t* b) { return static_cast<size_t>(b - storage.get()) / kBufferBytes; }
};

Hub& TheHub() {
  static Hub* hub = new Hub();  // never destroyed: CUPTI may call back at exit
  return *hub;
}

void BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  Hub& h = TheHub();
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  std::lock_guard<std::mutex> lock(h.mu);
  if (!h.active || h.storage == nullptr) return;
  for (size_t i = 0; i < kBuffers; ++i) {
    if (!h.in_use[i]) {
      h.in_use[i] = true;
      *buffer = h.Buffer(i);
      *size = kBufferBytes;
      return;
    }
  }
  ++h.refused;
}

void BufferCompleted(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid) {
  Hub& h = TheHub();
  decltype(&cuptiActivityGetNumDroppedRecords) get_dropped = nullptr;
  {
    std::lock_guard<std::mutex> lock(h.mu);
    get_dropped = h.get_dropped;
  }
  size_t dropped = 0;
  if (get_dropped != nullptr && get_dropped(ctx, stream_id, &dropped) == CUPTI_SUCCESS) {
    h.dropped.fetch_add(dropped, std::memory_order_relaxed);
  }
  if (buffer == nullptr) return;
  std::lock_guard<std::mutex> lock(h.mu);
  if (h.storage == nullptr || buffer < h.storage.get() ||
      buffer >= h.storage.get() + kBuffers * kBufferBytes) {
    return;  // not ours
  }
  if (!h.active || h.completed_count == kBuffers) {
    h.in_use[h.IndexOf(buffer)] = false;  // nobody will read it
    return;
  }
  h.completed[h.completed_count++] = {buffer, valid};
}

uint64_t MonotonicTimestamp() { return static_cast<uint64_t>(ReadMonotonicNs()); }

void IgnoreCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

class CuptiActivity final : public ActivitySource {
 public:
  explicit CuptiActivity(Cupti mode) : mode_(mode) {}
  ~CuptiActivity() override { Stop(); }

  absl::string_view name() const override { return "CUPTI"; }

  absl::Status Start() override {
    uint32_t version = 0;
    if (absl::Status ready = Prepare(&version); !ready.ok()) return ready;
    if (absl::Status subscribed = Subscribe(version); !subscribed.ok()) return subscribed;
    TakeHub();
    if (absl::Status enabled = EnableActivity(); !enabled.ok()) return enabled;
    LogOnce("cupti-on", LogLevel::kInfo,
            absl::StrCat(
                "CUPTI ", version, " (", path_, ") activity records on; timestamps ",
                timestamps_are_host_ ? "from CLOCK_MONOTONIC" : "calibrated to CLOCK_MONOTONIC"));
    return absl::OkStatus();
  }

  int64_t Drain(std::vector<DeviceInterval>* out, bool flush_now) override {
    if (!owner_) return INT64_MIN;
    const int64_t now = ReadMonotonicNs();
    if (flush_now || now - last_flush_ns_ >= kFlushIntervalNs) {
      // Records of activity that ended before the previous forced flush (or
      // this one, when asked to flush everything) have been delivered by
      // now. Activity that began before time t ended by t + (its duration):
      // so the horizon is that flush less the longest activity of the last
      // 2 s, twice over for margin. A heuristic: longer activity running
      // across a step's end (a collective waiting for a peer) can be missed.
      horizon_ = (flush_now ? now : last_flush_ns_) - SettleNs();
      last_flush_ns_ = now;
      recent_longest_[recent_index_++ % recent_longest_.size()] = longest_ns_;
      longest_ns_ = 0;
      // May call BufferCompleted on this thread.
      api_.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      if (!timestamps_are_host_) Calibrate();
    }
    Hub& h = TheHub();
    std::array<Hub::Completed, kBuffers> batch;
    size_t n = 0;
    {
      std::lock_guard<std::mutex> lock(h.mu);
      n = h.completed_count;
      std::copy_n(h.completed.begin(), n, batch.begin());
      h.completed_count = 0;
    }
    // Two passes: API records (launch times by correlation id) first, so
    // that device records of the same batch find their launch.
    buffers_ += n;
    for (size_t i = 0; i < n; ++i) Parse(batch[i], /*api_only=*/true, out);
    for (size_t i = 0; i < n; ++i) Parse(batch[i], /*api_only=*/false, out);
    {
      std::lock_guard<std::mutex> lock(h.mu);
      for (size_t i = 0; i < n; ++i) h.in_use[h.IndexOf(batch[i].buffer)] = false;
    }
    return horizon_;
  }

  uint64_t records() const override { return records_; }
  uint64_t buffers() const override { return buffers_; }
  uint64_t dropped() const override {
    return started_ ? TheHub().dropped.load(std::memory_order_relaxed) - dropped_at_start_ : 0;
  }

  // Disables what was enabled, flushes, unsubscribes. Never cuptiFinalize:
  // another subscriber may exist. Idempotent.
  void Stop() override {
    if (!owner_) return;
    owner_ = false;
    if (getpid() != pid_) return;  // a forked child: the parent's CUPTI is not ours
    for (CUpti_ActivityKind kind : enabled_) api_.ActivityDisable(kind);
    enabled_.clear();
    api_.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // CUPTI hands its buffers back
    if (subscriber_ != nullptr) api_.Unsubscribe(subscriber_);
    subscriber_ = nullptr;
    Hub& h = TheHub();
    std::lock_guard<std::mutex> lock(h.mu);
    h.active = false;
    h.get_dropped = nullptr;
    for (size_t i = 0; i < h.completed_count; ++i)
      h.in_use[h.IndexOf(h.completed[i].buffer)] = false;
    h.completed_count = 0;
  }

 private:
  // Whether CUPTI may be started: not off, not injected by a profiler, CUDA
  // in use, the library loaded (its version in *version), no other session.
  absl::Status Prepare(uint32_t* version) {
    if (mode_ == Cupti::kOff)
      return absl::UnavailableError("CUPTI is off (Options::cupti, GPUSCOPE_CUPTI)");
    for (const char* var : {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"}) {
      if (const char* v = std::getenv(var); v != nullptr && v[0] != '\0') {
        return absl::FailedPreconditionError(absl::StrCat(
            var,
            " is set: a profiler (Nsight Systems?) injected itself; gpuscope leaves CUPTI to it"));
      }
    }
    // CUPTI only once CUDA is in use: gpuscope never initializes CUDA (a
    // process that did cannot use it in children it forks).
    if (absl::Status ready = CudaInitializedInProcess(); !ready.ok()) return ready;
    absl::Status load = Load();
    if (!load.ok()) return load;
    api_.GetVersion(version);
    {
      std::lock_guard<std::mutex> lock(TheHub().mu);
      if (TheHub().active) {
        return absl::FailedPreconditionError(
            "another gpuscope session holds CUPTI (one at a time)");
      }
    }
    return absl::OkStatus();
  }

  // Subscribe: shared and named where the library can share (13.2+);
  // an older CUPTI (one subscriber: a profiler started later would record
  // no GPU events) only when asked.
  absl::Status Subscribe(uint32_t version) {
    const bool can_share = api_.SubscribeV2 != nullptr && version >= cupti::kFirstSharingVersion;
    if (!can_share && mode_ != Cupti::kOn) {
      return absl::FailedPreconditionError(absl::StrCat(
          "CUPTI ", version,
          " allows one subscriber (sharing needs 13.2 and cuptiSubscribe_v2): "
          "gpuscope takes it only when asked (Options::cupti = Cupti::kOn, cupti=True, "
          "GPUSCOPE_CUPTI=on), so that torch.profiler keeps recording GPU events"));
    }
    CUptiResult r = CUPTI_SUCCESS;
    char old_name[256] = {0};
    const char* call = "cuptiSubscribe";
    if (api_.SubscribeV2 != nullptr) {
      call = "cuptiSubscribe_v2";
      cupti::SubscriberParams params{
          can_share ? cupti::kSubscriberParamsSize132 : cupti::kSubscriberParamsSize130, "gpuscope",
          old_name, sizeof(old_name), 1};
      auto* as_declared = reinterpret_cast<cupti::SubscribeV2Params*>(&params);
      r = api_.SubscribeV2(&subscriber_, IgnoreCallback, nullptr, as_declared);
      // A build that does not know the field refuses 13.2's size.
      if (r == CUPTI_ERROR_INVALID_PARAMETER && can_share) {
        params.structSize = cupti::kSubscriberParamsSize130;
        r = api_.SubscribeV2(&subscriber_, IgnoreCallback, nullptr, as_declared);
      }
    } else {
      r = api_.Subscribe(&subscriber_, IgnoreCallback, nullptr);
    }
    if (r != CUPTI_SUCCESS) {
      subscriber_ = nullptr;
      // Not a fault: someone else holds CUPTI, and is named.
      if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        return CuptiStatus(
            api_, r, call, __FILE__, __LINE__, absl::StatusCode::kFailedPrecondition,
            absl::StrCat("CUPTI is held by ",
                         old_name[0] != '\0' ? old_name : "another tool (a profiler?)"));
      }
      return CuptiStatus(api_, r, call, __FILE__, __LINE__);
    }
    return absl::OkStatus();
  }

  // Takes the process-wide buffers and owns CUPTI; aligns its clock.
  void TakeHub() {
    {
      Hub& h = TheHub();
      std::lock_guard<std::mutex> lock(h.mu);
      // Buffers CUPTI may still hold from an earlier session stay in use.
      if (h.storage == nullptr) h.storage.reset(new uint8_t[kBuffers * kBufferBytes]);
      h.completed_count = 0;
      h.get_dropped = api_.ActivityGetNumDroppedRecords;
      h.active = true;
    }
    owner_ = true;
    started_ = true;
    pid_ = getpid();
    dropped_at_start_ = TheHub().dropped.load(std::memory_order_relaxed);
    timestamps_are_host_ =
        api_.ActivityRegisterTimestampCallback != nullptr &&
        api_.ActivityRegisterTimestampCallback(MonotonicTimestamp) == CUPTI_SUCCESS;
    Calibrate();
  }

  // Registers the buffer callbacks and enables each kind of record; on a
  // failure, stops what was started.
  absl::Status EnableActivity() {
    if (absl::Status e =
            GPUSCOPE_CUPTI_CALL(api_, ActivityRegisterCallbacks(BufferRequested, BufferCompleted));
        !e.ok()) {
      Stop();
      return e;
    }
    for (CUpti_ActivityKind kind : kKinds) {
      // Named by the kind's number, which CUPTI's documentation lists.
      if (absl::Status e =
              CuptiStatus(api_, api_.ActivityEnable(kind),
                          absl::StrCat("cuptiActivityEnable(", static_cast<int>(kind), ")"),
                          __FILE__, __LINE__);
          !e.ok()) {
        Stop();
        return e;
      }
      enabled_.push_back(kind);
    }
    return absl::OkStatus();
  }

  absl::Status Load() {
    std::string tried;
    for (const std::string& candidate : CuptiCandidates()) {
      absl::StatusOr<DynLib> lib = DynLib::Open(candidate);
      if (!lib.ok()) {
        absl::StrAppend(&tried, tried.empty() ? "" : "; ", lib.status().message());
        continue;
      }
      absl::StatusOr<CuptiApi> api = BindCupti(*lib);
      if (!api.ok()) return api.status();
      api_ = *api;
      lib->Leak();  // CUPTI may call back until the process exits
      path_ = candidate;
      return absl::OkStatus();
    }
    return absl::NotFoundError(absl::StrCat("no CUPTI library found (", tried, ")"));
  }

  // Without the timestamp callback, CUPTI's clock is mapped onto
  // CLOCK_MONOTONIC by an offset taken between two reads.
  void Calibrate() {
    if (timestamps_are_host_) {
      offset_ns_ = 0;
      return;
    }
    uint64_t cupti_now = 0;
    const int64_t before = ReadMonotonicNs();
    if (api_.GetTimestamp(&cupti_now) != CUPTI_SUCCESS) return;
    const int64_t after = ReadMonotonicNs();
    offset_ns_ = before + (after - before) / 2 - static_cast<int64_t>(cupti_now);
  }
  int64_t Host(uint64_t t) const { return static_cast<int64_t>(t) + offset_ns_; }

  // The kernel's class and its id in the name table, by CUPTI's name
  // pointer (one per function, stable while its module is loaded).
  std::pair<KernelClass, uint32_t> Named(const char* name) {
    if (name == nullptr) return {KernelClass::kOther, kNoKernelName};
    if (const auto it = names_.find(name); it != names_.end()) return it->second;
    const std::pair<KernelClass, uint32_t> named{ClassifyKernel(name), InternKernelName(name)};
    if (names_.size() < kMaxNames) names_.emplace(name, named);
    return named;
  }

  void Parse(const Hub::Completed& c, bool api_only, std::vector<DeviceInterval>* out) {
    CUpti_Activity* record = nullptr;
    while (api_.ActivityGetNextRecord(c.buffer, c.valid, &record) == CUPTI_SUCCESS &&
           record != nullptr) {
      const CUpti_ActivityKind kind = record->kind;
      if (kind == CUPTI_ACTIVITY_KIND_RUNTIME || kind == CUPTI_ACTIVITY_KIND_DRIVER) {
        if (!api_only) continue;
        const auto* a = reinterpret_cast<const cupti::ApiRecord*>(record);
        launches_[a->correlationId % kCorrelationSlots] = {a->correlationId, Host(a->start)};
        continue;
      }
      if (api_only) continue;
      DeviceInterval d;
      uint32_t correlation = 0;
      switch (kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* k = reinterpret_cast<const cupti::KernelRecord*>(record);
          d = Interval(k->start, k->end, k->deviceId, k->streamId, ActivityKind::kKernel);
          std::tie(d.kernel_class, d.name) = Named(k->name);
          correlation = k->correlationId;
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* m = reinterpret_cast<const cupti::MemcpyRecord*>(record);
          const ActivityKind ak =
              m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? ActivityKind::kMemcpyH2D
              : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? ActivityKind::kMemcpyD2H
                                                               : ActivityKind::kMemcpyOther;
          d = Interval(m->start, m->end, m->deviceId, m->streamId, ak);
          d.bytes = m->bytes;
          d.pageable =
              (ak == ActivityKind::kMemcpyH2D &&
               m->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE) ||
              (ak == ActivityKind::kMemcpyD2H && m->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE);
          correlation = m->correlationId;
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* m = reinterpret_cast<const cupti::MemsetRecord*>(record);
          d = Interval(m->start, m->end, m->deviceId, m->streamId, ActivityKind::kMemset);
          d.bytes = m->bytes;
          correlation = m->correlationId;
          break;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
          const auto* s = reinterpret_cast<const cupti::SyncRecord*>(record);
          // A stream waiting on an event does not block the host; the other
          // synchronizations (event, stream, context) do.
          if (s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT) continue;
          d = Interval(s->start, s->end, 0, s->streamId, ActivityKind::kSync);
          break;
        }
        default: continue;
      }
      if (correlation != 0) {
        const Launch& l = launches_[correlation % kCorrelationSlots];
        if (l.correlation == correlation) d.launch_ns = l.host_ns;
      }
      if (IsDeviceActivity(d.kind)) {
        ++records_;
        longest_ns_ = std::max(longest_ns_, d.end_ns - d.begin_ns);
      }
      out->push_back(d);
    }
  }

  DeviceInterval Interval(uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                          ActivityKind kind) const {
    DeviceInterval d;
    d.begin_ns = Host(start);
    d.end_ns = std::max(d.begin_ns, Host(end));
    d.device = device;
    d.stream = stream;
    d.kind = kind;
    return d;
  }

  const Cupti mode_;
  CuptiApi api_;
  std::string path_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool owner_ = false;
  bool started_ = false;
  uint64_t dropped_at_start_ = 0;
  bool timestamps_are_host_ = false;
  int64_t offset_ns_ = 0;
  std::vector<CUpti_ActivityKind> enabled_;
  int64_t last_flush_ns_ = INT64_MIN / 2;
  int64_t horizon_ = INT64_MIN;
  uint64_t records_ = 0;
  uint64_t buffers_ = 0;
  // The longest device activity since the last flush, and per flush over
  // the last 2 s (100 flushes), for the horizon's settle time.
  int64_t longest_ns_ = 0;
  std::array<int64_t, 100> recent_longest_{};
  size_t recent_index_ = 0;
  int64_t SettleNs() const {
    int64_t longest = longest_ns_;
    for (int64_t l : recent_longest_) longest = std::max(longest, l);
    return std::clamp<int64_t>(2 * longest, kMinSettleNs, kMaxSettleNs);
  }
  pid_t pid_ = 0;
  struct Launch {
    uint32_t correlation = 0;
    int64_t host_ns = -1;
  };
  std::vector<Launch> launches_ = std::vector<Launch>(kCorrelationSlots);
  // Kernel classes and name ids by name pointer: CUPTI gives every record
  // of a kernel the same name string, so each name is classified and
  // interned once. Bounded: past kMaxNames distinct kernels, names are
  // classified and looked up each time.
  static constexpr size_t kMaxNames = 1 << 14;
  std::unordered_map<const char*, std::pair<KernelClass, uint32_t>> names_;
};

}  // namespace

Cupti EffectiveCuptiMode(Cupti requested) {
  if (requested != Cupti::kAuto) return requested;
  const char* env = std::getenv("GPUSCOPE_CUPTI");
  if (env == nullptr) return requested;
  const std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(env));
  if (v.empty() || v == "auto") return Cupti::kAuto;
  if (const std::optional<bool> on = ParseBool(v); on.has_value())
    return *on ? Cupti::kOn : Cupti::kOff;
  LogOnce(
      "env-GPUSCOPE_CUPTI", LogLevel::kWarning,
      absl::StrCat("GPUSCOPE_CUPTI='", absl::CHexEscape(env),
                   "' is not auto or a boolean (1, true, "
                   "yes, on; 0, false, no, off): ignored, CUPTI is used when it can be shared"));
  return Cupti::kAuto;
}

std::unique_ptr<ActivitySource> MakeCuptiActivitySource(Cupti mode) {
  return std::make_unique<CuptiActivity>(EffectiveCuptiMode(mode));
}

}  // namespace gpuscope::internal
