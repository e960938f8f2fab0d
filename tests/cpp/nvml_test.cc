// The NVML reader against a fake NVML loaded the way libnvidia-ml.so.1
// would be (GPUSCOPE_LIBNVML): every field decoded, unsupported queries left
// unknown, throttle reasons named, init failures explained.

#include "backends/nvml/nvml.h"

#include <stdlib.h>
#include <unistd.h>

#include <cmath>

#include "fakes/fake_nvml.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(NvmlTest, ReadsEveryFieldOfAHealthyGpu) {
  FakeGpu gpus[2];
  gpus[1].pcie_gen = 3;  // the second GPU's link trained down
  gpus[1].pcie_width = 8;
  std::snprintf(gpus[1].bus_id, sizeof(gpus[1].bus_id), "00000000:65:00.0");
  fake_nvml_set_gpus(gpus, 2);
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Open();
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  EXPECT_EQ((*nvml)->device_count(), 2);
  EXPECT_EQ((*nvml)->driver_version(), "580.65.06");
  EXPECT_EQ((*nvml)->cuda_driver_version(), 13000);
  const GpuState g = (*nvml)->Read(0);
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.bus_id, "00000000:17:00.0");
  EXPECT_DOUBLE_EQ(g.sm_clock_mhz, 1980);
  EXPECT_DOUBLE_EQ(g.sm_clock_max_mhz, 1980);
  EXPECT_DOUBLE_EQ(g.mem_clock_mhz, 2619);
  EXPECT_DOUBLE_EQ(g.power_w, 350);  // from milliwatts
  EXPECT_DOUBLE_EQ(g.power_limit_w, 700);
  EXPECT_DOUBLE_EQ(g.temperature_c, 45);
  EXPECT_TRUE(g.clocks_event_reasons_known);
  EXPECT_EQ(g.clocks_event_reasons, 0u);
  EXPECT_DOUBLE_EQ(g.utilization_gpu_pct, 97);
  EXPECT_DOUBLE_EQ(g.memory_total_bytes, 80.0 * (1 << 30));
  EXPECT_EQ(g.pcie_gen, 5);
  EXPECT_EQ(g.pcie_width_max, 16);
  EXPECT_DOUBLE_EQ(g.pcie_rx_bytes_per_s, 2000 * 1024.0);  // from KB/s
  EXPECT_EQ(g.ecc_uncorrected, 0);
  EXPECT_EQ(g.persistence_mode, 1);
  EXPECT_EQ(g.mig_mode, 0);
  const GpuState h = (*nvml)->Read(1);
  EXPECT_EQ(h.bus_id, "00000000:65:00.0");
  EXPECT_EQ(h.pcie_gen, 3);
  EXPECT_EQ(h.pcie_width, 8);
  EXPECT_EQ(h.pcie_gen_max, 5);
}

TEST(NvmlTest, ASamplersReadOfWhatChangesLeavesTheRestUnknown) {
  FakeGpu gpu;
  fake_nvml_set_gpus(&gpu, 1);
  auto nvml = Nvml::Open();
  ASSERT_TRUE(nvml.ok());
  const GpuState g = (*nvml)->Read(0, /*pcie_throughput=*/false, Nvml::Fields::kChanging);
  // What moves from one sample to the next is read...
  EXPECT_DOUBLE_EQ(g.sm_clock_mhz, 1980);
  EXPECT_DOUBLE_EQ(g.mem_clock_mhz, 2619);
  EXPECT_DOUBLE_EQ(g.power_w, 350);
  EXPECT_DOUBLE_EQ(g.temperature_c, 45);
  EXPECT_TRUE(g.clocks_event_reasons_known);
  EXPECT_DOUBLE_EQ(g.utilization_gpu_pct, 97);
  EXPECT_DOUBLE_EQ(g.memory_used_bytes, 40.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(g.memory_total_bytes, 80.0 * (1 << 30));
  EXPECT_EQ(g.pcie_gen, 5);
  EXPECT_EQ(g.pcie_width, 16);
  // ...the slow-changing state is not queried.
  EXPECT_TRUE(g.name.empty());
  EXPECT_TRUE(g.bus_id.empty());
  EXPECT_TRUE(std::isnan(g.sm_clock_max_mhz));
  EXPECT_TRUE(std::isnan(g.mem_clock_max_mhz));
  EXPECT_TRUE(std::isnan(g.power_limit_w));
  EXPECT_TRUE(std::isnan(g.pcie_rx_bytes_per_s));
  EXPECT_EQ(g.pcie_gen_max, -1);
  EXPECT_EQ(g.pcie_width_max, -1);
  EXPECT_EQ(g.ecc_corrected, -1);
  EXPECT_EQ(g.persistence_mode, -1);
  EXPECT_EQ(g.compute_mode, -1);
  EXPECT_EQ(g.mig_mode, -1);
}

// A GPU running this process (using `bytes`) and one other, listed first.
FakeGpu SharedGpu(int64_t bytes) {
  FakeGpu gpu;
  gpu.process_pids[0] = getpid() + 1;  // another job's process
  gpu.process_used[0] = 7LL << 30;
  gpu.process_pids[1] = getpid();
  gpu.process_used[1] = bytes;
  gpu.process_count = 2;
  return gpu;
}

TEST(NvmlTest, ThisProcesssMemoryIsItsEntryAmongTheGpusProcesses) {
  const FakeGpu gpu = SharedGpu(3LL << 30);
  fake_nvml_set_gpus(&gpu, 1);
  auto nvml = Nvml::Open();
  ASSERT_TRUE(nvml.ok());
  EXPECT_DOUBLE_EQ((*nvml)->Read(0).process_memory_bytes, 3.0 * (1 << 30));
  // It changes from sample to sample: a sampler's read takes it too, in one
  // call when the list fits.
  const int calls = fake_nvml_process_list_calls(3);
  const GpuState g = (*nvml)->Read(0, /*pcie_throughput=*/false, Nvml::Fields::kChanging);
  EXPECT_DOUBLE_EQ(g.process_memory_bytes, 3.0 * (1 << 30));
  EXPECT_EQ(fake_nvml_process_list_calls(3), calls + 1);
}

TEST(NvmlTest, ThisProcesssMemoryIsUnknownWhenNvmlDoesNotListOrKnowIt) {
  FakeGpu gpu = SharedGpu(3LL << 30);
  gpu.process_count = 1;  // only the other process (as in a PID namespace: no host PID matches)
  fake_nvml_set_gpus(&gpu, 1);
  auto nvml = Nvml::Open();
  ASSERT_TRUE(nvml.ok());
  const GpuState absent = (*nvml)->Read(0);
  EXPECT_TRUE(std::isnan(absent.process_memory_bytes));
  EXPECT_DOUBLE_EQ(absent.memory_used_bytes, 40.0 * (1 << 30));  // the rest is read

  gpu = SharedGpu(-1);  // listed, but NVML_VALUE_NOT_AVAILABLE
  fake_nvml_set_gpus(&gpu, 1);
  EXPECT_TRUE(std::isnan((*nvml)->Read(0).process_memory_bytes))
      << "NVML_VALUE_NOT_AVAILABLE is not 16 EiB";

  gpu.process_count = -1;  // the driver cannot list them
  fake_nvml_set_gpus(&gpu, 1);
  EXPECT_TRUE(std::isnan((*nvml)->Read(0).process_memory_bytes));
}

TEST(NvmlTest, ThisProcesssMemoryIsFoundOnACrowdedGpu) {
  // 100 processes before this one: more than the first array holds. NVML
  // says how many it has; the second call, with room for them, finds it.
  FakeGpu gpu = SharedGpu(5LL << 30);
  gpu.other_processes = 100;
  fake_nvml_set_gpus(&gpu, 1);
  auto nvml = Nvml::Open();
  ASSERT_TRUE(nvml.ok());
  const int calls = fake_nvml_process_list_calls(3);
  EXPECT_DOUBLE_EQ((*nvml)->Read(0).process_memory_bytes, 5.0 * (1 << 30));
  EXPECT_EQ(fake_nvml_process_list_calls(3), calls + 2);
  // A list beyond any plausible GPU's is not allocated for: unknown.
  gpu.other_processes = 5000;
  fake_nvml_set_gpus(&gpu, 1);
  EXPECT_TRUE(std::isnan((*nvml)->Read(0).process_memory_bytes));
}

TEST(NvmlTest, DriversWhoseV3ListerFillsWiderEntriesAreAskedThroughV2) {
  // Drivers 535.43 to 535.86 filled 32-byte entries from _v3: read as
  // nvml.h's 24-byte ones, the second entry (this process's) would be
  // garbage, and a long list would overrun the array.
  const FakeGpu gpu = SharedGpu(3LL << 30);
  fake_nvml_set_gpus(&gpu, 1);
  fake_nvml_set_driver("535.54.03", /*wide_v3_entries=*/true);
  auto wide = Nvml::Open();
  const int v2_calls = fake_nvml_process_list_calls(2);
  const int v3_calls = fake_nvml_process_list_calls(3);
  const double wide_bytes = wide.ok() ? (*wide)->Read(0).process_memory_bytes : 0;
  EXPECT_EQ(fake_nvml_process_list_calls(2), v2_calls + 1);
  EXPECT_EQ(fake_nvml_process_list_calls(3), v3_calls);
  // 535.104 restored nvml.h's entries in _v3: asked through it again.
  fake_nvml_set_driver("535.104.05", /*wide_v3_entries=*/false);
  auto fixed = Nvml::Open();
  const double fixed_bytes = fixed.ok() ? (*fixed)->Read(0).process_memory_bytes : 0;
  EXPECT_EQ(fake_nvml_process_list_calls(3), v3_calls + 1);
  fake_nvml_set_driver("580.65.06", /*wide_v3_entries=*/false);
  ASSERT_TRUE(wide.ok());
  ASSERT_TRUE(fixed.ok());
  EXPECT_DOUBLE_EQ(wide_bytes, 3.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(fixed_bytes, 3.0 * (1 << 30));
}

TEST(NvmlTest, UnsupportedQueriesStayUnknownAndTheRestIsRead) {
  FakeGpu gpu;
  gpu.power_mw = -1;
  gpu.clocks_event_reasons = -1;
  gpu.ecc_corrected = gpu.ecc_uncorrected = -1;
  gpu.mig = -1;
  fake_nvml_set_gpus(&gpu, 1);
  auto nvml = Nvml::Open();
  ASSERT_TRUE(nvml.ok());
  const GpuState g = (*nvml)->Read(0);
  EXPECT_TRUE(std::isnan(g.power_w));
  EXPECT_FALSE(g.clocks_event_reasons_known);
  EXPECT_EQ(g.ecc_corrected, -1);
  EXPECT_EQ(g.mig_mode, -1);
  EXPECT_DOUBLE_EQ(g.temperature_c, 45);  // the rest is there
  EXPECT_DOUBLE_EQ(g.power_limit_w, 700);
}

TEST(NvmlTest, ThrottleReasonsAreNamed) {
  EXPECT_THAT(ClocksEventReasonNames(kSwPowerCap | kHwThermalSlowdown),
              ElementsAre("sw_power_cap", "hw_thermal_slowdown"));
  EXPECT_THAT(ClocksEventReasonNames(kGpuIdle), ElementsAre("gpu_idle"));
  EXPECT_THAT(ClocksEventReasonNames(uint64_t{1} << 40), ElementsAre("bit_40"));
  EXPECT_TRUE(ClocksEventReasonNames(0).empty());
  EXPECT_TRUE(IsThrottling(kSwPowerCap));
  EXPECT_TRUE(IsThrottling(kHwSlowdown | kGpuIdle));
  EXPECT_FALSE(IsThrottling(kGpuIdle | kApplicationsClocksSetting));

  FakeGpu gpu;
  gpu.clocks_event_reasons = static_cast<int64_t>(kSwPowerCap | kSwThermalSlowdown);
  gpu.sm_clock = 1410;
  fake_nvml_set_gpus(&gpu, 1);
  auto nvml = Nvml::Open();
  ASSERT_TRUE(nvml.ok());
  const GpuState g = (*nvml)->Read(0);
  EXPECT_THAT(ClocksEventReasonNames(g.clocks_event_reasons),
              ElementsAre("sw_power_cap", "sw_thermal_slowdown"));
  EXPECT_TRUE(IsThrottling(g.clocks_event_reasons));
}

TEST(NvmlTest, InitFailureSaysWhyAndClosingShutsDown) {
  fake_nvml_fail_init(9);
  absl::StatusOr<std::unique_ptr<Nvml>> failed = Nvml::Open();
  fake_nvml_fail_init(0);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(),
              HasSubstr("NVML_ERROR_DRIVER_NOT_LOADED (no NVIDIA driver is loaded)"));
  {
    auto nvml = Nvml::Open();
    ASSERT_TRUE(nvml.ok());
    EXPECT_EQ(fake_nvml_inits(), 1);
  }
  EXPECT_EQ(fake_nvml_inits(), 0) << "every nvmlInit is shut down";
}

TEST(NvmlTest, AFailedCallIsNamedInNvmlsWordsAndWhere) {
  fake_nvml_fail_init(18);  // NVML_ERROR_LIB_RM_VERSION_MISMATCH: a driver upgraded under the job
  absl::StatusOr<std::unique_ptr<Nvml>> mismatched = Nvml::Open();
  fake_nvml_fail_init(1000);  // a code newer than gpuscope's names (within nvmlReturn_t's range)
  absl::StatusOr<std::unique_ptr<Nvml>> unnamed = Nvml::Open();
  fake_nvml_fail_init(0);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_EQ(mismatched.status().code(), absl::StatusCode::kFailedPrecondition)
      << "NVML is unusable here";
  EXPECT_THAT(mismatched.status().message(),
              HasSubstr("nvmlInit() failed: NVML_ERROR_LIB_RM_VERSION_MISMATCH at nvml.cc:"));
  ASSERT_FALSE(unnamed.ok());
  EXPECT_THAT(unnamed.status().message(),
              HasSubstr("nvmlInit() failed: NVML error 1000 at nvml.cc:"));
  EXPECT_EQ(fake_nvml_inits(), 0);
}

TEST(NvmlTest, AMissingLibraryIsNotFound) {
  setenv("GPUSCOPE_LIBNVML", "/nonexistent/libnvidia-ml.so.1", 1);
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Open();
  setenv("GPUSCOPE_LIBNVML", FAKE_LIBNVML_PATH, 1);
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpuscope::internal

int main(int argc, char** argv) {
  setenv("GPUSCOPE_LIBNVML", FAKE_LIBNVML_PATH, 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
