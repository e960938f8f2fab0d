#include "backends/nvml/nvml.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/dynlib.h"

namespace gpuscope::internal {
namespace {

// The NVML API subset, declared locally (values as in nvml.h of CUDA 12/13).
using nvmlReturn = int;
constexpr nvmlReturn kSuccess = 0;
using Device = void*;
constexpr unsigned kClockSm = 1;
constexpr unsigned kClockMem = 2;
constexpr unsigned kTemperatureGpu = 0;
constexpr unsigned kPcieTxBytes = 0;
constexpr unsigned kPcieRxBytes = 1;
constexpr unsigned kErrorCorrected = 0;
constexpr unsigned kErrorUncorrected = 1;
constexpr unsigned kVolatileEcc = 0;

struct Utilization {
  unsigned gpu;
  unsigned memory;
};
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct PciInfo {  // nvmlPciInfo_t (v3)
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];
};

// NVML's own names for its error codes (nvmlErrorString would need a call
// into a library that may have failed to initialize).
const char* ReturnName(nvmlReturn r) {
  switch (r) {
    case 1: return "NVML_ERROR_UNINITIALIZED";
    case 2: return "NVML_ERROR_INVALID_ARGUMENT";
    case 3: return "NVML_ERROR_NOT_SUPPORTED";
    case 4: return "NVML_ERROR_NO_PERMISSION";
    case 6: return "NVML_ERROR_NOT_FOUND";
    case 9: return "NVML_ERROR_DRIVER_NOT_LOADED";
    case 12: return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case 15: return "NVML_ERROR_GPU_IS_LOST";
    case 18: return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    default: return "NVML_ERROR_UNKNOWN";
  }
}

}  // namespace

struct Nvml::Api {
  nvmlReturn (*Init)() = nullptr;
  nvmlReturn (*Shutdown)() = nullptr;
  nvmlReturn (*DeviceGetCount)(unsigned*) = nullptr;
  nvmlReturn (*DeviceGetHandleByIndex)(unsigned, Device*) = nullptr;
  // Optional: a driver without one leaves that field unknown.
  nvmlReturn (*SystemGetDriverVersion)(char*, unsigned) = nullptr;
  nvmlReturn (*SystemGetCudaDriverVersion)(int*) = nullptr;
  nvmlReturn (*DeviceGetName)(Device, char*, unsigned) = nullptr;
  nvmlReturn (*DeviceGetPciInfo)(Device, PciInfo*) = nullptr;
  nvmlReturn (*DeviceGetClockInfo)(Device, unsigned, unsigned*) = nullptr;
  nvmlReturn (*DeviceGetMaxClockInfo)(Device, unsigned, unsigned*) = nullptr;
  nvmlReturn (*DeviceGetPowerUsage)(Device, unsigned*) = nullptr;
  nvmlReturn (*DeviceGetEnforcedPowerLimit)(Device, unsigned*) = nullptr;
  nvmlReturn (*DeviceGetTemperature)(Device, unsigned, unsigned*) = nullptr;
  nvmlReturn (*DeviceGetClocksEventReasons)(Device, unsigned long long*) = nullptr;
  nvmlReturn (*DeviceGetUtilizationRates)(Device, Utilization*) = nullptr;
  nvmlReturn (*DeviceGetMemoryInfo)(Device, Memory*) = nullptr;
  nvmlReturn (*DeviceGetCurrPcieLinkGeneration)(Device, unsigned*) = nullptr;
  nvmlReturn (*DeviceGetMaxPcieLinkGeneration)(Device, unsigned*) = nullptr;
  nvmlReturn (*DeviceGetCurrPcieLinkWidth)(Device, unsigned*) = nullptr;
  nvmlReturn (*DeviceGetMaxPcieLinkWidth)(Device, unsigned*) = nullptr;
  nvmlReturn (*DeviceGetPcieThroughput)(Device, unsigned, unsigned*) = nullptr;
  nvmlReturn (*DeviceGetTotalEccErrors)(Device, unsigned, unsigned, unsigned long long*) = nullptr;
  nvmlReturn (*DeviceGetPersistenceMode)(Device, int*) = nullptr;
  nvmlReturn (*DeviceGetComputeMode)(Device, int*) = nullptr;
  nvmlReturn (*DeviceGetMigMode)(Device, unsigned*, unsigned*) = nullptr;
};

absl::StatusOr<std::unique_ptr<Nvml>> Nvml::Open() {
  const char* override_path = std::getenv("GPUSCOPE_LIBNVML");
  const std::string name =
      override_path != nullptr && override_path[0] != '\0' ? override_path : "libnvidia-ml.so.1";
  absl::StatusOr<DynLib> lib = DynLib::Open(name);
  if (!lib.ok()) return lib.status();
  auto api = std::make_unique<Api>();
  for (absl::Status s : {lib->Bind(&api->Init, {"nvmlInit_v2", "nvmlInit"}),
                         lib->Bind(&api->Shutdown, {"nvmlShutdown"}),
                         lib->Bind(&api->DeviceGetCount, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}),
                         lib->Bind(&api->DeviceGetHandleByIndex,
                                  {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"})}) {
    if (!s.ok()) return s;
  }
  (void)lib->Bind(&api->SystemGetDriverVersion, {"nvmlSystemGetDriverVersion"});
  (void)lib->Bind(&api->SystemGetCudaDriverVersion, {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  (void)lib->Bind(&api->DeviceGetName, {"nvmlDeviceGetName"});
  (void)lib->Bind(&api->DeviceGetPciInfo, {"nvmlDeviceGetPciInfo_v3"});
  (void)lib->Bind(&api->DeviceGetClockInfo, {"nvmlDeviceGetClockInfo"});
  (void)lib->Bind(&api->DeviceGetMaxClockInfo, {"nvmlDeviceGetMaxClockInfo"});
  (void)lib->Bind(&api->DeviceGetPowerUsage, {"nvmlDeviceGetPowerUsage"});
  (void)lib->Bind(&api->DeviceGetEnforcedPowerLimit, {"nvmlDeviceGetEnforcedPowerLimit"});
  (void)lib->Bind(&api->DeviceGetTemperature, {"nvmlDeviceGetTemperature"});
  // Renamed in driver 535; the old name stays for older drivers.
  (void)lib->Bind(&api->DeviceGetClocksEventReasons,
           {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
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

  if (const nvmlReturn r = api->Init(); r != kSuccess) {
    return absl::FailedPreconditionError(
        absl::StrCat("nvmlInit failed: ", ReturnName(r), r == 9 ? " (no NVIDIA driver is loaded)" : ""));
  }
  unsigned count = 0;
  if (const nvmlReturn r = api->DeviceGetCount(&count); r != kSuccess) {
    api->Shutdown();
    return absl::FailedPreconditionError(absl::StrCat("nvmlDeviceGetCount failed: ", ReturnName(r)));
  }
  lib->Leak();  // NVML stays loaded for the rest of the process
  return std::unique_ptr<Nvml>(new Nvml(api.release(), static_cast<int>(count)));
}

Nvml::~Nvml() {
  api_->Shutdown();  // NVML counts inits: this undoes ours only
  delete api_;
}

std::string Nvml::driver_version() const {
  char buf[96] = {0};
  if (api_->SystemGetDriverVersion == nullptr || api_->SystemGetDriverVersion(buf, sizeof(buf)) != kSuccess) {
    return "";
  }
  return buf;
}

int Nvml::cuda_driver_version() const {
  int v = -1;
  if (api_->SystemGetCudaDriverVersion == nullptr || api_->SystemGetCudaDriverVersion(&v) != kSuccess) return -1;
  return v;
}

std::string Nvml::BusId(int index) const {
  Device d = nullptr;
  PciInfo pci{};
  if (api_->DeviceGetPciInfo == nullptr ||
      api_->DeviceGetHandleByIndex(static_cast<unsigned>(index), &d) != kSuccess ||
      api_->DeviceGetPciInfo(d, &pci) != kSuccess) {
    return "";
  }
  pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
  return pci.bus_id;
}

GpuState Nvml::Read(int index, bool pcie_throughput) const {
  GpuState g;
  g.index = index;
  Device d = nullptr;
  if (api_->DeviceGetHandleByIndex(static_cast<unsigned>(index), &d) != kSuccess) return g;
  // Each query on its own: what fails stays unknown.
  const auto uint_query = [&](auto fn, auto... args) -> double {
    unsigned v = 0;
    if (fn == nullptr || fn(d, args..., &v) != kSuccess) return kUnknownValue;
    return static_cast<double>(v);
  };
  char buf[96] = {0};
  if (api_->DeviceGetName != nullptr && api_->DeviceGetName(d, buf, sizeof(buf)) == kSuccess) g.name = buf;
  g.bus_id = BusId(index);
  g.sm_clock_mhz = uint_query(api_->DeviceGetClockInfo, kClockSm);
  g.sm_clock_max_mhz = uint_query(api_->DeviceGetMaxClockInfo, kClockSm);
  g.mem_clock_mhz = uint_query(api_->DeviceGetClockInfo, kClockMem);
  g.mem_clock_max_mhz = uint_query(api_->DeviceGetMaxClockInfo, kClockMem);
  g.power_w = uint_query(api_->DeviceGetPowerUsage) / 1000.0;          // mW
  g.power_limit_w = uint_query(api_->DeviceGetEnforcedPowerLimit) / 1000.0;
  g.temperature_c = uint_query(api_->DeviceGetTemperature, kTemperatureGpu);
  unsigned long long reasons = 0;
  if (api_->DeviceGetClocksEventReasons != nullptr && api_->DeviceGetClocksEventReasons(d, &reasons) == kSuccess) {
    g.clocks_event_reasons_known = true;
    g.clocks_event_reasons = reasons;
  }
  Utilization u{};
  if (api_->DeviceGetUtilizationRates != nullptr && api_->DeviceGetUtilizationRates(d, &u) == kSuccess) {
    g.utilization_gpu_pct = u.gpu;
    g.utilization_memory_pct = u.memory;
  }
  Memory m{};
  if (api_->DeviceGetMemoryInfo != nullptr && api_->DeviceGetMemoryInfo(d, &m) == kSuccess) {
    g.memory_used_bytes = static_cast<double>(m.used);
    g.memory_total_bytes = static_cast<double>(m.total);
  }
  const auto as_int = [](double v) { return v == v ? static_cast<int>(v) : -1; };
  g.pcie_gen = as_int(uint_query(api_->DeviceGetCurrPcieLinkGeneration));
  g.pcie_gen_max = as_int(uint_query(api_->DeviceGetMaxPcieLinkGeneration));
  g.pcie_width = as_int(uint_query(api_->DeviceGetCurrPcieLinkWidth));
  g.pcie_width_max = as_int(uint_query(api_->DeviceGetMaxPcieLinkWidth));
  if (pcie_throughput) {
    g.pcie_tx_bytes_per_s = uint_query(api_->DeviceGetPcieThroughput, kPcieTxBytes) * 1024.0;  // KB/s
    g.pcie_rx_bytes_per_s = uint_query(api_->DeviceGetPcieThroughput, kPcieRxBytes) * 1024.0;
  }
  unsigned long long ecc = 0;
  if (api_->DeviceGetTotalEccErrors != nullptr) {
    if (api_->DeviceGetTotalEccErrors(d, kErrorCorrected, kVolatileEcc, &ecc) == kSuccess) {
      g.ecc_corrected = static_cast<int64_t>(ecc);
    }
    if (api_->DeviceGetTotalEccErrors(d, kErrorUncorrected, kVolatileEcc, &ecc) == kSuccess) {
      g.ecc_uncorrected = static_cast<int64_t>(ecc);
    }
  }
  int mode = 0;
  if (api_->DeviceGetPersistenceMode != nullptr && api_->DeviceGetPersistenceMode(d, &mode) == kSuccess) {
    g.persistence_mode = mode;
  }
  if (api_->DeviceGetComputeMode != nullptr && api_->DeviceGetComputeMode(d, &mode) == kSuccess) {
    g.compute_mode = mode;
  }
  unsigned mig = 0, pending = 0;
  if (api_->DeviceGetMigMode != nullptr && api_->DeviceGetMigMode(d, &mig, &pending) == kSuccess) {
    g.mig_mode = static_cast<int>(mig);
  }
  return g;
}

}  // namespace gpuscope::internal
