// NVTX v3 injection library that records NVTX calls for tests.
// See nvtx_recorder.h for how tests use it.
//
// Protocol (nvtx3/nvtxDetail/nvtxInit.h, nvtxImpl.h, nvtxTypes.h): at the
// first NVTX call, each NVTX instance dlopen()s $NVTX_INJECTION64_PATH and
// calls its exported InitializeInjectionNvtx2(getExportTable). The injection
// asks for the NVTX_ETID_CALLBACKS export table, calls its
// GetModuleFunctionTable(module, &table, &size) for each callback module, and
// for each callback id it implements writes its function into *table[id]
// (table[id] points at NVTX's function-pointer slot). It must return non-zero:
// a zero return makes NVTX dlclose() the library and turn every call into a
// no-op. Slots the injection leaves alone become no-ops too.

#include "support/nvtx_recorder.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

// Types, constants and callback ids only: this library must not contain an
// NVTX instance of its own.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>

// NVTX leaves the handle structs opaque for the tool to define. Handles the
// recorder returns point at these; they are never freed, so a handle stays
// valid for the life of the process.
struct nvtxDomainRegistration_st {
  std::string name;
};
struct nvtxStringRegistration_st {
  nvtxDomainHandle_t domain;
  std::string text;
};

namespace {

using Kind = gpuscope::testing::NvtxEvent::Kind;

struct RecordedEvent {
  Kind kind;
  std::string domain;
  std::string message;
  bool has_payload = false;
  int64_t payload = 0;
  bool has_color = false;
  uint32_t color = 0;
  uint64_t thread_id = 0;
  double value = 0;
};

struct State {
  std::mutex mu;
  std::vector<RecordedEvent> events;
  // Owners of every handle handed out, plus lookups.
  std::vector<std::unique_ptr<nvtxDomainRegistration_st>> domains;
  std::vector<std::unique_ptr<nvtxStringRegistration_st>> strings;
  std::unordered_map<std::string, nvtxDomainHandle_t> domain_by_name;
  std::map<std::pair<nvtxDomainHandle_t, std::string>, nvtxStringHandle_t> string_by_key;
  std::unordered_set<nvtxDomainHandle_t> valid_domains;
  std::unordered_set<nvtxStringHandle_t> valid_strings;
  std::map<uint64_t, std::pair<std::string, std::string>> counters;  // id -> (domain, name)
};

// Leaked on purpose: NVTX calls can arrive from other static destructors
// after this library's statics would have been destroyed.
State& GetState() {
  static State* const state = new State;
  return *state;
}

std::atomic<int> g_attach_count{0};

uint64_t CurrentThreadId() {
  thread_local const uint64_t id = gpuscope::testing::NvtxRecorderCurrentThreadId();
  return id;
}

// Push/pop nesting level per (thread, domain), for the API's return values.
// Key nullptr is the default domain.
int& Depth(nvtxDomainHandle_t domain) {
  thread_local std::unordered_map<nvtxDomainHandle_t, int> depth;
  return depth[domain];
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string WideToUtf8(const wchar_t* text) {
  std::string out;
  if (text == nullptr) return out;
  for (; *text != L'\0'; ++text) {
    AppendUtf8(out, static_cast<uint32_t>(*text));
  }
  return out;
}

std::string Narrow(const char* text) { return text != nullptr ? text : ""; }

// Callers hold State::mu.
std::string DomainNameLocked(const State& state, nvtxDomainHandle_t domain) {
  if (domain == nullptr) return "";
  if (state.valid_domains.count(domain) == 0) return "<unknown domain>";
  return domain->name;
}

// True if the attributes struct, as sized by the caller, contains `field`.
#define NVTX_RECORDER_HAS_FIELD(attr, field)                                        \
  (offsetof(nvtxEventAttributes_t, field) + sizeof(nvtxEventAttributes_t::field) <= \
   static_cast<size_t>((attr)->size))

// Fills message/payload/color of `event` from `attr`. Caller holds State::mu.
void DecodeAttributesLocked(const State& state, const nvtxEventAttributes_t* attr,
                            RecordedEvent& event) {
  if (attr == nullptr) return;
  if (NVTX_RECORDER_HAS_FIELD(attr, message)) {
    switch (attr->messageType) {
      case NVTX_MESSAGE_TYPE_ASCII: event.message = Narrow(attr->message.ascii); break;
      case NVTX_MESSAGE_TYPE_UNICODE: event.message = WideToUtf8(attr->message.unicode); break;
      case NVTX_MESSAGE_TYPE_REGISTERED: {
        nvtxStringHandle_t handle = attr->message.registered;
        if (handle != nullptr && state.valid_strings.count(handle) != 0) {
          event.message = handle->text;
        } else {
          event.message = "<unknown registered string>";
        }
        break;
      }
      default: break;
    }
  }
  if (NVTX_RECORDER_HAS_FIELD(attr, payload)) {
    switch (attr->payloadType) {
      case NVTX_PAYLOAD_TYPE_INT64:
        event.has_payload = true;
        event.payload = attr->payload.llValue;
        break;
      case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
        event.has_payload = true;
        event.payload = static_cast<int64_t>(attr->payload.ullValue);
        break;
      case NVTX_PAYLOAD_TYPE_INT32:
        event.has_payload = true;
        event.payload = attr->payload.iValue;
        break;
      case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
        event.has_payload = true;
        event.payload = attr->payload.uiValue;
        break;
      default:  // unknown, double, float: not recorded
        break;
    }
  }
  if (NVTX_RECORDER_HAS_FIELD(attr, color) && attr->colorType == NVTX_COLOR_ARGB) {
    event.has_color = true;
    event.color = attr->color;
  }
}

#undef NVTX_RECORDER_HAS_FIELD

void RecordWithAttributes(Kind kind, nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr) {
  State& state = GetState();
  RecordedEvent event{};
  event.kind = kind;
  event.thread_id = CurrentThreadId();
  std::lock_guard<std::mutex> lock(state.mu);
  event.domain = DomainNameLocked(state, domain);
  DecodeAttributesLocked(state, attr, event);
  state.events.push_back(std::move(event));
}

void RecordText(Kind kind, std::string message) {
  State& state = GetState();
  RecordedEvent event{};
  event.kind = kind;
  event.message = std::move(message);
  event.thread_id = CurrentThreadId();
  std::lock_guard<std::mutex> lock(state.mu);
  state.events.push_back(std::move(event));
}

void RecordPop(nvtxDomainHandle_t domain) {
  State& state = GetState();
  RecordedEvent event{};
  event.kind = Kind::kPop;
  event.thread_id = CurrentThreadId();
  std::lock_guard<std::mutex> lock(state.mu);
  event.domain = DomainNameLocked(state, domain);
  state.events.push_back(std::move(event));
}

// Push returns the 0-based level of the range started; pop returns the level
// of the range ended, or a negative value when nothing was pushed.
int PushLevel(nvtxDomainHandle_t domain) { return Depth(domain)++; }
int PopLevel(nvtxDomainHandle_t domain) {
  int& depth = Depth(domain);
  if (depth <= 0) return -1;
  return --depth;
}

nvtxDomainHandle_t CreateDomain(std::string name) {
  State& state = GetState();
  RecordedEvent event{};
  event.kind = Kind::kDomainCreate;
  event.thread_id = CurrentThreadId();
  event.domain = name;
  std::lock_guard<std::mutex> lock(state.mu);
  nvtxDomainHandle_t handle;
  auto it = state.domain_by_name.find(name);
  if (it != state.domain_by_name.end()) {
    handle = it->second;
  } else {
    state.domains.push_back(
        std::make_unique<nvtxDomainRegistration_st>(nvtxDomainRegistration_st{name}));
    handle = state.domains.back().get();
    state.domain_by_name.emplace(std::move(name), handle);
    state.valid_domains.insert(handle);
  }
  state.events.push_back(std::move(event));
  return handle;
}

nvtxStringHandle_t RegisterString(nvtxDomainHandle_t domain, std::string text) {
  State& state = GetState();
  RecordedEvent event{};
  event.kind = Kind::kRegisterString;
  event.thread_id = CurrentThreadId();
  event.message = text;
  std::lock_guard<std::mutex> lock(state.mu);
  event.domain = DomainNameLocked(state, domain);
  nvtxStringHandle_t handle;
  auto key = std::make_pair(domain, text);
  auto it = state.string_by_key.find(key);
  if (it != state.string_by_key.end()) {
    handle = it->second;
  } else {
    state.strings.push_back(std::make_unique<nvtxStringRegistration_st>(
        nvtxStringRegistration_st{domain, std::move(text)}));
    handle = state.strings.back().get();
    state.string_by_key.emplace(std::move(key), handle);
    state.valid_strings.insert(handle);
  }
  state.events.push_back(std::move(event));
  return handle;
}

// ---- Callbacks installed into NVTX's function tables ----------------------
// Signatures must match the *_impl_fntype typedefs in nvtxTypes.h.

// Core module: the default domain.
void NVTX_API MarkEx(const nvtxEventAttributes_t* attr) {
  RecordWithAttributes(Kind::kMark, nullptr, attr);
}
void NVTX_API MarkA(const char* message) { RecordText(Kind::kMark, Narrow(message)); }
void NVTX_API MarkW(const wchar_t* message) { RecordText(Kind::kMark, WideToUtf8(message)); }
int NVTX_API RangePushEx(const nvtxEventAttributes_t* attr) {
  RecordWithAttributes(Kind::kPush, nullptr, attr);
  return PushLevel(nullptr);
}
int NVTX_API RangePushA(const char* message) {
  RecordText(Kind::kPush, Narrow(message));
  return PushLevel(nullptr);
}
int NVTX_API RangePushW(const wchar_t* message) {
  RecordText(Kind::kPush, WideToUtf8(message));
  return PushLevel(nullptr);
}
int NVTX_API RangePop() {
  RecordPop(nullptr);
  return PopLevel(nullptr);
}

// Core2 module: domains and registered strings.
void NVTX_API DomainMarkEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr) {
  RecordWithAttributes(Kind::kMark, domain, attr);
}
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr) {
  RecordWithAttributes(Kind::kPush, domain, attr);
  return PushLevel(domain);
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t domain) {
  RecordPop(domain);
  return PopLevel(domain);
}
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t domain, const char* text) {
  return RegisterString(domain, Narrow(text));
}
nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t domain, const wchar_t* text) {
  return RegisterString(domain, WideToUtf8(text));
}
nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) { return CreateDomain(Narrow(name)); }
nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* name) {
  return CreateDomain(WideToUtf8(name));
}
// Handles are kept alive (and valid) after destroy; nothing is recorded.
void NVTX_API DomainDestroy(nvtxDomainHandle_t /*domain*/) {}

// Counters extension (module NVTX_EXT_COUNTERS_MODULEID, one segment).
uint64_t NVTX_API CounterRegister(nvtxDomainHandle_t domain, const nvtxCounterAttr_t* attr) {
  State& state = GetState();
  RecordedEvent event{};
  event.kind = Kind::kCounterRegister;
  event.thread_id = CurrentThreadId();
  event.message = attr != nullptr ? Narrow(attr->name) : "";
  std::lock_guard<std::mutex> lock(state.mu);
  event.domain = DomainNameLocked(state, domain);
  const uint64_t id = NVTX_COUNTER_ID_DYNAMIC_START + state.counters.size();
  state.counters[id] = {event.domain, event.message};
  event.has_payload = true;
  event.payload = static_cast<int64_t>(id);
  state.events.push_back(std::move(event));
  return id;
}
void RecordCounterSample(nvtxDomainHandle_t domain, uint64_t id, double value) {
  State& state = GetState();
  RecordedEvent event{};
  event.kind = Kind::kCounterSample;
  event.thread_id = CurrentThreadId();
  event.value = value;
  std::lock_guard<std::mutex> lock(state.mu);
  event.domain = DomainNameLocked(state, domain);
  const auto it = state.counters.find(id);
  event.message = it != state.counters.end() ? it->second.second : "<unknown counter>";
  state.events.push_back(std::move(event));
}
void NVTX_API CounterSampleInt64(nvtxDomainHandle_t domain, uint64_t id, int64_t value) {
  RecordCounterSample(domain, id, static_cast<double>(value));
}
void NVTX_API CounterSampleFloat64(nvtxDomainHandle_t domain, uint64_t id, double value) {
  RecordCounterSample(domain, id, value);
}

// Compile-time check that each callback has exactly NVTX's slot type, so the
// casts to NvtxFunctionPointer below are round-trip safe.
template <typename Expected, typename Actual>
NvtxFunctionPointer Slot(Actual fn) {
  static_assert(std::is_same_v<Expected, Actual>,
                "callback signature does not match NVTX's slot type");
  return reinterpret_cast<NvtxFunctionPointer>(fn);
}

struct TableEntry {
  unsigned int id;
  NvtxFunctionPointer fn;
};

bool Install(const NvtxExportTableCallbacks* callbacks, NvtxCallbackModule module,
             std::initializer_list<TableEntry> entries) {
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;  // number of valid ids: 1 .. size-1 (0 is unused)
  if (callbacks->GetModuleFunctionTable(module, &table, &size) == 0 || table == nullptr) {
    return false;
  }
  for (const TableEntry& entry : entries) {
    if (entry.id < size && table[entry.id] != nullptr) {
      *table[entry.id] = entry.fn;
    }
  }
  return true;
}

}  // namespace

// ---- Exports ------------------------------------------------------------

extern "C" {

// Entry point NVTX looks up with dlsym(). Returns non-zero on success (NVTX
// keeps the library attached), zero on failure (NVTX unloads it and turns all
// calls into no-ops). Called once per NVTX instance (module) in the process.
NVTX_DYNAMIC_EXPORT int NVTX_API
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  if (get_export_table == nullptr) return 0;
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr ||
      callbacks->struct_size < offsetof(NvtxExportTableCallbacks, GetModuleFunctionTable) +
                                   sizeof(callbacks->GetModuleFunctionTable) ||
      callbacks->GetModuleFunctionTable == nullptr) {
    return 0;
  }

  const bool core_ok =
      Install(callbacks, NVTX_CB_MODULE_CORE,
              {
                  {NVTX_CBID_CORE_MarkEx, Slot<nvtxMarkEx_impl_fntype>(&MarkEx)},
                  {NVTX_CBID_CORE_MarkA, Slot<nvtxMarkA_impl_fntype>(&MarkA)},
                  {NVTX_CBID_CORE_MarkW, Slot<nvtxMarkW_impl_fntype>(&MarkW)},
                  {NVTX_CBID_CORE_RangePushEx, Slot<nvtxRangePushEx_impl_fntype>(&RangePushEx)},
                  {NVTX_CBID_CORE_RangePushA, Slot<nvtxRangePushA_impl_fntype>(&RangePushA)},
                  {NVTX_CBID_CORE_RangePushW, Slot<nvtxRangePushW_impl_fntype>(&RangePushW)},
                  {NVTX_CBID_CORE_RangePop, Slot<nvtxRangePop_impl_fntype>(&RangePop)},
              });
  const bool core2_ok = Install(
      callbacks, NVTX_CB_MODULE_CORE2,
      {
          {NVTX_CBID_CORE2_DomainMarkEx, Slot<nvtxDomainMarkEx_impl_fntype>(&DomainMarkEx)},
          {NVTX_CBID_CORE2_DomainRangePushEx,
           Slot<nvtxDomainRangePushEx_impl_fntype>(&DomainRangePushEx)},
          {NVTX_CBID_CORE2_DomainRangePop, Slot<nvtxDomainRangePop_impl_fntype>(&DomainRangePop)},
          {NVTX_CBID_CORE2_DomainRegisterStringA,
           Slot<nvtxDomainRegisterStringA_impl_fntype>(&DomainRegisterStringA)},
          {NVTX_CBID_CORE2_DomainRegisterStringW,
           Slot<nvtxDomainRegisterStringW_impl_fntype>(&DomainRegisterStringW)},
          {NVTX_CBID_CORE2_DomainCreateA, Slot<nvtxDomainCreateA_impl_fntype>(&DomainCreateA)},
          {NVTX_CBID_CORE2_DomainCreateW, Slot<nvtxDomainCreateW_impl_fntype>(&DomainCreateW)},
          {NVTX_CBID_CORE2_DomainDestroy, Slot<nvtxDomainDestroy_impl_fntype>(&DomainDestroy)},
      });
  if (!core_ok || !core2_ok) return 0;

  // Documented as required of tools (currently ignored by NVTX).
  const auto* version =
      static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
  if (version != nullptr &&
      version->struct_size >= offsetof(NvtxExportTableVersionInfo, SetInjectionNvtxVersion) +
                                  sizeof(version->SetInjectionNvtxVersion) &&
      version->SetInjectionNvtxVersion != nullptr) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }

  g_attach_count.fetch_add(1, std::memory_order_acq_rel);
  return 1;
}

// Entry point of NVTX extensions (nvtxDetail/nvtxExtInit.h): fills the
// function slots of the counters module; other modules stay no-ops.
NVTX_DYNAMIC_EXPORT int NVTX_API InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* info) {
  if (info == nullptr) return 0;
  if (info->moduleId != NVTX_EXT_COUNTERS_MODULEID || info->segmentsCount < 1) return 1;
  nvtxExtModuleSegment_t& segment = info->segments[0];
  const auto set = [&](size_t id, auto fn) {
    if (id < segment.slotCount) segment.functionSlots[id] = reinterpret_cast<intptr_t>(fn);
  };
  set(NVTX3EXT_CBID_nvtxCounterRegister, &CounterRegister);
  set(NVTX3EXT_CBID_nvtxCounterSampleInt64, &CounterSampleInt64);
  set(NVTX3EXT_CBID_nvtxCounterSampleFloat64, &CounterSampleFloat64);
  return 1;
}

__attribute__((visibility("default"))) int gpuscope_nvtx_recorder_attach_count(void) {
  return g_attach_count.load(std::memory_order_acquire);
}

__attribute__((visibility("default"))) void gpuscope_nvtx_recorder_visit_events(
    GpuscopeNvtxRecorderVisitFn visit, void* context) {
  if (visit == nullptr) return;
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  for (const RecordedEvent& event : state.events) {
    GpuscopeNvtxRecorderRawEvent raw{};
    raw.kind = static_cast<int>(event.kind);
    raw.domain = event.domain.c_str();
    raw.message = event.message.c_str();
    raw.has_payload = event.has_payload ? 1 : 0;
    raw.payload = event.payload;
    raw.has_color = event.has_color ? 1 : 0;
    raw.color = event.color;
    raw.thread_id = event.thread_id;
    raw.value = event.value;
    visit(context, &raw);
  }
}

__attribute__((visibility("default"))) void gpuscope_nvtx_recorder_clear(void) {
  State& state = GetState();
  std::lock_guard<std::mutex> lock(state.mu);
  state.events.clear();
}

}  // extern "C"

// The exports must match the function types nvtx_recorder.h looks them up as.
static_assert(std::is_same_v<decltype(&gpuscope_nvtx_recorder_attach_count),
                             GpuscopeNvtxRecorderAttachCountFn>);
static_assert(std::is_same_v<decltype(&gpuscope_nvtx_recorder_visit_events),
                             GpuscopeNvtxRecorderVisitEventsFn>);
static_assert(std::is_same_v<decltype(&gpuscope_nvtx_recorder_clear), GpuscopeNvtxRecorderClearFn>);
static_assert(
    std::is_same_v<decltype(&InitializeInjectionNvtx2), NvtxInitializeInjectionNvtxFunc_t>);
