// The test controls of the fake NVML (tests/cpp/fakes/fake_libnvml.cc,
// built as fake_libnvml; a test links it and points GPUSCOPE_LIBNVML at it):
// its device table, what each query answers. A negative value makes that
// query answer NVML_ERROR_NOT_SUPPORTED, as a GPU without the feature does.

#ifndef GPUSCOPE_TESTS_CPP_FAKES_FAKE_NVML_H_
#define GPUSCOPE_TESTS_CPP_FAKES_FAKE_NVML_H_

#include <cstdint>

struct FakeGpu {
  char name[64] = "NVIDIA H100 80GB HBM3";
  char bus_id[32] = "00000000:17:00.0";
  int64_t sm_clock = 1980, sm_clock_max = 1980, mem_clock = 2619, mem_clock_max = 2619;  // MHz
  int64_t power_mw = 350000, power_limit_mw = 700000;
  int64_t temperature = 45;
  int64_t clocks_event_reasons = 0;  // -1: not supported
  int64_t util_gpu = 97, util_memory = 40;
  int64_t memory_used = 40LL << 30, memory_total = 80LL << 30;
  int64_t pcie_gen = 5, pcie_gen_max = 5, pcie_width = 16, pcie_width_max = 16;
  int64_t pcie_tx_kbps = 1000, pcie_rx_kbps = 2000;
  int64_t ecc_corrected = 0, ecc_uncorrected = 0;
  int64_t persistence = 1, compute_mode = 0, mig = 0;
  // The running compute processes NVML lists: the first process_count of
  // these (pid, used GPU memory in bytes; -1 bytes is NVML's
  // NVML_VALUE_NOT_AVAILABLE), after `other_processes` more (pids 5000000
  // and up, 1 MiB each), as a crowded GPU lists many. process_count -1: the
  // query answers NVML_ERROR_NOT_SUPPORTED.
  int64_t process_pids[4] = {};
  int64_t process_used[4] = {};
  int process_count = 0;
  int other_processes = 0;
};

extern "C" {
void fake_nvml_set_gpus(const FakeGpu* gpus, int count);
void fake_nvml_fail_init(int result);
int fake_nvml_inits();  // nvmlInit calls not yet shut down
// What nvmlSystemGetDriverVersion answers ("580.65.06" until set), and
// whether nvmlDeviceGetComputeRunningProcesses_v3 fills 32-byte entries
// (nvmlProcessInfo_v3_t, as drivers 535.43 to 535.86 did) instead of
// nvml.h's 24-byte nvmlProcessInfo_t.
void fake_nvml_set_driver(const char* version, bool wide_v3_entries);
// Calls so far to nvmlDeviceGetComputeRunningProcesses_v`version` (3 or 2).
int fake_nvml_process_list_calls(int version);
}  // extern "C"

#endif  // GPUSCOPE_TESTS_CPP_FAKES_FAKE_NVML_H_
