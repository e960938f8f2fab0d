// `gpuscope doctor` on a fake NVML and a fake /proc and /sys: every rule
// fires on a node built to trip it and stays quiet on a healthy one; the
// baseline diff catches a PCIe link trained down from x16 Gen4 to x8 Gen3;
// saved reports read back; corrupt ones are refused with a clear error.

#include "gpuscope/doctor.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "fakes/fake_nvml.h"
#include "gmock/gmock.h"
#include "gpuscope/report.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A healthy node: 16 CPUs on 2 NUMA nodes, no container limit, plenty of
// memory, no swap in use; the GPU on node 0, where the process runs.
class FakeNode : public testing::TempTree {
 public:
  FakeNode() {
    Write("proc/stat", "cpu 100 0 50 800 40 5 5 0\n");
    Write("proc/meminfo",
          "MemTotal: 67108864 kB\nMemAvailable: 50331648 kB\nSwapTotal: 8388608 kB\nSwapFree: "
          "8388608 kB\n");
    Write("proc/loadavg", "2.00 1.00 1.00 2/300 1\n");
    Write("sys/devices/system/cpu/online", "0-15\n");
    Write("sys/devices/system/node/node0/cpulist", "0-7\n");
    Write("sys/devices/system/node/node1/cpulist", "8-15\n");
    Write("sys/bus/pci/devices/0000:17:00.0/numa_node", "0\n");
    Write("cgroup/cpu.max", "max 100000\n");
  }
  DoctorOptions Options() const {
    return {
        root() + "/proc", root() + "/sys", root() + "/cgroup", {0, 1, 2, 3}};  // pinned to node 0
  }
};

const DoctorCheck* Find(const DoctorReport& r, const std::string& subject, const std::string& id) {
  for (const DoctorCheck& c : r.checks) {
    if (c.subject == subject && c.id == id) return &c;
  }
  return nullptr;
}

DoctorReport Examine(const FakeNode& node, const FakeGpu& gpu) {
  fake_nvml_set_gpus(&gpu, 1);
  return RunDoctor(node.Options());
}

TEST(DoctorTest, AHealthyNodeIsAllOk) {
  FakeNode node;
  const DoctorReport r = Examine(node, FakeGpu{});
  for (const DoctorCheck& c : r.checks) {
    EXPECT_EQ(c.status, CheckStatus::kOk)
        << c.subject << "." << c.id << ": " << c.value << " / " << c.reason;
  }
  EXPECT_FALSE(r.has_failures());
  EXPECT_EQ(r.gpu_count, 1);
  EXPECT_EQ(r.driver_version, "580.65.06");
  for (const char* id : {"pcie_link", "clocks", "persistence", "ecc", "temperature", "power",
                         "compute_mode", "mig", "numa"}) {
    EXPECT_NE(Find(r, "gpu0", id), nullptr) << id;
  }
  for (const char* id : {"driver", "cpus", "memory", "swap", "load"})
    EXPECT_NE(Find(r, "host", id), nullptr) << id;
  EXPECT_EQ(r.facts.at("gpu0.pcie_width"), "x16");
  EXPECT_EQ(r.facts.at("gpu0.pcie_link_max"), "Gen5 x16");
  const std::string text = FormatDoctor(r);
  EXPECT_THAT(text, HasSubstr("  OK   gpu0  pcie_link    Gen5 x16 (max Gen5 x16)\n"));
  EXPECT_THAT(text, HasSubstr("0 failed, 0 warnings"));
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 80u) << line;
}

struct RuleCase {
  const char* name;
  void (*trip)(FakeGpu&, FakeNode&);
  const char* subject;
  const char* id;
  CheckStatus status;
  const char* reason_has;
};

class DoctorRuleTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(DoctorRuleTest, FiresOnANodeBuiltToTripItAndNamesTheFix) {
  const RuleCase& rc = GetParam();
  FakeNode node;
  FakeGpu gpu;
  rc.trip(gpu, node);
  const DoctorReport r = Examine(node, gpu);
  const DoctorCheck* c = Find(r, rc.subject, rc.id);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, rc.status) << c->value;
  EXPECT_THAT(c->reason, HasSubstr(rc.reason_has));
  EXPECT_EQ(r.has_failures(), rc.status == CheckStatus::kFail);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, DoctorRuleTest,
    ::testing::Values(
        RuleCase{"narrow_link", [](FakeGpu& g, FakeNode&) { g.pcie_width = 8; }, "gpu0",
                 "pcie_link", CheckStatus::kFail, "trained down to x8 of x16"},

        RuleCase{"power_cap",
                 [](FakeGpu& g, FakeNode&) {
                   g.clocks_event_reasons = 0x4;
                   g.sm_clock = 1410;
                 },
                 "gpu0", "clocks", CheckStatus::kWarn, "power limit"},
        RuleCase{"hw_slowdown", [](FakeGpu& g, FakeNode&) { g.clocks_event_reasons = 0x8; }, "gpu0",
                 "clocks", CheckStatus::kFail, "hardware slowdown"},
        RuleCase{"persistence", [](FakeGpu& g, FakeNode&) { g.persistence = 0; }, "gpu0",
                 "persistence", CheckStatus::kWarn, "nvidia-smi -pm 1"},
        RuleCase{"ecc_uncorrected", [](FakeGpu& g, FakeNode&) { g.ecc_uncorrected = 2; }, "gpu0",
                 "ecc", CheckStatus::kFail, "uncorrected memory errors"},
        RuleCase{"ecc_corrected", [](FakeGpu& g, FakeNode&) { g.ecc_corrected = 5; }, "gpu0", "ecc",
                 CheckStatus::kWarn, "corrected memory errors"},
        RuleCase{"hot", [](FakeGpu& g, FakeNode&) { g.temperature = 88; }, "gpu0", "temperature",
                 CheckStatus::kWarn, "thermal slowdown is near"},
        RuleCase{"at_power_limit", [](FakeGpu& g, FakeNode&) { g.power_mw = 699000; }, "gpu0",
                 "power", CheckStatus::kWarn, "at its power limit"},
        RuleCase{"prohibited", [](FakeGpu& g, FakeNode&) { g.compute_mode = 2; }, "gpu0",
                 "compute_mode", CheckStatus::kFail, "prohibited"},
        RuleCase{"numa",
                 [](FakeGpu&, FakeNode& n) {
                   n.Write("sys/bus/pci/devices/0000:17:00.0/numa_node", "1\n");
                 },
                 "gpu0", "numa", CheckStatus::kWarn, "numactl --cpunodebind=1"},
        RuleCase{"cpu_limit",
                 [](FakeGpu&, FakeNode& n) {
                   n.Write("cgroup/cpu.max", "200000 100000\n"); /* 2 of the 4 allowed */
                 },
                 "host", "cpus", CheckStatus::kWarn, "num_workers"},
        RuleCase{"swap",
                 [](FakeGpu&, FakeNode& n) {
                   n.Write("proc/meminfo",
                           "MemTotal: 67108864 kB\nMemAvailable: 50331648 kB\nSwapTotal: 8388608 "
                           "kB\nSwapFree: 1048576 kB\n");
                   n.Write("proc/pressure/memory", "some avg10=5.00 avg60=1 avg300=1 total=1\n");
                 },
                 "host", "swap", CheckStatus::kWarn, "swap in use while memory is short"},
        RuleCase{"cpu_limit_v1",
                 [](FakeGpu&, FakeNode& n) {
                   n.Write("proc/self/cgroup", "4:cpu,cpuacct:/docker/ab\n");
                   n.Write("cgroup/cpu,cpuacct/cpu.cfs_quota_us", "150000\n");
                   n.Write("cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
                 },
                 "host", "cpus", CheckStatus::kWarn, "num_workers"},
        // 48 GiB free on the host, but the container's 8 GiB limit is all but used.
        RuleCase{"container_memory",
                 [](FakeGpu&, FakeNode& n) {
                   n.Write("proc/self/cgroup", "0::/pod\n");
                   n.Write("cgroup/pod/memory.max", "8589934592\n");
                   n.Write("cgroup/pod/memory.current", "8480000000\n");
                 },
                 "host", "memory", CheckStatus::kWarn, "DataLoader workers"},
        RuleCase{"memory_pressure",
                 [](FakeGpu&, FakeNode& n) {
                   n.Write("proc/pressure/memory", "some avg10=25.00 avg60=1 avg300=1 total=1\n");
                 },
                 "host", "memory", CheckStatus::kWarn, "stall"},
        RuleCase{"load",
                 [](FakeGpu&, FakeNode& n) { n.Write("proc/loadavg", "400.0 1 1 2/300 1\n"); },
                 "host", "load", CheckStatus::kWarn, "compete"}),
    [](const ::testing::TestParamInfo<RuleCase>& p) { return std::string(p.param.name); });

TEST(DoctorTest, QuietWhereNodesAreNormal) {
  FakeNode node;
  FakeGpu idle;
  idle.pcie_gen = 1;  // GPUs lower the link generation at idle
  EXPECT_EQ(Find(Examine(node, idle), "gpu0", "pcie_link")->status, CheckStatus::kOk);
  // Swap resident while memory is plentiful and nobody stalls on it.
  node.Write("proc/meminfo",
             "MemTotal: 67108864 kB\nMemAvailable: 50331648 kB\nSwapTotal: 8388608 kB\nSwapFree: "
             "1048576 kB\n");
  EXPECT_EQ(Find(Examine(node, FakeGpu{}), "host", "swap")->status, CheckStatus::kOk);
  // A container limit with room to spare.
  node.Write("proc/self/cgroup", "0::/pod\n");
  node.Write("cgroup/pod/memory.max", "8589934592\n");
  node.Write("cgroup/pod/memory.current", "2147483648\n");
  const DoctorReport report = Examine(node, FakeGpu{});
  const DoctorCheck* memory = Find(report, "host", "memory");
  EXPECT_EQ(memory->status, CheckStatus::kOk);
  EXPECT_THAT(memory->value, HasSubstr("6.0 of 8.0 GiB available (container limit)"));
  // Load compared with the host's 16 CPUs, not the 4 this process may use.
  node.Write("proc/loadavg", "12.00 1 1 2/300 1\n");
  EXPECT_EQ(Find(Examine(node, FakeGpu{}), "host", "load")->status, CheckStatus::kOk);
}

TEST(DoctorTest, BaselineDiffCatchesALinkTrainedDown) {
  FakeNode node;
  FakeGpu good;
  good.pcie_gen = good.pcie_gen_max = 4;
  const DoctorReport baseline = Examine(node, good);
  absl::StatusOr<DoctorReport> saved = DoctorFromJson(ToJson(baseline));
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(*saved, baseline);
  EXPECT_TRUE(DoctorBaselineDiff(*saved, Examine(node, good)).empty())
      << "the same node is the same";

  FakeGpu degraded = good;
  degraded.pcie_gen = 3;
  degraded.pcie_width = 8;
  degraded.temperature = 60;  // readings that move on their own are not compared
  EXPECT_THAT(DoctorBaselineDiff(*saved, Examine(node, degraded)),
              ElementsAre("gpu0.pcie_width: x16 -> x8"));
  // A link that merely idles at a lower generation is the same node.
  FakeGpu idle = good;
  idle.pcie_gen = 1;
  EXPECT_TRUE(DoctorBaselineDiff(*saved, Examine(node, idle)).empty());
}

TEST(DoctorTest, WithoutAGpuItSaysSoAndChecksTheHost) {
  FakeNode node;
  setenv("GPUSCOPE_LIBNVML", "/nonexistent/libnvidia-ml.so.1", 1);
  const DoctorReport r = RunDoctor(node.Options());
  setenv("GPUSCOPE_LIBNVML", FAKE_LIBNVML_PATH, 1);
  const DoctorCheck* gpus = Find(r, "host", "gpus");
  ASSERT_NE(gpus, nullptr);
  EXPECT_EQ(gpus->status, CheckStatus::kWarn);
  EXPECT_THAT(gpus->reason, HasSubstr("no GPU checks"));
  EXPECT_FALSE(r.has_failures()) << "a node without a GPU is not a failure";
  EXPECT_NE(Find(r, "host", "memory"), nullptr);
  EXPECT_EQ(r.facts.at("gpu_count"), "0");
}

TEST(DoctorTest, CorruptOrUnrelatedBaselinesAreRefusedClearly) {
  EXPECT_THAT(DoctorFromJson("{\"schema\": \"gpuscope.doctor\", \"schema_ver").status().message(),
              HasSubstr("invalid JSON"));
  EXPECT_THAT(DoctorFromJson("{\"schema_version\": 1, \"steps\": 3}").status().message(),
              HasSubstr("is it a summary"));
  EXPECT_EQ(
      DoctorFromJson("{\"schema\": \"gpuscope.doctor\", \"schema_version\": 9}").status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(DoctorFromJson("[]").status().message(), HasSubstr("not an object"));
}

}  // namespace
}  // namespace gpuscope

int main(int argc, char** argv) {
  setenv("GPUSCOPE_LIBNVML", FAKE_LIBNVML_PATH, 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
