// A fake NVML (the entry points gpuscope reads), loaded through
// GPUSCOPE_LIBNVML exactly as libnvidia-ml.so.1 would be, answering from a
// table the test sets (fake_nvml.h). It counts nvmlInit/nvmlShutdown. Entry
// points, structs and codes are nvml.h's; NVML_NO_UNVERSIONED_FUNC_DEFS
// declares the older versions too (nvmlDeviceGetComputeRunningProcesses_v2).

#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fakes/fake_nvml.h"

namespace {

struct State {
  std::vector<FakeGpu> gpus = std::vector<FakeGpu>(1);
  nvmlReturn_t init_result = NVML_SUCCESS;
  int inits = 0;
  std::string driver_version = "580.65.06";
  bool wide_v3_entries = false;
  int list_calls_v3 = 0, list_calls_v2 = 0;
};
State& S() {
  static State* s = new State();
  return *s;
}

// The handle of GPU i is i + 1 (never null).
const FakeGpu* Gpu(nvmlDevice_t handle) {
  const auto i = reinterpret_cast<uintptr_t>(handle);
  return i >= 1 && i <= S().gpus.size() ? &S().gpus[i - 1] : nullptr;
}

template <typename T>
nvmlReturn_t Answer(int64_t value, T* out) {
  if (value < 0) return NVML_ERROR_NOT_SUPPORTED;
  *out = static_cast<T>(value);
  return NVML_SUCCESS;
}

// GPU `d`'s compute processes into `infos` (entries of type Info), as
// nvml.h documents nvmlDeviceGetComputeRunningProcesses: *count in, the
// room in `infos`; out, how many there are. Too little room (`infos` may
// then be null): NVML_ERROR_INSUFFICIENT_SIZE, *count the room needed.
template <typename Info>
nvmlReturn_t ListProcesses(nvmlDevice_t d, unsigned* count, Info* infos) {
  const FakeGpu* gpu = Gpu(d);
  if (gpu == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->process_count < 0) return NVML_ERROR_NOT_SUPPORTED;
  const auto n = static_cast<unsigned>(gpu->other_processes + gpu->process_count);
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *count = n;
  if (n == 0) return NVML_SUCCESS;
  if (infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < n; ++i) {
    Info info{};
    const auto mine = static_cast<int>(i) - gpu->other_processes;  // this table's entry, or < 0
    info.pid = mine < 0 ? 5'000'000 + i : static_cast<unsigned>(gpu->process_pids[mine]);
    info.usedGpuMemory =
        mine < 0 ? 1ULL << 20 : static_cast<unsigned long long>(gpu->process_used[mine]);
    info.gpuInstanceId = info.computeInstanceId = 0xFFFFFFFF;  // not MIG
    infos[i] = info;
  }
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

#define EXPORT __attribute__((visibility("default")))

EXPORT void fake_nvml_set_gpus(const FakeGpu* gpus, int count) {
  S().gpus.assign(gpus, gpus + count);
}
EXPORT void fake_nvml_fail_init(int result) { S().init_result = static_cast<nvmlReturn_t>(result); }
EXPORT int fake_nvml_inits() { return S().inits; }
EXPORT void fake_nvml_set_driver(const char* version, bool wide_v3_entries) {
  S().driver_version = version;
  S().wide_v3_entries = wide_v3_entries;
}
EXPORT int fake_nvml_process_list_calls(int version) {
  return version == 3 ? S().list_calls_v3 : version == 2 ? S().list_calls_v2 : 0;
}

// ---- The NVML subset, as nvml.h declares it.
EXPORT nvmlReturn_t nvmlInit_v2() {
  if (S().init_result != NVML_SUCCESS) return S().init_result;
  ++S().inits;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlShutdown() {
  if (S().inits == 0) return NVML_ERROR_UNINITIALIZED;
  --S().inits;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* buf, unsigned len) {
  std::strncpy(buf, S().driver_version.c_str(), len);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) {
  *v = 13000;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* n) {
  if (S().inits == 0) return NVML_ERROR_UNINITIALIZED;
  *n = static_cast<unsigned>(S().gpus.size());
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  if (i >= S().gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *d = reinterpret_cast<nvmlDevice_t>(uintptr_t{i} + 1);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* buf, unsigned len) {
  std::strncpy(buf, Gpu(d)->name, len);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof(*pci));
  std::strncpy(pci->busId, Gpu(d)->bus_id, sizeof(pci->busId) - 1);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned* mhz) {
  return Answer(type == NVML_CLOCK_SM    ? Gpu(d)->sm_clock
                : type == NVML_CLOCK_MEM ? Gpu(d)->mem_clock
                                         : -1,
                mhz);
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned* mhz) {
  return Answer(type == NVML_CLOCK_SM    ? Gpu(d)->sm_clock_max
                : type == NVML_CLOCK_MEM ? Gpu(d)->mem_clock_max
                                         : -1,
                mhz);
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned* mw) {
  return Answer(Gpu(d)->power_mw, mw);
}
EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned* mw) {
  return Answer(Gpu(d)->power_limit_mw, mw);
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t sensor,
                                             unsigned* c) {
  return Answer(sensor == NVML_TEMPERATURE_GPU ? Gpu(d)->temperature : -1, c);
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long* r) {
  return Answer(Gpu(d)->clocks_event_reasons, r);
}
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  if (Gpu(d)->util_gpu < 0) return NVML_ERROR_NOT_SUPPORTED;
  u->gpu = static_cast<unsigned>(Gpu(d)->util_gpu);
  u->memory = static_cast<unsigned>(Gpu(d)->util_memory);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  if (Gpu(d)->memory_total < 0) return NVML_ERROR_NOT_SUPPORTED;
  m->total = static_cast<unsigned long long>(Gpu(d)->memory_total);
  m->used = static_cast<unsigned long long>(Gpu(d)->memory_used);
  m->free = m->total - m->used;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned* count,
                                                            nvmlProcessInfo_t* infos) {
  ++S().list_calls_v3;
  // nvmlProcessDetail_v1_t is the layout of those drivers' entries.
  if (S().wide_v3_entries)
    return ListProcesses(d, count, reinterpret_cast<nvmlProcessDetail_v1_t*>(infos));
  return ListProcesses(d, count, infos);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned* count,
                                                            nvmlProcessInfo_v2_t* infos) {
  ++S().list_calls_v2;
  return ListProcesses(d, count, infos);
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned* v) {
  return Answer(Gpu(d)->pcie_gen, v);
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned* v) {
  return Answer(Gpu(d)->pcie_gen_max, v);
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned* v) {
  return Answer(Gpu(d)->pcie_width, v);
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned* v) {
  return Answer(Gpu(d)->pcie_width_max, v);
}
EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, nvmlPcieUtilCounter_t counter,
                                                unsigned* kbps) {
  return Answer(counter == NVML_PCIE_UTIL_TX_BYTES ? Gpu(d)->pcie_tx_kbps : Gpu(d)->pcie_rx_kbps,
                kbps);
}
EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, nvmlMemoryErrorType_t type,
                                                nvmlEccCounterType_t counter,
                                                unsigned long long* n) {
  // gpuscope reads volatile counts only.
  if (counter != NVML_VOLATILE_ECC) return NVML_ERROR_NOT_SUPPORTED;
  return Answer(
      type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? Gpu(d)->ecc_corrected : Gpu(d)->ecc_uncorrected,
      n);
}
EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, nvmlEnableState_t* mode) {
  return Answer(Gpu(d)->persistence, mode);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, nvmlComputeMode_t* mode) {
  return Answer(Gpu(d)->compute_mode, mode);
}
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned* current, unsigned* pending) {
  if (Gpu(d)->mig < 0) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = static_cast<unsigned>(Gpu(d)->mig);
  return NVML_SUCCESS;
}

}  // extern "C"
