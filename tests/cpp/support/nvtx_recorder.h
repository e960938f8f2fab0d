// NVTX recorder: an NVTX v3 *injection library* for tests.
//
// nvtx_recorder.cc builds into a shared library (libnvtx_recorder.so) that
// NVTX loads the way Nsight Systems loads its own: at the first NVTX call in
// the process, NVTX reads NVTX_INJECTION64_PATH, dlopen()s that file and
// calls its InitializeInjectionNvtx2(), which points NVTX's function tables
// at the recorder. Every NVTX call after that is recorded as an NvtxEvent.
//
// How a test uses it:
//   1. Link the test executable against the recorder library AND point
//      NVTX_INJECTION64_PATH at the same file, either in the test's
//      environment (e.g. ctest's ENVIRONMENT property) or with
//      setenv("NVTX_INJECTION64_PATH", path, 1) in main() BEFORE the first
//      NVTX call anywhere in the process (static initializers included).
//      NVTX decides once per process (per NVTX instance) whether a tool is
//      attached; an NVTX call before the variable is set leaves NVTX
//      permanently disabled for that process. dlopen() of an already loaded
//      file returns the same instance, so the library NVTX initializes is the
//      one these functions read.
//   2. Give such tests their own executable / process: the recorder is
//      process-global, and overriding NVTX_INJECTION64_PATH replaces any
//      profiler (nsys) that would otherwise attach.
//   3. Check NvtxRecorderAttached() (after any NVTX call), call
//      NvtxRecorderClear() at the start of each test, exercise the code,
//      then inspect NvtxRecorderEvents().
//
// The functions below work whether or not the test links the library: they
// find the recorder's extern "C" exports in the process (linked), or in the
// file named by NVTX_INJECTION64_PATH if NVTX already loaded it. If neither
// is found, NvtxRecorderAttached() is false and no events are returned.
// Link with -ldl (older glibc) when using this header.
//
// Recording rules:
//   - kDomainCreate: domain = the new domain's name, message empty.
//   - kRegisterString: domain = the owning domain, message = the string.
//   - kPush / kMark: message = ASCII text, or the text of a registered
//     string handle (resolved by the recorder), or a wide string converted to
//     UTF-8; integer payloads (int64/uint64/int32/uint32) and ARGB colors
//     copied when the attributes carry them (double/float payloads are not
//     recorded: has_payload stays false).
//   - kPop: domain only; message/payload/color are empty.
//   - kCounterRegister (the NVTX counters extension): message = the
//     counter's name, payload = the id the recorder gave it.
//   - kCounterSample: message = the counter's name, value = the sample.
//   - The core (non-domain) API (nvtxRangePushA, nvtxMarkA, ...) and a null
//     domain handle record domain "" (the default domain).
//   - thread_id is the kernel thread id (gettid()) of the calling thread;
//     NvtxRecorderCurrentThreadId() returns the same value for the caller.
//   - NvtxRecorderClear() drops recorded events only; domain and string
//     handles stay valid for the life of the process.

#ifndef GPUSCOPE_TESTS_CPP_SUPPORT_NVTX_RECORDER_H_
#define GPUSCOPE_TESTS_CPP_SUPPORT_NVTX_RECORDER_H_

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

// ---- C ABI exported by the recorder library (nvtx_recorder.cc) ----------

extern "C" {

// One recorded event as seen through the C ABI. The strings are owned by the
// recorder and are valid only during the visitor call.
struct GpuscopeNvtxRecorderRawEvent {
  int kind;  // gpuscope::testing::NvtxEvent::Kind as int
  const char* domain;
  const char* message;
  int has_payload;
  int64_t payload;
  int has_color;
  uint32_t color;
  uint64_t thread_id;
  double value;  // counter samples
};

typedef void (*GpuscopeNvtxRecorderVisitFn)(void* context,
                                            const GpuscopeNvtxRecorderRawEvent* event);

// Number of times an NVTX instance initialized the recorder (0 = never).
// Each module (executable / shared library) that compiles in the header-only
// NVTX has its own instance and initializes it on its own first call.
typedef int (*GpuscopeNvtxRecorderAttachCountFn)(void);
// Calls visit(context, event) for every recorded event, in order, while
// holding the recorder lock (visit must not call NVTX or the recorder).
typedef void (*GpuscopeNvtxRecorderVisitEventsFn)(GpuscopeNvtxRecorderVisitFn visit, void* context);
typedef void (*GpuscopeNvtxRecorderClearFn)(void);

}  // extern "C"

namespace gpuscope::testing {

struct NvtxEvent {
  enum class Kind {
    kDomainCreate,
    kRegisterString,
    kPush,
    kPop,
    kMark,
    kCounterRegister,
    kCounterSample
  };
  Kind kind;
  std::string domain;   // domain name ("" for the default domain)
  std::string message;  // resolved text: registered strings resolved to
                        // their text, ASCII messages copied
  bool has_payload = false;
  int64_t payload = 0;  // int64/uint64/int32/uint32 payloads converted
  bool has_color = false;
  uint32_t color = 0;      // ARGB
  uint64_t thread_id = 0;  // kernel thread id (gettid) of the calling thread
  double value = 0;        // kCounterSample: the value (integer samples converted)
};

namespace nvtx_recorder_internal {

// Finds an exported recorder function: first in the process's global scope
// (test linked the library), then in the already-loaded injection file
// (RTLD_NOLOAD: never loads anything itself).
inline void* FindSymbol(const char* name) {
  if (void* sym = dlsym(RTLD_DEFAULT, name)) return sym;
  const char* path = std::getenv("NVTX_INJECTION64_PATH");
  if (path == nullptr || *path == '\0') return nullptr;
  void* handle = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* sym = dlsym(handle, name);
  dlclose(handle);  // drops only the reference RTLD_NOLOAD added
  return sym;
}

template <typename Fn>
Fn Find(const char* name) {
  return reinterpret_cast<Fn>(FindSymbol(name));
}

inline void AppendEvent(void* context, const GpuscopeNvtxRecorderRawEvent* raw) {
  auto* out = static_cast<std::vector<NvtxEvent>*>(context);
  NvtxEvent event;
  event.kind = static_cast<NvtxEvent::Kind>(raw->kind);
  event.domain = raw->domain != nullptr ? raw->domain : "";
  event.message = raw->message != nullptr ? raw->message : "";
  event.has_payload = raw->has_payload != 0;
  event.payload = raw->payload;
  event.has_color = raw->has_color != 0;
  event.color = raw->color;
  event.thread_id = raw->thread_id;
  event.value = raw->value;
  out->push_back(std::move(event));
}

}  // namespace nvtx_recorder_internal

// How many times NVTX initialized the recorder (one per NVTX instance).
inline int NvtxRecorderAttachCount() {
  auto fn = nvtx_recorder_internal::Find<GpuscopeNvtxRecorderAttachCountFn>(
      "gpuscope_nvtx_recorder_attach_count");
  return fn != nullptr ? fn() : 0;
}

// True once NVTX has initialized this injection.
inline bool NvtxRecorderAttached() { return NvtxRecorderAttachCount() > 0; }

// A copy of everything recorded so far, in order.
inline std::vector<NvtxEvent> NvtxRecorderEvents() {
  std::vector<NvtxEvent> events;
  auto fn = nvtx_recorder_internal::Find<GpuscopeNvtxRecorderVisitEventsFn>(
      "gpuscope_nvtx_recorder_visit_events");
  if (fn != nullptr) fn(&nvtx_recorder_internal::AppendEvent, &events);
  return events;
}

// Drops all recorded events (registered domains and strings stay valid).
inline void NvtxRecorderClear() {
  auto fn =
      nvtx_recorder_internal::Find<GpuscopeNvtxRecorderClearFn>("gpuscope_nvtx_recorder_clear");
  if (fn != nullptr) fn();
}

// The thread_id the recorder stores for events from the calling thread.
inline uint64_t NvtxRecorderCurrentThreadId() { return static_cast<uint64_t>(syscall(SYS_gettid)); }

}  // namespace gpuscope::testing

#endif  // GPUSCOPE_TESTS_CPP_SUPPORT_NVTX_RECORDER_H_
