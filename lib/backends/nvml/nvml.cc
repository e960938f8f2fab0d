#include "backends/nvml/nvml.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

// NVML's types and entry points from its own header; the library is still
// only dlopen()ed, never linked. NVML_NO_UNVERSIONED_FUNC_DEFS keeps nvml.h
// from renaming nvmlInit to nvmlInit_v2 and so on, so that the older names
// bound as fallbacks are declared too, and checked below.
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backends/vendor_status.h"
#include "base/dynlib.h"

namespace gpuscope::internal {
namespace {

// The interface's clocks-event reasons are NVML's bits: the mask passes
// through unchanged. (nvml.h names the hardware ones only by their older
// "throttle" names.)
constexpr bool SameBit(ClocksEventReason ours, unsigned long long nvml) { return ours == nvml; }
static_assert(SameBit(kGpuIdle, nvmlClocksEventReasonGpuIdle));
static_assert(SameBit(kApplicationsClocksSetting, nvmlClocksEventReasonApplicationsClocksSetting));
static_assert(SameBit(kSwPowerCap, nvmlClocksEventReasonSwPowerCap));
static_assert(SameBit(kHwSlowdown, nvmlClocksThrottleReasonHwSlowdown));
static_assert(SameBit(kSyncBoost, nvmlClocksEventReasonSyncBoost));
static_assert(SameBit(kSwThermalSlowdown, nvmlClocksEventReasonSwThermalSlowdown));
static_assert(SameBit(kHwThermalSlowdown, nvmlClocksThrottleReasonHwThermalSlowdown));
static_assert(SameBit(kHwPowerBrakeSlowdown, nvmlClocksThrottleReasonHwPowerBrakeSlowdown));
static_assert(SameBit(kDisplayClockSetting, nvmlClocksEventReasonDisplayClockSetting));

// The older names bound as fallbacks take what the newer ones take.
static_assert(std::is_same_v<decltype(&nvmlInit), decltype(&nvmlInit_v2)>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCount), decltype(&nvmlDeviceGetCount_v2)>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetHandleByIndex),
                             decltype(&nvmlDeviceGetHandleByIndex_v2)>);
static_assert(std::is_same_v<decltype(&nvmlSystemGetCudaDriverVersion),
                             decltype(&nvmlSystemGetCudaDriverVersion_v2)>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetComputeRunningProcesses_v3),
                             decltype(&nvmlDeviceGetComputeRunningProcesses_v2)>);
// The unversioned name (drivers before 450) fills the older, shorter
// entries: it has a pointer of its own, never the one above.
static_assert(sizeof(nvmlProcessInfo_v1_t) < sizeof(nvmlProcessInfo_t));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // the old name, for drivers before 535
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCurrentClocksThrottleReasons),
                             decltype(&nvmlDeviceGetCurrentClocksEventReasons)>);
#pragma GCC diagnostic pop

// NVML's name for `r` ("NVML_ERROR_DRIVER_NOT_LOADED"). NVML itself only
// words its codes (nvmlErrorString: "Driver Not Loaded"), and a library
// that failed to load or initialize is better not called, so the names are
// nvml.h's own enumerators, spelled as CUDA and CUPTI name theirs.
std::string NvmlReturnName(nvmlReturn_t r) {
#define GPUSCOPE_NVML_RETURN(name) \
  case name: return #name
  switch (r) {
    GPUSCOPE_NVML_RETURN(NVML_SUCCESS);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_UNINITIALIZED);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_NOT_SUPPORTED);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_NO_PERMISSION);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_ALREADY_INITIALIZED);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_NOT_FOUND);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_INSUFFICIENT_POWER);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_DRIVER_NOT_LOADED);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_TIMEOUT);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_IRQ_ISSUE);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_LIBRARY_NOT_FOUND);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_FUNCTION_NOT_FOUND);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_CORRUPTED_INFOROM);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_GPU_IS_LOST);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_RESET_REQUIRED);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_OPERATING_SYSTEM);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_LIB_RM_VERSION_MISMATCH);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_IN_USE);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_MEMORY);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_NO_DATA);
    GPUSCOPE_NVML_RETURN(NVML_ERROR_UNKNOWN);
    default: break;  // a code newer than this list
  }
#undef GPUSCOPE_NVML_RETURN
  return UnnamedVendorError("NVML", r);
}

// A failed NVML call in the convention of backends/vendor_status.h. NVML
// calls yield a Status only where NVML is being opened, so a failure means
// NVML is unusable here (no driver, a mismatched library): FailedPrecondition.
absl::Status NvmlStatus(nvmlReturn_t r, const char* call, const char* file, int line) {
  if (r == NVML_SUCCESS) return absl::OkStatus();
  return VendorCallError(absl::StatusCode::kFailedPrecondition, call, NvmlReturnName(r),
                         r == NVML_ERROR_DRIVER_NOT_LOADED ? "no NVIDIA driver is loaded" : "",
                         file, line);
}

// GPUSCOPE_NVML_CALL(api, Init()) calls api.Init(), reported as "nvmlInit()
// failed: NVML_ERROR_... at nvml.cc:<line>".
#define GPUSCOPE_NVML_CALL(api, call) \
  ::gpuscope::internal::NvmlStatus((api).call, "nvml" #call, __FILE__, __LINE__)

}  // namespace

// The entry points, typed by nvml.h's declarations of the versioned names
// bound first; an older driver's unversioned fallback takes the same (see
// above). All but the first four are optional: a driver without one leaves
// its field unknown.
struct Nvml::Api {
  decltype(&nvmlInit_v2) Init = nullptr;
  decltype(&nvmlShutdown) Shutdown = nullptr;
  decltype(&nvmlDeviceGetCount_v2) DeviceGetCount = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) DeviceGetHandleByIndex = nullptr;
  decltype(&nvmlSystemGetDriverVersion) SystemGetDriverVersion = nullptr;
  decltype(&nvmlSystemGetCudaDriverVersion_v2) SystemGetCudaDriverVersion = nullptr;
  decltype(&nvmlDeviceGetName) DeviceGetName = nullptr;
  decltype(&nvmlDeviceGetPciInfo_v3) DeviceGetPciInfo = nullptr;
  decltype(&nvmlDeviceGetClockInfo) DeviceGetClockInfo = nullptr;
  decltype(&nvmlDeviceGetMaxClockInfo) DeviceGetMaxClockInfo = nullptr;
  decltype(&nvmlDeviceGetPowerUsage) DeviceGetPowerUsage = nullptr;
  decltype(&nvmlDeviceGetEnforcedPowerLimit) DeviceGetEnforcedPowerLimit = nullptr;
  // Deprecated in NVML 13 for nvmlDeviceGetTemperatureV, but the entry point
  // every driver has.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  decltype(&nvmlDeviceGetTemperature) DeviceGetTemperature = nullptr;
#pragma GCC diagnostic pop
  decltype(&nvmlDeviceGetCurrentClocksEventReasons) DeviceGetClocksEventReasons = nullptr;
  decltype(&nvmlDeviceGetUtilizationRates) DeviceGetUtilizationRates = nullptr;
  decltype(&nvmlDeviceGetMemoryInfo) DeviceGetMemoryInfo = nullptr;
  // _v3 or _v2; the unversioned one in the second pointer only when neither
  // is there (see BindComputeProcesses()).
  decltype(&nvmlDeviceGetComputeRunningProcesses_v3) DeviceGetComputeRunningProcesses = nullptr;
  decltype(&nvmlDeviceGetComputeRunningProcesses) DeviceGetComputeRunningProcessesV1 = nullptr;
  decltype(&nvmlDeviceGetCurrPcieLinkGeneration) DeviceGetCurrPcieLinkGeneration = nullptr;
  decltype(&nvmlDeviceGetMaxPcieLinkGeneration) DeviceGetMaxPcieLinkGeneration = nullptr;
  decltype(&nvmlDeviceGetCurrPcieLinkWidth) DeviceGetCurrPcieLinkWidth = nullptr;
  decltype(&nvmlDeviceGetMaxPcieLinkWidth) DeviceGetMaxPcieLinkWidth = nullptr;
  decltype(&nvmlDeviceGetPcieThroughput) DeviceGetPcieThroughput = nullptr;
  decltype(&nvmlDeviceGetTotalEccErrors) DeviceGetTotalEccErrors = nullptr;
  decltype(&nvmlDeviceGetPersistenceMode) DeviceGetPersistenceMode = nullptr;
  decltype(&nvmlDeviceGetComputeMode) DeviceGetComputeMode = nullptr;
  decltype(&nvmlDeviceGetMigMode) DeviceGetMigMode = nullptr;
};

namespace {

// The driver's version ("580.65.06"); "" when unknown.
std::string DriverVersion(const Nvml::Api& api) {
  char buf[96] = {0};
  if (api.SystemGetDriverVersion == nullptr ||
      api.SystemGetDriverVersion(buf, sizeof(buf)) != NVML_SUCCESS) {
    return "";
  }
  return buf;
}

// Whether driver `version`'s nvmlDeviceGetComputeRunningProcesses_v3 fills
// 32-byte entries (nvmlProcessInfo_v3_t, usedGpuCcProtectedMemory added)
// instead of nvml.h's 24-byte nvmlProcessInfo_t. Drivers 535.43 to 535.86
// widened them without a version bump (the nvml.h they shipped declares
// it); 535.98 dropped _v3, and 535.104 brought it back with the 24-byte
// entries. Given an array of nvmlProcessInfo_t, those drivers would write
// past its end.
bool WritesWideProcessEntries(const std::string& version) {
  const std::vector<absl::string_view> parts = absl::StrSplit(version, '.');
  int major = 0, minor = 0;
  return parts.size() >= 2 && absl::SimpleAtoi(parts[0], &major) &&
         absl::SimpleAtoi(parts[1], &minor) && major == 535 && minor >= 43 && minor < 98;
}

// The compute processes' lister: _v3, else _v2 (the same entries; the one a
// driver with the wide _v3 entries gets), else the unversioned name of
// drivers before 450, whose entries are the older nvmlProcessInfo_v1_t.
void BindComputeProcesses(const DynLib& lib, Nvml::Api& api) {
  if (WritesWideProcessEntries(DriverVersion(api))) {
    (void)lib.Bind(&api.DeviceGetComputeRunningProcesses,
                   {"nvmlDeviceGetComputeRunningProcesses_v2"});
  } else {
    (void)lib.Bind(
        &api.DeviceGetComputeRunningProcesses,
        {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  }
  if (api.DeviceGetComputeRunningProcesses == nullptr) {
    (void)lib.Bind(&api.DeviceGetComputeRunningProcessesV1,
                   {"nvmlDeviceGetComputeRunningProcesses"});
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Nvml>> Nvml::Open() {
  const char* override_path = std::getenv("GPUSCOPE_LIBNVML");
  const std::string name =
      override_path != nullptr && override_path[0] != '\0' ? override_path : "libnvidia-ml.so.1";
  absl::StatusOr<DynLib> lib = DynLib::Open(name);
  if (!lib.ok()) return lib.status();
  auto api = std::make_unique<Api>();
  for (absl::Status s :
       {lib->Bind(&api->Init, {"nvmlInit_v2", "nvmlInit"}),
        lib->Bind(&api->Shutdown, {"nvmlShutdown"}),
        lib->Bind(&api->DeviceGetCount, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}),
        lib->Bind(&api->DeviceGetHandleByIndex,
                  {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"})}) {
    if (!s.ok()) return s;
  }
  (void)lib->Bind(&api->SystemGetDriverVersion, {"nvmlSystemGetDriverVersion"});
  (void)lib->Bind(&api->SystemGetCudaDriverVersion,
                  {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  (void)lib->Bind(&api->DeviceGetName, {"nvmlDeviceGetName"});
  (void)lib->Bind(&api->DeviceGetPciInfo, {"nvmlDeviceGetPciInfo_v3"});
  (void)lib->Bind(&api->DeviceGetClockInfo, {"nvmlDeviceGetClockInfo"});
  (void)lib->Bind(&api->DeviceGetMaxClockInfo, {"nvmlDeviceGetMaxClockInfo"});
  (void)lib->Bind(&api->DeviceGetPowerUsage, {"nvmlDeviceGetPowerUsage"});
  (void)lib->Bind(&api->DeviceGetEnforcedPowerLimit, {"nvmlDeviceGetEnforcedPowerLimit"});
  (void)lib->Bind(&api->DeviceGetTemperature, {"nvmlDeviceGetTemperature"});
  // Renamed in driver 535; the old name stays for older drivers.
  (void)lib->Bind(&api->DeviceGetClocksEventReasons, {"nvmlDeviceGetCurrentClocksEventReasons",
                                                      "nvmlDeviceGetCurrentClocksThrottleReasons"});
  (void)lib->Bind(&api->DeviceGetUtilizationRates, {"nvmlDeviceGetUtilizationRates"});
  (void)lib->Bind(&api->DeviceGetMemoryInfo, {"nvmlDeviceGetMemoryInfo"});
  (void)lib->Bind(&api->DeviceGetCurrPcieLinkGeneration, {"nvmlDeviceGetCurrPcieLinkGeneration"});
  (void)lib->Bind(&api->DeviceGetMaxPcieLinkGeneration, {"nvmlDeviceGetMaxPcieLinkGeneration"});
  (void)lib->Bind(&api->DeviceGetCurrPcieLinkWidth, {"nvmlDeviceGetCurrPcieLinkWidth"});
  (void)lib->Bind(&api->DeviceGetMaxPcieLinkWidth, {"nvmlDeviceGetMaxPcieLinkWidth"});
  (void)lib->Bind(&api->DeviceGetPcieThroughput, {"nvmlDeviceGetPcieThroughput"});
  (void)lib->Bind(&api->DeviceGetTotalEccErrors, {"nvmlDeviceGetTotalEccErrors"});
  (void)lib->Bind(&api->DeviceGetPersistenceMode, {"nvmlDeviceGetPersistenceMode"});
  (void)lib->Bind(&api->DeviceGetComputeMode, {"nvmlDeviceGetComputeMode"});
  (void)lib->Bind(&api->DeviceGetMigMode, {"nvmlDeviceGetMigMode"});

  if (absl::Status s = GPUSCOPE_NVML_CALL(*api, Init()); !s.ok()) return s;
  unsigned count = 0;
  if (absl::Status s = GPUSCOPE_NVML_CALL(*api, DeviceGetCount(&count)); !s.ok()) {
    api->Shutdown();
    return s;
  }
  BindComputeProcesses(*lib, *api);  // after Init: it asks the driver's version
  lib->Leak();                       // NVML stays loaded for the rest of the process
  return std::unique_ptr<Nvml>(new Nvml(api.release(), static_cast<int>(count)));
}

Nvml::~Nvml() {
  api_->Shutdown();  // NVML counts inits: this undoes ours only
  delete api_;
}

std::string Nvml::driver_version() const { return DriverVersion(*api_); }

int Nvml::cuda_driver_version() const {
  int v = -1;
  if (api_->SystemGetCudaDriverVersion == nullptr ||
      api_->SystemGetCudaDriverVersion(&v) != NVML_SUCCESS)
    return -1;
  return v;
}

std::string Nvml::BusId(int index) const {
  nvmlDevice_t d = nullptr;
  nvmlPciInfo_t pci{};
  if (api_->DeviceGetPciInfo == nullptr ||
      api_->DeviceGetHandleByIndex(static_cast<unsigned>(index), &d) != NVML_SUCCESS ||
      api_->DeviceGetPciInfo(d, &pci) != NVML_SUCCESS) {
    return "";
  }
  pci.busId[sizeof(pci.busId) - 1] = '\0';
  return pci.busId;
}

namespace {

// An unsigned query of device `d` (fn(d, args..., &value)) as a double;
// unknown when the driver lacks the entry point or the query fails. Each
// query on its own: what fails stays unknown.
template <typename Fn, typename... Args>
double UintQuery(Fn fn, nvmlDevice_t d, Args... args) {
  unsigned v = 0;
  if (fn == nullptr || fn(d, args..., &v) != NVML_SUCCESS) return kUnknownValue;
  return static_cast<double>(v);
}

int AsInt(double v) { return v == v ? static_cast<int>(v) : -1; }

// The name of device `d`, where the driver gives it.
void ReadName(const Nvml::Api& api, nvmlDevice_t d, GpuState& g) {
  char buf[96] = {0};
  if (api.DeviceGetName != nullptr && api.DeviceGetName(d, buf, sizeof(buf)) == NVML_SUCCESS)
    g.name = buf;
}

// The maximum clocks and the power limit of device `d`.
void ReadLimits(const Nvml::Api& api, nvmlDevice_t d, GpuState& g) {
  g.sm_clock_max_mhz = UintQuery(api.DeviceGetMaxClockInfo, d, NVML_CLOCK_SM);
  g.mem_clock_max_mhz = UintQuery(api.DeviceGetMaxClockInfo, d, NVML_CLOCK_MEM);
  g.power_limit_w = UintQuery(api.DeviceGetEnforcedPowerLimit, d) / 1000.0;
}

// The used GPU memory of process `pid` among `infos`; unknown when it is not
// listed, or listed without the number (NVML_VALUE_NOT_AVAILABLE: some
// drivers and containers, and always under Windows' WDDM).
template <typename Info>
double UsedMemoryOf(std::span<const Info> infos, unsigned pid) {
  for (const Info& info : infos) {
    if (info.pid != pid) continue;
    if (info.usedGpuMemory == static_cast<unsigned long long>(NVML_VALUE_NOT_AVAILABLE))
      return kUnknownValue;
    return static_cast<double>(info.usedGpuMemory);
  }
  return kUnknownValue;
}

// Process `pid`'s used GPU memory on device `d`, from `list` (an
// nvmlDeviceGetComputeRunningProcesses version, its entries `Info`). A
// stack array holds the list of all but the most crowded GPUs; when NVML
// says it is too small (and how many entries it needs), one more call with
// that many, at most kMost. Processes that start between the two calls
// make the second too small as well: then unknown, until the next sample.
template <typename Info>
double ProcessMemory(nvmlReturn_t (*list)(nvmlDevice_t, unsigned*, Info*), nvmlDevice_t d,
                     unsigned pid) {
  constexpr unsigned kFirst = 64;
  constexpr unsigned kMost = 4096;
  Info first[kFirst] = {};
  unsigned count = kFirst;
  nvmlReturn_t r = list(d, &count, first);
  if (r == NVML_SUCCESS) return UsedMemoryOf<Info>({first, std::min(count, kFirst)}, pid);
  if (r != NVML_ERROR_INSUFFICIENT_SIZE || count <= kFirst || count > kMost) return kUnknownValue;
  std::vector<Info> all(count);
  const unsigned asked = count;
  r = list(d, &count, all.data());
  if (r != NVML_SUCCESS) return kUnknownValue;
  return UsedMemoryOf<Info>({all.data(), std::min(count, asked)}, pid);
}

// This process's used GPU memory on device `d`: its entry among the GPU's
// compute processes. NVML lists them by the host's PIDs: in a container with
// a PID namespace of its own, getpid() is the container's, no entry matches
// and the value stays unknown (nothing maps one to the other here). In MIG
// mode, a whole GPU's list needs privileges: without, unknown too.
double OwnProcessMemory(const Nvml::Api& api, nvmlDevice_t d) {
  const auto pid = static_cast<unsigned>(getpid());  // not cached: a forked child is itself
  if (api.DeviceGetComputeRunningProcesses != nullptr)
    return ProcessMemory(api.DeviceGetComputeRunningProcesses, d, pid);
  if (api.DeviceGetComputeRunningProcessesV1 != nullptr)
    return ProcessMemory(api.DeviceGetComputeRunningProcessesV1, d, pid);
  return kUnknownValue;
}

// What changes from one sample to the next (Fields::kChanging), but the
// PCIe throughput: clocks, power, temperature, clocks event reasons,
// utilization, memory (this process's too), the current PCIe link.
void ReadChanging(const Nvml::Api& api, nvmlDevice_t d, GpuState& g) {
  g.sm_clock_mhz = UintQuery(api.DeviceGetClockInfo, d, NVML_CLOCK_SM);
  g.mem_clock_mhz = UintQuery(api.DeviceGetClockInfo, d, NVML_CLOCK_MEM);
  g.power_w = UintQuery(api.DeviceGetPowerUsage, d) / 1000.0;  // mW
  g.temperature_c = UintQuery(api.DeviceGetTemperature, d, NVML_TEMPERATURE_GPU);
  unsigned long long reasons = 0;
  if (api.DeviceGetClocksEventReasons != nullptr &&
      api.DeviceGetClocksEventReasons(d, &reasons) == NVML_SUCCESS) {
    g.clocks_event_reasons_known = true;
    g.clocks_event_reasons = reasons;
  }
  nvmlUtilization_t u{};
  if (api.DeviceGetUtilizationRates != nullptr &&
      api.DeviceGetUtilizationRates(d, &u) == NVML_SUCCESS) {
    g.utilization_gpu_pct = u.gpu;
    g.utilization_memory_pct = u.memory;
  }
  nvmlMemory_t m{};
  if (api.DeviceGetMemoryInfo != nullptr && api.DeviceGetMemoryInfo(d, &m) == NVML_SUCCESS) {
    g.memory_used_bytes = static_cast<double>(m.used);
    g.memory_total_bytes = static_cast<double>(m.total);
  }
  g.process_memory_bytes = OwnProcessMemory(api, d);
  g.pcie_gen = AsInt(UintQuery(api.DeviceGetCurrPcieLinkGeneration, d));
  g.pcie_width = AsInt(UintQuery(api.DeviceGetCurrPcieLinkWidth, d));
}

// The PCIe throughput counters (about 20 ms each).
void ReadPcieThroughput(const Nvml::Api& api, nvmlDevice_t d, GpuState& g) {
  g.pcie_tx_bytes_per_s =
      UintQuery(api.DeviceGetPcieThroughput, d, NVML_PCIE_UTIL_TX_BYTES) * 1024.0;  // KB/s
  g.pcie_rx_bytes_per_s =
      UintQuery(api.DeviceGetPcieThroughput, d, NVML_PCIE_UTIL_RX_BYTES) * 1024.0;
}

// What rarely changes, but the name and limits: the maximum PCIe link, ECC
// counts, persistence, compute and MIG modes.
void ReadSettings(const Nvml::Api& api, nvmlDevice_t d, GpuState& g) {
  g.pcie_gen_max = AsInt(UintQuery(api.DeviceGetMaxPcieLinkGeneration, d));
  g.pcie_width_max = AsInt(UintQuery(api.DeviceGetMaxPcieLinkWidth, d));
  unsigned long long ecc = 0;
  if (api.DeviceGetTotalEccErrors != nullptr) {
    if (api.DeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &ecc) ==
        NVML_SUCCESS) {
      g.ecc_corrected = static_cast<int64_t>(ecc);
    }
    if (api.DeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
                                    &ecc) == NVML_SUCCESS) {
      g.ecc_uncorrected = static_cast<int64_t>(ecc);
    }
  }
  nvmlEnableState_t persistence = NVML_FEATURE_DISABLED;
  if (api.DeviceGetPersistenceMode != nullptr &&
      api.DeviceGetPersistenceMode(d, &persistence) == NVML_SUCCESS) {
    g.persistence_mode = persistence;
  }
  nvmlComputeMode_t compute = NVML_COMPUTEMODE_DEFAULT;
  if (api.DeviceGetComputeMode != nullptr &&
      api.DeviceGetComputeMode(d, &compute) == NVML_SUCCESS) {
    g.compute_mode = compute;
  }
  unsigned mig = 0, pending = 0;
  if (api.DeviceGetMigMode != nullptr && api.DeviceGetMigMode(d, &mig, &pending) == NVML_SUCCESS) {
    g.mig_mode = static_cast<int>(mig);
  }
}

}  // namespace

GpuState Nvml::Read(int index, bool pcie_throughput, Fields fields) const {
  GpuState g;
  g.index = index;
  nvmlDevice_t d = nullptr;
  if (api_->DeviceGetHandleByIndex(static_cast<unsigned>(index), &d) != NVML_SUCCESS) return g;
  const bool all = fields == Fields::kAll;
  if (all) {
    ReadName(*api_, d, g);
    g.bus_id = BusId(index);
    ReadLimits(*api_, d, g);
  }
  ReadChanging(*api_, d, g);
  if (pcie_throughput) ReadPcieThroughput(*api_, d, g);
  if (!all) return g;
  ReadSettings(*api_, d, g);
  return g;
}

}  // namespace gpuscope::internal
