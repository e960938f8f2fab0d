// Host telemetry and placement from a fake /proc and /sys tree: every file
// format parsed, missing files left unknown, rates computed.

#include "backends/host/host_stats.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope::internal {
namespace {

using ::testing::ElementsAre;

using FakeRoot = testing::TempTree;

TEST(HostStatsTest, ReadsEveryProcFile) {
  FakeRoot r;
  r.Write("proc/stat", "cpu  100 0 50 800 40 5 5 0 0 0\ncpu0 50 0 25 400 20 2 3 0 0 0\n");
  const long hz = sysconf(_SC_CLK_TCK);
  r.Write("proc/self/stat", "1234 (python -m train) S 1 2 3 4 5 6 7 8 9 10 " +
                                std::to_string(3 * hz) + " " + std::to_string(hz) + " " +
                                std::to_string(8 * hz) + " " + std::to_string(2 * hz) +
                                " 20 0 1 0\n");
  r.Write("proc/meminfo",
          "MemTotal:       16384 kB\nMemFree:  1 kB\nMemAvailable:    8192 kB\nSwapTotal: 4096 "
          "kB\nSwapFree: 1024 kB\n");
  r.Write("proc/loadavg", "3.50 2.00 1.00 2/300 4242\n");
  r.Write("proc/pressure/memory",
          "some avg10=12.50 avg60=3.00 avg300=1.00 total=99\nfull avg10=1.00 avg60=0 avg300=0 "
          "total=9\n");
  r.Write("proc/vmstat", "nr_free_pages 10\npswpin 7\npswpout 11\n");
  absl::StatusOr<HostSnapshot> s = ReadHost(r.Path("proc"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->cpu.user, 100u);
  EXPECT_EQ(s->cpu.iowait, 40u);
  EXPECT_EQ(s->cpu.total(), 1000u);
  EXPECT_DOUBLE_EQ(s->process_cpu_s, 4.0);    // utime 3 s + stime 1 s, the name's spaces skipped
  EXPECT_DOUBLE_EQ(s->children_cpu_s, 10.0);  // DataLoader workers, once reaped
  EXPECT_DOUBLE_EQ(s->mem_total_bytes, 16384.0 * 1024);
  EXPECT_DOUBLE_EQ(s->mem_available_bytes, 8192.0 * 1024);
  EXPECT_DOUBLE_EQ(s->swap_total_bytes - s->swap_free_bytes, 3072.0 * 1024);
  EXPECT_DOUBLE_EQ(s->load1, 3.5);
  EXPECT_DOUBLE_EQ(s->memory_pressure_pct, 12.5);
  EXPECT_EQ(s->swap_in_pages, 7u);
  EXPECT_EQ(s->swap_out_pages, 11u);
}

TEST(HostStatsTest, OptionalFilesMissingStayUnknownButStatIsRequired) {
  FakeRoot r;
  EXPECT_EQ(ReadHost(r.Path("proc")).status().code(), absl::StatusCode::kNotFound);
  r.Write("proc/stat", "intr 1 2 3\n");
  EXPECT_EQ(ReadHost(r.Path("proc")).status().code(), absl::StatusCode::kDataLoss);
  r.Write("proc/stat", "cpu 1 2 3 4 5 6 7 8\n");
  absl::StatusOr<HostSnapshot> s = ReadHost(r.Path("proc"));
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(std::isnan(s->mem_total_bytes));
  EXPECT_TRUE(std::isnan(s->memory_pressure_pct));  // no PSI
  EXPECT_EQ(s->process_cpu_s, 0);
}

TEST(HostStatsTest, RatesBetweenSnapshots) {
  HostSnapshot a, b;
  a.cpu = {100, 0, 50, 800, 50, 0, 0, 0};
  b.cpu = {300, 0, 150, 1000, 150, 0, 0, 0};  // +600 ticks: 300 busy, 200 idle, 100 iowait
  a.process_cpu_s = 10;
  b.process_cpu_s = 14;
  a.children_cpu_s = 0;
  b.children_cpu_s = 6;
  b.swap_in_pages = 20;
  const HostRates r = RatesBetween(a, b, 2.0);
  EXPECT_DOUBLE_EQ(r.cpu_pct, 50.0);
  EXPECT_NEAR(r.iowait_pct, 100.0 / 6, 1e-12);
  EXPECT_DOUBLE_EQ(r.process_cores, 2.0);
  EXPECT_DOUBLE_EQ(r.children_cores, 3.0);
  EXPECT_DOUBLE_EQ(r.swap_pages_per_s, 10.0);
}

TEST(HostStatsTest, CpuLists) {
  EXPECT_THAT(ParseCpuList("0-3,8,10-11\n"), ElementsAre(0, 1, 2, 3, 8, 10, 11));
  EXPECT_THAT(ParseCpuList("5"), ElementsAre(5));
  EXPECT_TRUE(ParseCpuList("3-1").empty());
  EXPECT_TRUE(ParseCpuList("x").empty());
}

TEST(HostStatsTest, PlacementCgroupLimitAffinityAndNuma) {
  FakeRoot r;
  r.Write("sys/devices/system/cpu/online", "0-63\n");
  r.Write("sys/devices/system/node/node0/cpulist", "0-31\n");
  r.Write("sys/devices/system/node/node1/cpulist", "32-63\n");
  r.Write("cgroup/cpu.max", "800000 100000\n");
  r.Write("sys/bus/pci/devices/0000:17:00.0/numa_node", "1\n");
  const std::vector<int> allowed = {0, 1, 2, 3};  // pinned to node 0
  const HostPlacement p = ReadPlacement(r.Path("sys"), r.Path("cgroup"), &allowed, r.Path("proc"));
  EXPECT_EQ(p.cpus_online, 64);
  EXPECT_EQ(p.cpus_allowed, 4);
  EXPECT_DOUBLE_EQ(p.cgroup_cpu_limit, 8.0);
  EXPECT_THAT(p.numa_nodes_of_allowed_cpus, ElementsAre(0));
  EXPECT_EQ(PciNumaNode(r.Path("sys"), "00000000:17:00.0"), 1);  // NVML's 8-digit domain
  EXPECT_EQ(PciNumaNode(r.Path("sys"), "00000000:65:00.0"), -1);
  r.Write("sys/bus/pci/devices/0000:b3:00.0/numa_node", "1\n");
  EXPECT_EQ(PciNumaNode(r.Path("sys"), "00000000:B3:00.0"), 1);  // NVML writes hex in upper case
  r.Write("sys/bus/pci/devices/10000:01:00.0/numa_node", "0\n");
  EXPECT_EQ(PciNumaNode(r.Path("sys"), "00010000:01:00.0"), 0);  // a VMD domain keeps its digits
  r.Write("cgroup/cpu.max", "max 100000\n");
  EXPECT_TRUE(std::isnan(
      ReadPlacement(r.Path("sys"), r.Path("cgroup"), &allowed, r.Path("proc")).cgroup_cpu_limit));
}

TEST(HostStatsTest, CgroupLimitIsTheTightestOnTheWayUpFromTheProcessesOwn) {
  FakeRoot r;
  const std::vector<int> allowed = {0, 1, 2, 3};
  r.Write("proc/self/cgroup", "0::/slurm/job_7/step_0\n");
  r.Write("cgroup/cpu.max", "max 100000\n");
  r.Write("cgroup/slurm/cpu.max", "max 100000\n");
  r.Write("cgroup/slurm/job_7/cpu.max", "300000 100000\n");      // the job: 3 cores
  r.Write("cgroup/slurm/job_7/step_0/cpu.max", "max 100000\n");  // the step: no limit of its own
  EXPECT_DOUBLE_EQ(
      ReadPlacement(r.Path("sys"), r.Path("cgroup"), &allowed, r.Path("proc")).cgroup_cpu_limit,
      3.0);
  r.Write("cgroup/cpu.max", "150000 100000\n");  // a tighter root
  EXPECT_DOUBLE_EQ(
      ReadPlacement(r.Path("sys"), r.Path("cgroup"), &allowed, r.Path("proc")).cgroup_cpu_limit,
      1.5);
}

TEST(HostStatsTest, CgroupV1CpuQuotaCounts) {
  // A cgroup v1 container (Docker without a cgroup namespace): the path names
  // the host's hierarchy, the mount shows the container's own cgroup.
  FakeRoot r;
  const std::vector<int> allowed = {0, 1, 2, 3};
  r.Write("proc/self/cgroup",
          "12:memory:/docker/ab12\n4:cpu,cpuacct:/docker/ab12\n1:name=systemd:/docker/ab12\n");
  r.Write("cgroup/cpu,cpuacct/cpu.cfs_quota_us", "250000\n");
  r.Write("cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(
      ReadPlacement(r.Path("sys"), r.Path("cgroup"), &allowed, r.Path("proc")).cgroup_cpu_limit,
      2.5);
  r.Write("cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");  // no limit
  EXPECT_TRUE(std::isnan(
      ReadPlacement(r.Path("sys"), r.Path("cgroup"), &allowed, r.Path("proc")).cgroup_cpu_limit));
  // With the host's hierarchy visible, the process's own directory counts.
  r.Write("cgroup/cpu,cpuacct/docker/ab12/cpu.cfs_quota_us", "50000\n");
  r.Write("cgroup/cpu,cpuacct/docker/ab12/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(
      ReadPlacement(r.Path("sys"), r.Path("cgroup"), &allowed, r.Path("proc")).cgroup_cpu_limit,
      0.5);
  EXPECT_THAT(CgroupChain(r.Path("proc"), r.Path("cgroup"), "cpu"),
              ElementsAre(r.Path("cgroup/cpu,cpuacct/docker/ab12"),
                          r.Path("cgroup/cpu,cpuacct/docker"), r.Path("cgroup/cpu,cpuacct")));
  EXPECT_TRUE(CgroupChain(r.Path("proc"), r.Path("cgroup"), "").empty());  // no v2 line
}

TEST(HostStatsTest, ContainerMemoryIsTheTightestLimitLessWhatCountsAgainstIt) {
  FakeRoot r;
  r.Write("proc/self/cgroup", "0::/kubepods/pod1/c1\n");
  r.Write("cgroup/kubepods/memory.max", "max\n");
  r.Write("cgroup/kubepods/pod1/memory.max", "17179869184\n");      // 16 GiB
  r.Write("cgroup/kubepods/pod1/memory.current", "12884901888\n");  // 12 GiB
  r.Write("cgroup/kubepods/pod1/memory.stat",
          "anon 8589934592\nfile 4294967296\ninactive_file 2147483648\n");
  r.Write("cgroup/kubepods/pod1/c1/memory.max", "max\n");
  ContainerMemory m = ReadContainerMemory(r.Path("cgroup"), r.Path("proc"));
  EXPECT_DOUBLE_EQ(m.limit_bytes, 16.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(m.available_bytes, 6.0 * (1 << 30));  // 16 - (12 - 2 inactive)

  FakeRoot none;  // no limit anywhere
  none.Write("proc/self/cgroup", "0::/\n");
  none.Write("cgroup/memory.current", "1000\n");
  EXPECT_TRUE(std::isnan(ReadContainerMemory(none.Path("cgroup"), none.Path("proc")).limit_bytes));

  FakeRoot v1;  // cgroup v1: "no limit" is a huge number
  v1.Write("proc/self/cgroup", "9:memory:/docker/ab12\n");
  v1.Write("cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  v1.Write("cgroup/memory/memory.usage_in_bytes", "1000\n");
  EXPECT_TRUE(std::isnan(ReadContainerMemory(v1.Path("cgroup"), v1.Path("proc")).limit_bytes));
  v1.Write("cgroup/memory/memory.limit_in_bytes", "4294967296\n");
  v1.Write("cgroup/memory/memory.usage_in_bytes", "3221225472\n");
  v1.Write("cgroup/memory/memory.stat", "cache 100\ntotal_inactive_file 1073741824\n");
  m = ReadContainerMemory(v1.Path("cgroup"), v1.Path("proc"));
  EXPECT_DOUBLE_EQ(m.limit_bytes, 4.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(m.available_bytes, 2.0 * (1 << 30));
}

TEST(HostStatsTest, ProcFileReadsWholeFilesOfAnySizeFromWhereItOpenedThem) {
  FakeRoot r;
  const std::string big(10000, 'x');  // over the first buffer's 4 KiB
  r.Write("big", big);
  for (ProcFile::End end : {ProcFile::End::kAtEof, ProcFile::End::kAtShortRead}) {
    ProcFile f(r.Path("big"), end);
    absl::string_view text;
    ASSERT_TRUE(f.Read(&text));
    EXPECT_EQ(text, big);
    EXPECT_TRUE(f.is_open());
    ASSERT_TRUE(f.Read(&text));  // again, from the open file
    EXPECT_EQ(text, big);
  }
  ProcFile f(r.Path("big"), ProcFile::End::kAtShortRead);
  absl::string_view text;
  ASSERT_TRUE(f.Read(&text));
  r.Write("big", "short now\n");  // rewritten in place: the open file reads it
  ASSERT_TRUE(f.Read(&text));
  EXPECT_EQ(text, "short now\n");

  ProcFile missing(r.Path("later"));
  EXPECT_FALSE(missing.Read(&text));
  r.Write("later", "here\n");
  EXPECT_FALSE(missing.Read(&text, /*may_open=*/false));  // not looked for again...
  ASSERT_TRUE(missing.Read(&text, /*may_open=*/true));    // ...unless asked to
  EXPECT_EQ(text, "here\n");
}

TEST(HostStatsTest, HostReaderReadsWhatReadHostReadsFromFilesItKeepsOpen) {
  FakeRoot r;
  const long hz = sysconf(_SC_CLK_TCK);
  r.Write("proc/stat", "cpu  100 0 50 800 40 5 5 0 0 0\ncpu0 50 0 25 400 20 2 3 0 0 0\n");
  r.Write("proc/self/stat", "1234 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 " + std::to_string(3 * hz) +
                                " " + std::to_string(hz) + " 0 0 20 0 1 0\n");
  r.Write("proc/meminfo", "MemTotal: 16384 kB\nMemAvailable: 8192 kB\nSwapTotal: 4096 kB\n");
  r.Write("proc/loadavg", "3.50 2.00 1.00 2/300 4242\n");
  r.Write("proc/vmstat", "nr_free_pages 10\npswpin 7\npswpout 11\n");
  HostReader reader(r.Path("proc"));
  absl::StatusOr<HostSnapshot> a = reader.Read();
  absl::StatusOr<HostSnapshot> b = ReadHost(r.Path("proc"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->cpu.total(), b->cpu.total());
  EXPECT_DOUBLE_EQ(a->process_cpu_s, 4.0);  // the name's spaces and parentheses skipped
  EXPECT_DOUBLE_EQ(a->mem_available_bytes, b->mem_available_bytes);
  EXPECT_DOUBLE_EQ(a->load1, 3.5);
  EXPECT_EQ(a->swap_in_pages, 7u);
  EXPECT_TRUE(std::isnan(a->memory_pressure_pct));  // no PSI file
  // The next read follows the files; a file missing at first is looked for
  // only when asked to (the sampler does, about once a second).
  r.Write("proc/stat", "cpu  200 0 50 800 40 5 5 0 0 0\n");
  r.Write("proc/vmstat", "pswpin 9\npswpout 11\n");
  r.Write("proc/pressure/memory", "some avg10=2.50 avg60=0 avg300=0 total=1\n");
  a = reader.Read();
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->cpu.user, 200u);
  EXPECT_EQ(a->swap_in_pages, 9u);  // the host has swap: read every time
  EXPECT_TRUE(std::isnan(a->memory_pressure_pct));
  a = reader.Read(/*look_again=*/true);
  ASSERT_TRUE(a.ok());
  EXPECT_DOUBLE_EQ(a->memory_pressure_pct, 2.5);
  // The load average and pressure (the kernel updates them every few
  // seconds) are read again when looking again.
  r.Write("proc/loadavg", "4.00 2.00 1.00 2/300 4242\n");
  r.Write("proc/pressure/memory", "some avg10=3.00 avg60=0 avg300=0 total=1\n");
  a = reader.Read();
  EXPECT_DOUBLE_EQ(a->load1, 3.5);
  EXPECT_DOUBLE_EQ(a->memory_pressure_pct, 2.5);
  a = reader.Read(/*look_again=*/true);
  EXPECT_DOUBLE_EQ(a->load1, 4.0);
  EXPECT_DOUBLE_EQ(a->memory_pressure_pct, 3.0);
}

TEST(HostStatsTest, HostReaderReadsTheSwapCountersWithoutSwapOnlyWhenLookingAgain) {
  FakeRoot r;
  r.Write("proc/stat", "cpu 1 2 3 4 5 6 7 8\n");
  r.Write("proc/meminfo", "MemTotal: 16384 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n");
  r.Write("proc/vmstat", "pswpin 7\npswpout 11\n");
  HostReader reader(r.Path("proc"));
  ASSERT_EQ(reader.Read()->swap_in_pages, 7u);  // the first read takes them
  r.Write("proc/vmstat", "pswpin 8\npswpout 12\n");
  EXPECT_EQ(reader.Read()->swap_in_pages, 7u);  // no swap: they cannot have moved
  EXPECT_EQ(reader.Read()->swap_out_pages, 11u);
  EXPECT_EQ(reader.Read(/*look_again=*/true)->swap_in_pages, 8u);
  // Swap turned on: read at once.
  r.Write("proc/meminfo", "MemTotal: 16384 kB\nSwapTotal: 4096 kB\nSwapFree: 4096 kB\n");
  r.Write("proc/vmstat", "pswpin 9\npswpout 13\n");
  EXPECT_EQ(reader.Read()->swap_out_pages, 13u);
}

TEST(HostStatsTest, ContainerMemoryReaderFollowsUsageAndNoticesAMoveWhenLookingAgain) {
  FakeRoot r;
  r.Write("proc/self/cgroup", "0::/kubepods/pod1\n");
  r.Write("cgroup/kubepods/memory.max", "max\n");
  r.Write("cgroup/kubepods/pod1/memory.max", "17179869184\n");      // 16 GiB
  r.Write("cgroup/kubepods/pod1/memory.current", "12884901888\n");  // 12 GiB
  r.Write("cgroup/kubepods/pod1/memory.stat", "anon 1\ninactive_file 2147483648\n");
  r.Write("cgroup/kubepods/pod2/memory.max", "8589934592\n");      // 8 GiB
  r.Write("cgroup/kubepods/pod2/memory.current", "1073741824\n");  // 1 GiB
  ContainerMemoryReader reader(r.Path("cgroup"), r.Path("proc"));
  ContainerMemory m = reader.Read();
  EXPECT_DOUBLE_EQ(m.limit_bytes, 16.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(m.available_bytes, 6.0 * (1 << 30));  // 16 - (12 - 2 inactive)
  EXPECT_DOUBLE_EQ(m.available_bytes,
                   ReadContainerMemory(r.Path("cgroup"), r.Path("proc")).available_bytes);
  r.Write("cgroup/kubepods/pod1/memory.current", "14495514624\n");  // 13.5 GiB
  EXPECT_DOUBLE_EQ(reader.Read().available_bytes, 4.5 * (1 << 30));
  // Moved to pod2: noticed when looking again.
  r.Write("proc/self/cgroup", "0::/kubepods/pod2\n");
  EXPECT_DOUBLE_EQ(reader.Read().limit_bytes, 16.0 * (1 << 30));
  m = reader.Read(/*look_again=*/true);
  EXPECT_DOUBLE_EQ(m.limit_bytes, 8.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(m.available_bytes, 7.0 * (1 << 30));
}

TEST(HostStatsTest, ContainerCpuReaderGivesTheThrottledShareOfTheTightestLevel) {
  FakeRoot r;
  // cgroup v2: a pod with a limit, its container with a tighter one, and a
  // parent without a limit (no periods); cgroup v1's cpu controller beside.
  r.Write("proc/self/cgroup", "4:cpu,cpuacct:/docker/abc\n0::/kubepods/pod1/ctr\n");
  r.Write("cgroup/kubepods/cpu.stat", "usage_usec 9\nnr_periods 0\nnr_throttled 0\n");
  r.Write("cgroup/kubepods/pod1/cpu.stat", "nr_periods 50\nnr_throttled 0\nthrottled_usec 0\n");
  r.Write("cgroup/kubepods/pod1/ctr/cpu.stat",
          "usage_usec 100\nnr_periods 100\nnr_throttled 10\nthrottled_usec 5000\n");
  r.Write("cgroup/cpu,cpuacct/docker/abc/cpu.stat",
          "nr_periods 7\nnr_throttled 0\nthrottled_time 0\n");
  ContainerCpuReader reader(r.Path("cgroup"), r.Path("proc"));
  bool rebuilt = false;
  const std::vector<CgroupThrottling> before = reader.Read(false, &rebuilt);
  EXPECT_TRUE(rebuilt);          // the first read builds the chains
  ASSERT_EQ(before.size(), 7u);  // ctr, pod1, kubepods, the root (v2); abc, docker, the root (v1)
  // A second later: the container throttled in 4 of 10 periods, the pod in
  // 1 of 10, cgroup v1's in 2 of 10.
  r.Write("cgroup/kubepods/pod1/ctr/cpu.stat",
          "usage_usec 900\nnr_periods 110\nnr_throttled 14\nthrottled_usec 90000\n");
  r.Write("cgroup/kubepods/pod1/cpu.stat", "nr_periods 60\nnr_throttled 1\nthrottled_usec 9\n");
  r.Write("cgroup/cpu,cpuacct/docker/abc/cpu.stat",
          "nr_periods 17\nnr_throttled 2\nthrottled_time 5\n");
  std::vector<CgroupThrottling> after = reader.Read(false, &rebuilt);
  EXPECT_FALSE(rebuilt);
  EXPECT_DOUBLE_EQ(ThrottledShare(before, after), 0.4);
  // No period elapsed anywhere (no limit, or no time passed): unknown, not 0.
  EXPECT_TRUE(std::isnan(ThrottledShare(after, after)));
  // A process that moved: the reads do not compare.
  r.Write("proc/self/cgroup", "0::/kubepods/pod1\n");
  const std::vector<CgroupThrottling> moved = reader.Read(/*look_again=*/true, &rebuilt);
  EXPECT_TRUE(rebuilt);
  EXPECT_TRUE(std::isnan(ThrottledShare(after, moved)));
}

TEST(HostStatsTest, ThisMachinesProcIsReadable) {
  absl::StatusOr<HostSnapshot> s = ReadHost();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GT(s->cpu.total(), 0u);
  EXPECT_GT(s->mem_total_bytes, 0);
  EXPECT_GT(ReadPlacement().cpus_allowed, 0);
}

}  // namespace
}  // namespace gpuscope::internal
