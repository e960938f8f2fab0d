// A fake NVML (the entry points gpuscope reads), loaded through
// GPUSCOPE_LIBNVML exactly as libnvidia-ml.so.1 would be, answering from a
// table the test sets (fake_nvml.h). It counts nvmlInit/nvmlShutdown.

#include <cstring>
#include <vector>

#include "support/fake_nvml.h"

namespace {

constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;

struct State {
  std::vector<FakeGpu> gpus = std::vector<FakeGpu>(1);
  int init_result = kSuccess;
  int inits = 0;
};
State& S() {
  static State* s = new State();
  return *s;
}

// The handle of GPU i is i + 1 (never null).
const FakeGpu* Gpu(void* handle) {
  const auto i = reinterpret_cast<uintptr_t>(handle);
  return i >= 1 && i <= S().gpus.size() ? &S().gpus[i - 1] : nullptr;
}

template <typename T>
int Answer(int64_t value, T* out) {
  if (value < 0) return kNotSupported;
  *out = static_cast<T>(value);
  return kSuccess;
}

}  // namespace

extern "C" {

#define EXPORT __attribute__((visibility("default")))

EXPORT void fake_nvml_set_gpus(const FakeGpu* gpus, int count) { S().gpus.assign(gpus, gpus + count); }
EXPORT void fake_nvml_fail_init(int result) { S().init_result = result; }
EXPORT int fake_nvml_inits() { return S().inits; }

EXPORT int nvmlInit_v2() {
  if (S().init_result != kSuccess) return S().init_result;
  ++S().inits;
  return kSuccess;
}
EXPORT int nvmlShutdown() {
  if (S().inits == 0) return kUninitialized;
  --S().inits;
  return kSuccess;
}
EXPORT int nvmlSystemGetDriverVersion(char* buf, unsigned len) {
  std::strncpy(buf, "580.65.06", len);
  return kSuccess;
}
EXPORT int nvmlSystemGetCudaDriverVersion_v2(int* v) {
  *v = 13000;
  return kSuccess;
}
EXPORT int nvmlDeviceGetCount_v2(unsigned* n) {
  if (S().inits == 0) return kUninitialized;
  *n = static_cast<unsigned>(S().gpus.size());
  return kSuccess;
}
EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
  if (i >= S().gpus.size()) return kInvalidArgument;
  *d = reinterpret_cast<void*>(uintptr_t{i} + 1);
  return kSuccess;
}
EXPORT int nvmlDeviceGetName(void* d, char* buf, unsigned len) {
  std::strncpy(buf, Gpu(d)->name, len);
  return kSuccess;
}
struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
EXPORT int nvmlDeviceGetPciInfo_v3(void* d, PciInfo* pci) {
  std::memset(pci, 0, sizeof(*pci));
  std::strncpy(pci->bus_id, Gpu(d)->bus_id, sizeof(pci->bus_id) - 1);
  return kSuccess;
}
EXPORT int nvmlDeviceGetClockInfo(void* d, unsigned type, unsigned* mhz) {
  return Answer(type == 1 ? Gpu(d)->sm_clock : type == 2 ? Gpu(d)->mem_clock : -1, mhz);
}
EXPORT int nvmlDeviceGetMaxClockInfo(void* d, unsigned type, unsigned* mhz) {
  return Answer(type == 1 ? Gpu(d)->sm_clock_max : type == 2 ? Gpu(d)->mem_clock_max : -1, mhz);
}
EXPORT int nvmlDeviceGetPowerUsage(void* d, unsigned* mw) { return Answer(Gpu(d)->power_mw, mw); }
EXPORT int nvmlDeviceGetEnforcedPowerLimit(void* d, unsigned* mw) { return Answer(Gpu(d)->power_limit_mw, mw); }
EXPORT int nvmlDeviceGetTemperature(void* d, unsigned sensor, unsigned* c) {
  return Answer(sensor == 0 ? Gpu(d)->temperature : -1, c);
}
EXPORT int nvmlDeviceGetCurrentClocksEventReasons(void* d, unsigned long long* r) {
  return Answer(Gpu(d)->clocks_event_reasons, r);
}
struct Utilization {
  unsigned gpu, memory;
};
EXPORT int nvmlDeviceGetUtilizationRates(void* d, Utilization* u) {
  if (Gpu(d)->util_gpu < 0) return kNotSupported;
  u->gpu = static_cast<unsigned>(Gpu(d)->util_gpu);
  u->memory = static_cast<unsigned>(Gpu(d)->util_memory);
  return kSuccess;
}
struct Memory {
  unsigned long long total, free, used;
};
EXPORT int nvmlDeviceGetMemoryInfo(void* d, Memory* m) {
  if (Gpu(d)->memory_total < 0) return kNotSupported;
  m->total = static_cast<unsigned long long>(Gpu(d)->memory_total);
  m->used = static_cast<unsigned long long>(Gpu(d)->memory_used);
  m->free = m->total - m->used;
  return kSuccess;
}
EXPORT int nvmlDeviceGetCurrPcieLinkGeneration(void* d, unsigned* v) { return Answer(Gpu(d)->pcie_gen, v); }
EXPORT int nvmlDeviceGetMaxPcieLinkGeneration(void* d, unsigned* v) { return Answer(Gpu(d)->pcie_gen_max, v); }
EXPORT int nvmlDeviceGetCurrPcieLinkWidth(void* d, unsigned* v) { return Answer(Gpu(d)->pcie_width, v); }
EXPORT int nvmlDeviceGetMaxPcieLinkWidth(void* d, unsigned* v) { return Answer(Gpu(d)->pcie_width_max, v); }
EXPORT int nvmlDeviceGetPcieThroughput(void* d, unsigned counter, unsigned* kbps) {
  return Answer(counter == 0 ? Gpu(d)->pcie_tx_kbps : Gpu(d)->pcie_rx_kbps, kbps);
}
EXPORT int nvmlDeviceGetTotalEccErrors(void* d, unsigned type, unsigned counter, unsigned long long* n) {
  if (counter != 0) return kNotSupported;  // gpuscope reads volatile counts
  return Answer(type == 0 ? Gpu(d)->ecc_corrected : Gpu(d)->ecc_uncorrected, n);
}
EXPORT int nvmlDeviceGetPersistenceMode(void* d, int* mode) { return Answer(Gpu(d)->persistence, mode); }
EXPORT int nvmlDeviceGetComputeMode(void* d, int* mode) { return Answer(Gpu(d)->compute_mode, mode); }
EXPORT int nvmlDeviceGetMigMode(void* d, unsigned* current, unsigned* pending) {
  if (Gpu(d)->mig < 0) return kNotSupported;
  *current = *pending = static_cast<unsigned>(Gpu(d)->mig);
  return kSuccess;
}

}  // extern "C"
