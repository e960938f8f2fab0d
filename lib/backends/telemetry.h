// Telemetry: device and host state sampled by the background worker at a
// fixed rate, never on the hot path (NVML, /proc), and what a step keeps of
// it.

#ifndef GPUSCOPE_LIB_BACKENDS_TELEMETRY_H_
#define GPUSCOPE_LIB_BACKENDS_TELEMETRY_H_

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuscope::internal {

inline constexpr double kNotSampled = std::numeric_limits<double>::quiet_NaN();
inline constexpr int kMaxTelemetryGpus = 8;

// One GPU at one moment. NaN: not available.
struct GpuSample {
  int index = -1;                        // NVML index; -1: unused slot
  double utilization_pct = kNotSampled;  // as nvidia-smi reports it
  double sm_clock_mhz = kNotSampled;
  double sm_clock_max_mhz = kNotSampled;
  double mem_clock_mhz = kNotSampled;
  double mem_clock_max_mhz = kNotSampled;
  double power_w = kNotSampled;
  double power_limit_w = kNotSampled;
  double temperature_c = kNotSampled;
  double memory_used_bytes = kNotSampled;
  double memory_total_bytes = kNotSampled;
  // This process's entry in the GPU's running-processes list (NaN: none, or
  // not readable).
  double process_memory_bytes = kNotSampled;
  double pcie_rx_bytes_per_s = kNotSampled;
  double pcie_tx_bytes_per_s = kNotSampled;
  uint64_t clocks_event_reasons = 0;
  // State (-1: not available): PCIe link, ECC counts, modes.
  int pcie_gen = -1, pcie_gen_max = -1, pcie_width = -1, pcie_width_max = -1;
  int64_t ecc_corrected = -1, ecc_uncorrected = -1;
  int persistence_mode = -1, compute_mode = -1, mig_mode = -1;
};

// One sample of everything, taken at `host_ns`.
struct TelemetrySample {
  int64_t host_ns = 0;
  double host_cpu_pct = kNotSampled;  // all CPUs, since the previous sample
  double host_iowait_pct = kNotSampled;
  double process_cores = kNotSampled;  // this process's CPU use
  // Its live descendant processes' CPU use: the data loader's workers (and
  // their own children) once a loader named them (process_roles.h; NaN until
  // one did, 0 for a loader without workers), and the others (every
  // descendant while no loader named its workers).
  double worker_cores = kNotSampled;
  double child_cores = kNotSampled;
  // Run-queue wait (schedstat): the share of time the training thread was
  // runnable but had no CPU (0..1), and the loader workers' wait summed, in
  // cores (how many of them waited at a time, on average).
  double cpu_wait_share = kNotSampled;
  double worker_cpu_wait_cores = kNotSampled;
  double cpu_pressure_pct = kNotSampled;  // PSI "some avg10" of /proc/pressure/cpu
  double steal_pct = kNotSampled;         // of all CPUs, taken by the hypervisor
  // The share (%) of a container CPU limit's periods (cgroup cpu.stat) in
  // which the process's cgroup used up its quota and was throttled.
  double cpu_throttled_pct = kNotSampled;
  double memory_available_bytes = kNotSampled;
  double memory_pressure_pct = kNotSampled;  // PSI "some avg10"
  double swap_pages_per_s = kNotSampled;
  double load1 = kNotSampled;
  double cpus_available = kNotSampled;  // CPUs this process may use: affinity, container limit
  int gpu_count = 0;
  std::array<GpuSample, kMaxTelemetryGpus> gpus{};
};

// What a completed step keeps: time-weighted over its window, compact (the
// window ring holds one per step). NaN: no sample covered it.
struct StepTelemetry {
  float gpu_utilization_pct = std::numeric_limits<float>::quiet_NaN();  // mean over GPUs
  float sm_clock_ratio = std::numeric_limits<float>::quiet_NaN();       // lowest GPU's clock / max
  float host_cpu_pct = std::numeric_limits<float>::quiet_NaN();
  float host_iowait_pct = std::numeric_limits<float>::quiet_NaN();
  float process_cores = std::numeric_limits<float>::quiet_NaN();
  float worker_cores = std::numeric_limits<float>::quiet_NaN();
  float child_cores = std::numeric_limits<float>::quiet_NaN();
  float cpu_wait_share = std::numeric_limits<float>::quiet_NaN();
  uint64_t clocks_event_reasons = 0;  // OR over the step and its GPUs
};

class Telemetry {
 public:
  virtual ~Telemetry() = default;
  virtual absl::string_view name() const = 0;
  // Once: OkStatus(), or why not (neither NVML nor /proc readable).
  virtual absl::Status Start() = 0;
  // Worker: the state now (rates since the previous call).
  virtual void Sample(int64_t now_ns, TelemetrySample* out) = 0;
  // Worker: appends the samples a session takes in at `now_ns`, oldest
  // first. This one takes a fresh sample once `interval_ns` has passed since
  // the last it took; the process-wide telemetry (MakeProcessTelemetry())
  // hands every session the samples taken once for all of them.
  virtual void Collect(int64_t now_ns, int64_t interval_ns, std::vector<TelemetrySample>* out) {
    if (last_collect_ns_ != kNever && now_ns < last_collect_ns_ + interval_ns) return;
    Sample(now_ns, &out->emplace_back());
    last_collect_ns_ = now_ns;
  }
  // What is sampled, for the summary ("NVML, /proc", "/proc (no NVML: ...)").
  virtual std::string description() const = 0;

 private:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::min();
  int64_t last_collect_ns_ = kNever;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_TELEMETRY_H_
