// NVML, loaded with dlopen (never linked): one GPU's state as nvidia-smi
// would show it, for telemetry sampling and `gpuscope doctor` (issue 6).
//
// Every field is optional: a GPU or driver that does not support a query
// (NVML_ERROR_NOT_SUPPORTED, say) leaves it unknown (NaN, or -1), and the
// rest is still read. The types and entry points come from NVML's own
// nvml.h, included by nvml.cc only: this header stays free of it.

#ifndef GPUSCOPE_LIB_BACKENDS_NVML_NVML_H_
#define GPUSCOPE_LIB_BACKENDS_NVML_NVML_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/clocks_event_reasons.h"

namespace gpuscope::internal {

inline constexpr double kUnknownValue = std::numeric_limits<double>::quiet_NaN();

struct GpuState {
  int index = -1;
  std::string name;
  std::string bus_id;  // "00000000:17:00.0"
  double sm_clock_mhz = kUnknownValue;
  double sm_clock_max_mhz = kUnknownValue;
  double mem_clock_mhz = kUnknownValue;
  double mem_clock_max_mhz = kUnknownValue;
  double power_w = kUnknownValue;
  double power_limit_w = kUnknownValue;  // enforced
  double temperature_c = kUnknownValue;
  bool clocks_event_reasons_known = false;
  uint64_t clocks_event_reasons = 0;
  double utilization_gpu_pct =
      kUnknownValue;  // as nvidia-smi reports it: a kernel ran in the sample
  double utilization_memory_pct = kUnknownValue;
  double memory_used_bytes = kUnknownValue;
  double memory_total_bytes = kUnknownValue;
  // This process's entry in the GPU's running compute processes (its used
  // GPU memory); unknown when it has none or NVML cannot list them. NVML
  // lists host PIDs: in a container with its own PID namespace, none is
  // this process's, and it stays unknown.
  double process_memory_bytes = kUnknownValue;
  int pcie_gen = -1;
  int pcie_gen_max = -1;
  int pcie_width = -1;
  int pcie_width_max = -1;
  double pcie_tx_bytes_per_s = kUnknownValue;
  double pcie_rx_bytes_per_s = kUnknownValue;
  int64_t ecc_corrected = -1;  // volatile (since the driver loaded)
  int64_t ecc_uncorrected = -1;
  int persistence_mode = -1;  // 0 off, 1 on
  int compute_mode = -1;      // 0 default, 1 exclusive thread, 2 prohibited, 3 exclusive process
  int mig_mode = -1;          // 0 off, 1 on
};

class Nvml {
 public:
  // Loads NVML ($GPUSCOPE_LIBNVML, else libnvidia-ml.so.1) and initializes
  // it. NotFound when the library is missing; an error naming NVML's code
  // when it does not initialize (no driver loaded, no GPU).
  static absl::StatusOr<std::unique_ptr<Nvml>> Open();

  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  int device_count() const { return device_count_; }
  std::string driver_version() const;  // "" when unknown
  int cuda_driver_version() const;     // 13000 for CUDA 13.0; -1 when unknown

  // What Read() queries: everything, or only what changes from one
  // telemetry sample to the next (SM and memory clocks, power, temperature,
  // clocks event reasons, utilization, memory used and total, this
  // process's memory, the current PCIe link generation and width): 11 NVML
  // calls instead of 24 (the device handle's lookup included, the PCIe
  // throughput's 2 not; one more in either where the GPU runs over 64
  // compute processes). A sampler takes the rest (name and bus id, maximum
  // clocks and link, power limit, ECC counts, modes) from a full read now
  // and then.
  enum class Fields : uint8_t { kAll, kChanging };

  // The state of GPU `index` now. Never fails: what cannot be read stays
  // unknown. Thread-compatible (NVML itself is thread-safe). The PCIe
  // throughput counters take NVML about 20 ms each: `pcie_throughput` false
  // leaves them unknown.
  GpuState Read(int index, bool pcie_throughput = true, Fields fields = Fields::kAll) const;

  // GPU `index`'s PCI bus id as NVML writes it ("00000000:17:00.0"); "" when
  // unknown. Cheap (one query).
  std::string BusId(int index) const;

  struct Api;  // the entry points (nvml.cc)

 private:
  explicit Nvml(const Api* api, int device_count) : api_(api), device_count_(device_count) {}
  const Api* api_;
  int device_count_;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_NVML_NVML_H_
