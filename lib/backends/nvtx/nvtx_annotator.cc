// NVTX v3 annotator: every step and phase is a range in domain "gpuscope".
//
// NVTX is header-only; with no tool attached each call is a load and a
// branch on a function pointer (about 1 ns), and sessions skip even that
// (AnnotatorIsInert()). Strings are registered once
// (nvtxDomainRegisterStringA) so a push passes a handle, never text.

#include "backends/nvtx/nvtx_annotator.h"

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#if GPUSCOPE_HAVE_NVTX
#include "nvtx3/nvToolsExt.h"
#if __has_include("nvtx3/nvToolsExtCounters.h")
#include "nvtx3/nvToolsExtCounters.h"
#define GPUSCOPE_HAVE_NVTX_COUNTERS 1
#else
#define GPUSCOPE_HAVE_NVTX_COUNTERS 0  // NVTX before 3.2: ranges only
#endif
#endif

namespace gpuscope::internal {
namespace {

class NullAnnotator final : public Annotator {
 public:
  void RegisterName(uint16_t, std::string_view) override {}
  void PushStep(uint64_t) noexcept override {}
  void PushPhase(uint16_t) noexcept override {}
  void Pop() noexcept override {}
};

#if GPUSCOPE_HAVE_NVTX

// The process's one gpuscope domain, created on first use.
nvtxDomainHandle_t Domain() {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("gpuscope");
  return domain;
}

// ARGB colors for the built-in phases, in Phase order; steps are grey.
constexpr uint32_t kBuiltinColors[] = {
    0xFFE15759,  // data: red (input pipeline)
    0xFFF28E2B,  // h2d: orange
    0xFF4E79A7,  // forward: blue
    0xFF59A14F,  // backward: green
    0xFF76B7B2,  // optimizer: teal
    0xFFB07AA1,  // comm: purple
    0xFFEDC948,  // sync: yellow
    0xFF9C755F,  // eval: brown
    0xFFBAB0AC,  // checkpoint: grey
};
constexpr uint32_t kStepColor = 0xFF7F7F7F;

uint32_t CustomColor(std::string_view name) {
  // FNV-1a, folded into a mid-saturation color so text stays readable.
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return 0xFF000000u | (h & 0x007F7F7Fu) | 0x00404040u;
}

class NvtxAnnotator final : public Annotator {
 public:
  explicit NvtxAnnotator(int max_phases)
      : domain_(Domain()),
        capacity_(max_phases),
        names_(new nvtxStringHandle_t[static_cast<size_t>(max_phases)]()),
        colors_(new uint32_t[static_cast<size_t>(max_phases)]()) {
    step_name_ = nvtxDomainRegisterStringA(domain_, "step");
    inert_ = RangesAreNoOps();  // NVTX is initialized by now (Domain())
  }

  void RegisterName(uint16_t id, std::string_view name) override {
    if (id >= capacity_) return;
    const std::string text(name);
    names_[id] = nvtxDomainRegisterStringA(domain_, text.c_str());
    colors_[id] = id < std::size(kBuiltinColors) ? kBuiltinColors[id] : CustomColor(name);
  }

  void PushStep(uint64_t step_index) noexcept override {
    nvtxEventAttributes_t attr = BaseAttributes(step_name_, kStepColor);
    attr.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    attr.payload.llValue = static_cast<int64_t>(step_index);
    nvtxDomainRangePushEx(domain_, &attr);
  }

  void PushPhase(uint16_t id) noexcept override {
    // Ids are checked against the phase table before they get here.
    nvtxEventAttributes_t attr = BaseAttributes(names_[id], colors_[id]);
    nvtxDomainRangePushEx(domain_, &attr);
  }

  void Pop() noexcept override { nvtxDomainRangePop(domain_); }

  // No tool takes ranges: NVTX finished initializing (the constructor's
  // calls did it) and set the range functions to null, as it does when no
  // injection library loaded (nvtxInitOnce(): nvtxSetInitFunctionsToNoops()).
  // Reads NVTX v3's function table, which its inline API functions read.
  static bool RangesAreNoOps() {
    const auto& nvtx = NVTX_VERSIONED_IDENTIFIER(nvtxGlobals);
    return nvtx.initState == NVTX_INIT_STATE_COMPLETE &&
           nvtx.nvtxDomainRangePushEx_impl_fnptr == nullptr &&
           nvtx.nvtxDomainRangePop_impl_fnptr == nullptr;
  }
  bool inert() const { return inert_; }

  bool WantsCounters() const override { return GPUSCOPE_HAVE_NVTX_COUNTERS && tool_attached_; }

  void SampleCounters(double step_p95_ms, std::optional<double> gpu_idle_pct) override {
#if GPUSCOPE_HAVE_NVTX_COUNTERS
    if (p95_counter_ == 0) {
      p95_counter_ =
          Register("step time p95 (ms)", "gpuscope: p95 step time over the session's window");
      idle_counter_ =
          Register("GPU idle (%)", "gpuscope: GPU idle share of step time over the window");
    }
    nvtxCounterSampleFloat64(domain_, p95_counter_, step_p95_ms);
    if (gpu_idle_pct.has_value()) nvtxCounterSampleFloat64(domain_, idle_counter_, *gpu_idle_pct);
#else
    (void)step_p95_ms;
    (void)gpu_idle_pct;
#endif
  }

 private:
#if GPUSCOPE_HAVE_NVTX_COUNTERS
  uint64_t Register(const char* name, const char* description) {
    nvtxCounterAttr_t attr{};
    attr.structSize = sizeof(attr);
    attr.schemaId = NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE;
    attr.name = name;
    attr.description = description;
    attr.scopeId = NVTX_SCOPE_CURRENT_SW_PROCESS;
    attr.counterId = NVTX_COUNTER_ID_NONE;
    return nvtxCounterRegister(domain_, &attr);
  }
  uint64_t p95_counter_ = 0;
  uint64_t idle_counter_ = 0;
#endif

  static nvtxEventAttributes_t BaseAttributes(nvtxStringHandle_t message, uint32_t color) {
    nvtxEventAttributes_t attr{};
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.colorType = NVTX_COLOR_ARGB;
    attr.color = color;
    attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attr.message.registered = message;
    return attr;
  }

  const nvtxDomainHandle_t domain_;
  // Nsight Systems (or another NVTX tool) loads itself through this variable.
  const bool tool_attached_ = [] {
    const char* path = std::getenv("NVTX_INJECTION64_PATH");
    return path != nullptr && path[0] != '\0';
  }();
  const int capacity_;
  nvtxStringHandle_t step_name_ = nullptr;
  // Indexed by phase id; written by RegisterName() before the id is published.
  const std::unique_ptr<nvtxStringHandle_t[]> names_;
  const std::unique_ptr<uint32_t[]> colors_;
  bool inert_ = false;
};

#endif  // GPUSCOPE_HAVE_NVTX

}  // namespace

std::unique_ptr<Annotator> MakeNullAnnotator() { return std::make_unique<NullAnnotator>(); }

bool AnnotatorIsInert(const Annotator& annotator) {
  if (dynamic_cast<const NullAnnotator*>(&annotator) != nullptr) return true;
#if GPUSCOPE_HAVE_NVTX
  if (const auto* nvtx = dynamic_cast<const NvtxAnnotator*>(&annotator)) return nvtx->inert();
#endif
  return false;
}

std::unique_ptr<Annotator> MakeNvtxAnnotator([[maybe_unused]] int max_phases) {
#if GPUSCOPE_HAVE_NVTX
  return std::make_unique<NvtxAnnotator>(max_phases);
#else
  return MakeNullAnnotator();
#endif
}

}  // namespace gpuscope::internal
