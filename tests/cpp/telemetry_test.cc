// Telemetry: per-step time-weighting of the worker's samples (a scripted
// source on a ManualClock), the summary's window numbers, and the system
// sampler on a fake NVML and a fake /proc (child processes included).

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "backends/memory_inbox.h"
#include "backends/nvml/nvml.h"
#include "backends/telemetry/process_roles.h"
#include "backends/telemetry/system_telemetry.h"
#include "fakes/fake_cuda.h"
#include "fakes/fake_nvml.h"
#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"
#include "session/session_impl.h"
#include "session/sources.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using ::testing::ElementsAre;
constexpr int64_t kMs = 1'000'000;

// Returns the scripted samples in order (the last one again when out).
class ScriptedTelemetry final : public internal::Telemetry {
 public:
  explicit ScriptedTelemetry(std::deque<internal::TelemetrySample> script)
      : script_(std::move(script)) {}
  absl::string_view name() const override { return "scripted"; }
  absl::Status Start() override { return absl::OkStatus(); }
  std::string description() const override { return "scripted"; }
  void Sample(int64_t now_ns, internal::TelemetrySample* out) override {
    *out = script_.front();
    if (script_.size() > 1) script_.pop_front();
    out->host_ns = now_ns;
  }

 private:
  std::deque<internal::TelemetrySample> script_;
};

internal::TelemetrySample GpuAt(double util, uint64_t reasons, double clock, double cpu) {
  internal::TelemetrySample s;
  s.gpu_count = 1;
  s.gpus[0].index = 0;
  s.gpus[0].utilization_pct = util;
  s.gpus[0].sm_clock_mhz = clock;
  s.gpus[0].sm_clock_max_mhz = 2000;
  s.gpus[0].clocks_event_reasons = reasons;
  s.gpus[0].pcie_gen = 4;
  s.gpus[0].pcie_gen_max = 4;
  s.gpus[0].pcie_width = reasons != 0 ? 8 : 16;  // the link narrows in the second sample
  s.gpus[0].pcie_width_max = 16;
  s.gpus[0].ecc_uncorrected = 0;
  s.host_cpu_pct = cpu;
  return s;
}

TEST(TelemetryTest, StepsGetTheirTimeWeightedShareOfTheSamples) {
  auto clock = std::make_shared<ManualClock>();
  internal::Backends b;
  b.telemetry = std::make_unique<ScriptedTelemetry>(std::deque<internal::TelemetrySample>{
      GpuAt(100, 0, 2000, 50), GpuAt(0, internal::kSwPowerCap, 1000, 10), GpuAt(60, 0, 2000, 70)});
  std::unique_ptr<Session> s = internal::SessionTestPeer::Create(
      Options{.clock = clock, .flush_interval_ms = 10000, .telemetry_interval_ms = 10},
      std::move(b));
  // The worker's passes, by hand (Flush() and Summarize() never sample).
  const auto worker_pass = [&] { internal::SessionTestPeer::Impl(*s).Pump(); };
  worker_pass();  // sample 1 at t0: 100 %, full clock
  clock->Advance(5 * kMs);
  {
    StepScope step(*s);  // [t0 + 5, t0 + 15]
    clock->Advance(5 * kMs);
    worker_pass();  // sample 2 at t0 + 10: idle since t0, power-capped at half clock
    clock->Advance(5 * kMs);
  }
  // Rates describe the interval before their sample: so far only the step's
  // first half is known (sample 2's 0 % and 10 % CPU).
  Summary sum = s->Summarize();
  ASSERT_TRUE(sum.telemetry.has_value());
  EXPECT_NEAR(*sum.telemetry->gpu_utilization_pct, 0.0, 1e-4);
  EXPECT_NEAR(*sum.telemetry->host_cpu_pct, 10.0, 1e-4);
  clock->Advance(5 * kMs);
  worker_pass();  // sample 3 at t0 + 20: 60 % and 70 % CPU since t0 + 10
  sum = s->Summarize();
  ASSERT_TRUE(sum.telemetry.has_value());
  const TelemetryStats& t = *sum.telemetry;
  EXPECT_EQ(t.source, "scripted");
  EXPECT_EQ(t.steps, 1);
  EXPECT_NEAR(*t.gpu_utilization_pct, 30.0, 1e-4);  // half the step at 0 %, half at 60 %
  EXPECT_NEAR(*t.sm_clock_ratio, 0.75, 1e-6);       // clocks hold after their sample: 1 then 0.5
  EXPECT_NEAR(*t.throttled_sm_clock_ratio, 0.75, 1e-6);  // the one step, throttled
  EXPECT_NEAR(*t.host_cpu_pct, 40.0, 1e-4);
  EXPECT_DOUBLE_EQ(t.throttled_steps, 1.0);
  EXPECT_THAT(t.clocks_event_reasons, ElementsAre("sw_power_cap"));
  EXPECT_FALSE(t.process_cores.has_value());  // never sampled
  ASSERT_EQ(t.gpus.size(), 1u);
  EXPECT_THAT(t.gpus[0].clocks_event_reasons, ElementsAre("sw_power_cap"));
  EXPECT_EQ(t.gpus[0].pcie_width, 8);  // the state of the last sample holding in the window
  EXPECT_EQ(t.gpus[0].pcie_width_max, 16);
  EXPECT_EQ(t.gpus[0].ecc_uncorrected, 0);
  EXPECT_NEAR(t.gpus[0].utilization_pct, 30.0,
              1e-9);  // the window's two halves, from samples 2 and 3
  EXPECT_THAT(FormatReport(sum), ::testing::HasSubstr("sw_power_cap"));
}

TEST(TelemetryTest, ShortStepsTakeTheRateOfTheSampleThatFollowsThem) {
  // Ten 1 ms steps between two samples 10 ms apart: the CPU use they saw is
  // the second sample's (measured over those 10 ms), not the first's.
  auto clock = std::make_shared<ManualClock>();
  internal::Backends b;
  b.telemetry = std::make_unique<ScriptedTelemetry>(
      std::deque<internal::TelemetrySample>{GpuAt(100, 0, 2000, 90), GpuAt(40, 0, 2000, 20)});
  std::unique_ptr<Session> s = internal::SessionTestPeer::Create(
      Options{.clock = clock, .flush_interval_ms = 10000, .telemetry_interval_ms = 10},
      std::move(b));
  const auto worker_pass = [&] { internal::SessionTestPeer::Impl(*s).Pump(); };
  worker_pass();
  for (int i = 0; i < 10; ++i) {
    StepScope step(*s);
    clock->Advance(kMs);
    s->Flush();  // each step completes before the next sample
  }
  worker_pass();
  const Summary sum = s->Summarize();
  ASSERT_TRUE(sum.telemetry.has_value());
  EXPECT_EQ(sum.telemetry->steps, 10);
  EXPECT_NEAR(*sum.telemetry->host_cpu_pct, 20.0, 1e-4);
  EXPECT_NEAR(*sum.telemetry->gpu_utilization_pct, 40.0, 1e-4);
}

TEST(TelemetryTest, NoTelemetryWhenTurnedOff) {
  auto clock = std::make_shared<ManualClock>();
  internal::Backends b;
  b.telemetry =
      std::make_unique<ScriptedTelemetry>(std::deque<internal::TelemetrySample>{GpuAt(1, 0, 1, 1)});
  std::unique_ptr<Session> s = internal::SessionTestPeer::Create(
      Options{.clock = clock, .telemetry_interval_ms = 0}, std::move(b));
  {
    StepScope step(*s);
    clock->Advance(kMs);
  }
  EXPECT_FALSE(s->Summarize().telemetry.has_value());
  EXPECT_FALSE(Session(Options{.telemetry_interval_ms = -1}).status().ok());
}

// A fake /proc with processes.
class FakeProc : public testing::TempTree {
 public:
  // A process's stat line: its parent, CPU ticks and command name.
  void Process(int pid, int ppid, long utime, long stime,
               const std::string& name = "python3") const {
    Write(std::to_string(pid) + "/stat", std::to_string(pid) + " (" + name + ") S " +
                                             std::to_string(ppid) + " 1 1 0 -1 0 0 0 0 0 " +
                                             std::to_string(utime) + " " + std::to_string(stime) +
                                             " 0 0 20 0 1 0\n");
  }
};

TEST(TelemetryTest, OnlyTheGpusThisProcessUsesAreSampled) {
  fake_cuda_reset();  // CUDA not initialized, whatever ran before
  // An 4-GPU node; this process runs on CUDA device 2 (bus 0x47 here), NVML's
  // index 1: the other three (idle, or another job's) must not count.
  FakeGpu gpus[4];
  const char* bus[4] = {"00000000:17:00.0", "00000000:47:00.0", "00000000:27:00.0",
                        "00000000:37:00.0"};
  for (int i = 0; i < 4; ++i) std::snprintf(gpus[i].bus_id, sizeof(gpus[i].bus_id), "%s", bus[i]);
  gpus[0].util_gpu = 0;
  gpus[1].util_gpu = 88;
  gpus[2].clocks_event_reasons =
      static_cast<int64_t>(internal::kHwSlowdown);  // someone else's trouble
  fake_nvml_set_gpus(gpus, 4);
  FakeProc proc;
  proc.Write("stat", "cpu 1 0 0 1 0 0 0 0\n");
  std::unique_ptr<internal::Telemetry> t =
      internal::MakeSystemTelemetry(proc.root(), proc.root() + "/cgroup");
  ASSERT_TRUE(t->Start().ok());
  internal::TelemetrySample s;
  t->Sample(0, &s);  // CUDA not initialized yet: no GPU is the job's
  EXPECT_EQ(s.gpu_count, 0);
  EXPECT_THAT(t->description(), ::testing::HasSubstr("no GPU sampled: CUDA is not initialized"));
  fake_cuda_set_bus_id(2, "0000:47:00.0");
  fake_cuda_set_device(2);
  for (int i = 1; i <= 10; ++i)
    t->Sample(i * 100 * kMs, &s);  // looked up again about once a second
  ASSERT_EQ(s.gpu_count, 1);
  EXPECT_EQ(s.gpus[0].index, 1);
  EXPECT_DOUBLE_EQ(s.gpus[0].utilization_pct, 88);
  EXPECT_EQ(s.gpus[0].clocks_event_reasons, 0u);
  EXPECT_EQ(t->description(), "NVML (GPU 1 of 4: the one this process uses), /proc");
}

TEST(TelemetryTest, SystemSamplerReadsNvmlProcAndLiveWorkers) {
  internal::ResetProcessRolesForTest();
  FakeGpu gpu;
  gpu.clocks_event_reasons = static_cast<int64_t>(internal::kSwThermalSlowdown);
  fake_nvml_set_gpus(&gpu, 1);
  FakeProc proc;
  const long hz = sysconf(_SC_CLK_TCK);
  const int me = static_cast<int>(getpid());
  proc.Write("stat", "cpu 100 0 0 800 100 0 0 0\n");
  proc.Write("meminfo", "MemTotal: 1000 kB\nMemAvailable: 500 kB\n");
  proc.Write("loadavg", "3.25 1 1 1/1 1\n");
  proc.Write("pressure/memory", "some avg10=4.50 avg60=0 avg300=0 total=1\n");
  proc.Process(4242, me, 0, 0);  // a DataLoader worker
  proc.Process(4343, 1, 0, 0);   // someone else's process
  proc.Write("self/stat", "1 (self) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0\n");
  fake_cuda_set_device(0);  // the job's GPU: CUDA device 0, the one NVML lists
  std::unique_ptr<internal::Telemetry> t =
      internal::MakeSystemTelemetry(proc.root(), proc.root() + "/cgroup");
  ASSERT_TRUE(t->Start().ok());
  internal::TelemetrySample a, b;
  t->Sample(0, &a);
  EXPECT_EQ(t->description(), "NVML (GPU 0 of 1: the one this process uses), /proc");
  EXPECT_TRUE(std::isnan(a.host_cpu_pct));  // rates need two samples
  EXPECT_EQ(a.gpu_count, 1);
  EXPECT_DOUBLE_EQ(a.gpus[0].utilization_pct, 97);
  EXPECT_EQ(a.gpus[0].clocks_event_reasons, internal::kSwThermalSlowdown);
  EXPECT_DOUBLE_EQ(a.gpus[0].mem_clock_max_mhz, 2619);
  EXPECT_EQ(a.gpus[0].pcie_width_max, 16);
  EXPECT_EQ(a.gpus[0].ecc_uncorrected, 0);
  EXPECT_EQ(a.gpus[0].persistence_mode, 1);
  EXPECT_EQ(a.gpus[0].mig_mode, 0);
  // One second later: the CPUs 50 % busy, 10 % iowait; the worker used 2
  // CPU-seconds, the stranger 5 (not ours).
  proc.Write("stat", "cpu 600 0 0 1200 200 0 0 0\n");  // +1000 ticks: 500 busy, 100 iowait
  proc.Process(4242, me, 2 * hz, 0);
  proc.Process(4343, 1, 5 * hz, 0);
  t->Sample(1'000'000'000, &b);
  EXPECT_NEAR(b.host_cpu_pct, 50.0, 1e-9);
  EXPECT_NEAR(b.host_iowait_pct, 10.0, 1e-9);
  EXPECT_NEAR(b.child_cores, 2.0, 1e-9);  // no loader named its workers: a child
  EXPECT_TRUE(std::isnan(b.worker_cores));
  EXPECT_DOUBLE_EQ(b.memory_available_bytes, 500.0 * 1024);
  EXPECT_DOUBLE_EQ(b.load1, 3.25);
  // Where the kernel lists children (/proc/<pid>/task/*/children), only
  // those are read: a child the list names is counted, a stranger is not.
  proc.Write(std::to_string(me) + "/task/" + std::to_string(me) + "/children", "4242 ");
  proc.Process(4242, me, 4 * hz, 0);
  proc.Process(4343, me, 100 * hz, 0);  // not listed: ignored
  internal::TelemetrySample c;
  t->Sample(2'000'000'000, &c);
  EXPECT_NEAR(c.child_cores, 2.0, 1e-9);
  EXPECT_DOUBLE_EQ(b.memory_pressure_pct, 4.5);
  // In a container whose memory limit leaves less than the host has free.
  proc.Write("self/cgroup", "0::/pod\n");
  proc.Write("cgroup/pod/memory.max", "409600\n");      // 400 kB
  proc.Write("cgroup/pod/memory.current", "307200\n");  // 300 kB
  t->Sample(3'000'000'000, &c);
  EXPECT_DOUBLE_EQ(c.memory_available_bytes, 100.0 * 1024);
}

TEST(TelemetryTest, AContainersCpuThrottlingIsTheShareOfItsLimitsPeriods) {
  fake_nvml_set_gpus(nullptr, 0);
  FakeProc proc;
  proc.Write("stat", "cpu 100 0 0 800 100 0 0 0\n");
  proc.Write("self/cgroup", "0::/pod\n");
  proc.Write("cgroup/pod/cpu.max", "200000 100000\n");  // 2 CPUs
  proc.Write("cgroup/pod/cpu.stat", "usage_usec 1\nnr_periods 100\nnr_throttled 5\n");
  std::unique_ptr<internal::Telemetry> t =
      internal::MakeSystemTelemetry(proc.root(), proc.root() + "/cgroup");
  ASSERT_TRUE(t->Start().ok());
  internal::TelemetrySample s;
  t->Sample(0, &s);
  EXPECT_TRUE(std::isnan(s.cpu_throttled_pct));  // a rate: two samples
  EXPECT_LE(s.cpus_available, 2.0);
  // A second: 10 periods, throttled in 6 of them.
  proc.Write("cgroup/pod/cpu.stat", "usage_usec 2\nnr_periods 110\nnr_throttled 11\n");
  t->Sample(1'000'000'000, &s);
  EXPECT_NEAR(s.cpu_throttled_pct, 60.0, 1e-9);
  // The limit lifted: no period counted, nothing to say.
  t->Sample(2'000'000'000, &s);
  EXPECT_TRUE(std::isnan(s.cpu_throttled_pct));
}

TEST(TelemetryTest, WorkersForkedBetweenRefreshesCountFromTheNextSample) {
  internal::ResetProcessRolesForTest();
  FakeGpu gpu;
  fake_nvml_set_gpus(&gpu, 1);
  FakeProc proc;
  const long hz = sysconf(_SC_CLK_TCK);
  const std::string me = std::to_string(getpid());
  proc.Write("stat", "cpu 100 0 0 800 100 0 0 0\n");
  proc.Write(me + "/task/" + me + "/children", "");  // none yet
  std::unique_ptr<internal::Telemetry> t =
      internal::MakeSystemTelemetry(proc.root(), proc.root() + "/cgroup");
  ASSERT_TRUE(t->Start().ok());
  internal::TelemetrySample s;
  t->Sample(0, &s);  // looks for children: none
  // A DataLoader worker starts; the next samples come before the next look
  // around (once a second), yet the main thread's list is read every time.
  proc.Write(me + "/task/" + me + "/children", "4242 ");
  proc.Process(4242, static_cast<int>(getpid()), 0, 0);
  t->Sample(100 * kMs, &s);
  proc.Process(4242, static_cast<int>(getpid()), hz / 10, 0);  // 0.1 s of CPU in 0.1 s
  t->Sample(200 * kMs, &s);
  EXPECT_NEAR(s.child_cores, 1.0, 1e-9);
  proc.Process(4242, static_cast<int>(getpid()), hz / 10 + hz / 20, 0);
  t->Sample(300 * kMs, &s);
  EXPECT_NEAR(s.child_cores, 0.5, 1e-9);
}

// The process tree of a DataLoader under the forkserver start method
// (Python 3.14's default on Linux): the workers are the forkserver's
// children, the training process's grandchildren. Beside it, two unrelated
// CPU-burning subprocesses. Only the named workers are the loader's.
class LoaderTree {
 public:
  static constexpr int kForkserver = 5000, kWorker1 = 5001, kWorker2 = 5002;
  static constexpr int kBurner1 = 6001, kBurner2 = 6002, kStranger = 7000;

  explicit LoaderTree(bool children_files) : me_(static_cast<int>(getpid())) {
    internal::ResetProcessRolesForTest();
    proc_.Write("stat", "cpu 100 0 0 800 100 0 0 0\n");
    if (children_files) {
      const std::string m = std::to_string(me_);
      proc_.Write(m + "/task/" + m + "/children", "5000 6001 6002 ");
      proc_.Write("5000/task/5000/children", "5001 5002 ");
      for (int pid : {kWorker1, kWorker2, kBurner1, kBurner2})
        proc_.Write(std::to_string(pid) + "/task/" + std::to_string(pid) + "/children", "");
    }
    At(0);
  }

  // CPU use so far after `seconds`: each worker and burner one core, the
  // forkserver 0.1, a stranger (someone else's process) four. `worker_name`:
  // the workers' command name.
  void At(int seconds, const std::string& worker_name = "python3") const {
    const long hz = sysconf(_SC_CLK_TCK);
    proc_.Process(kForkserver, me_, seconds * hz / 10, 0);
    proc_.Process(kWorker1, kForkserver, seconds * hz, 0, worker_name);
    proc_.Process(kWorker2, kForkserver, seconds * hz, 0, worker_name);
    proc_.Process(kBurner1, me_, seconds * hz, 0);
    proc_.Process(kBurner2, me_, seconds * hz, 0);
    proc_.Process(kStranger, 1, 4 * seconds * hz, 0);
  }

  std::unique_ptr<internal::Telemetry> Start() const {
    std::unique_ptr<internal::Telemetry> t =
        internal::MakeSystemTelemetry(proc_.root(), proc_.root() + "/cgroup");
    EXPECT_TRUE(t->Start().ok());
    return t;
  }

  const FakeProc& proc() const { return proc_; }
  int me() const { return me_; }

 private:
  FakeProc proc_;
  int me_;
};

TEST(TelemetryTest, ForkserverWorkersAreTheLoadersAndOtherChildrenAreApart) {
  fake_nvml_set_gpus(nullptr, 0);
  for (const bool children_files : {true, false}) {  // found by the kernel's lists, or by ppid
    SCOPED_TRACE(children_files ? "children files" : "scan by parent pid");
    LoaderTree tree(children_files);
    internal::AddLoaderWorkers({LoaderTree::kWorker1, LoaderTree::kWorker2});
    std::unique_ptr<internal::Telemetry> t = tree.Start();
    internal::TelemetrySample s;
    t->Sample(0, &s);
    tree.At(1);
    t->Sample(1'000'000'000, &s);
    EXPECT_NEAR(s.worker_cores, 2.0, 1e-9);  // the grandchildren, not 0
    EXPECT_NEAR(s.child_cores, 2.1, 1e-9);   // the burners and the forkserver, not the stranger
  }
}

// torch names its DataLoader workers "pt_data_worker" as they start: they
// are the loader's without being named to gpuscope.
TEST(TelemetryTest, WorkersTorchNamedAreTheLoadersUnasked) {
  fake_nvml_set_gpus(nullptr, 0);
  LoaderTree tree(/*children_files=*/true);
  tree.At(0, "pt_data_worker");
  std::unique_ptr<internal::Telemetry> t = tree.Start();
  internal::TelemetrySample s;
  t->Sample(0, &s);
  tree.At(1, "pt_data_worker");
  t->Sample(1'000'000'000, &s);
  EXPECT_NEAR(s.worker_cores, 2.0, 1e-9);
  EXPECT_NEAR(s.child_cores, 2.1, 1e-9);
}

TEST(TelemetryTest, ALoaderWithoutWorkersLeavesEveryChildApart) {
  fake_nvml_set_gpus(nullptr, 0);
  LoaderTree tree(/*children_files=*/true);
  std::unique_ptr<internal::Telemetry> t = tree.Start();
  internal::TelemetrySample s;
  t->Sample(0, &s);
  tree.At(1);
  t->Sample(1'000'000'000, &s);
  // No loader named its workers yet: every descendant's role is unknown.
  EXPECT_TRUE(std::isnan(s.worker_cores));
  EXPECT_NEAR(s.child_cores, 4.1, 1e-9);
  // num_workers=0: the loader runs in the process, none of the children is it.
  internal::AddLoaderWorkers({});
  tree.At(2);
  t->Sample(2'000'000'000, &s);
  EXPECT_DOUBLE_EQ(s.worker_cores, 0.0);
  EXPECT_NEAR(s.child_cores, 4.1, 1e-9);
}

TEST(TelemetryTest, RunQueueWaitOfTheTrainingThreadAndTheWorkersAndHostCpuPressure) {
  fake_nvml_set_gpus(nullptr, 0);
  LoaderTree tree(/*children_files=*/true);
  internal::AddLoaderWorkers({LoaderTree::kWorker1, LoaderTree::kWorker2});
  const std::string me = std::to_string(tree.me());
  const int tid = tree.me() + 7;  // the recording thread, not the main thread
  internal::SetTrainingThread(tid);
  const std::string train = me + "/task/" + std::to_string(tid) + "/schedstat";
  const FakeProc& proc = tree.proc();
  proc.Write(train, "1000 2000000000 10\n");
  proc.Write(me + "/task/" + me + "/schedstat", "1000 0 1\n");  // the main thread: idle
  proc.Write("5001/schedstat", "1000 100000000 10\n");
  proc.Write("5002/schedstat", "1000 0 10\n");
  proc.Write("pressure/cpu", "some avg10=42.50 avg60=1.00 avg300=0.00 total=1\n");
  std::unique_ptr<internal::Telemetry> t = tree.Start();
  internal::TelemetrySample s;
  t->Sample(0, &s);
  EXPECT_TRUE(std::isnan(s.cpu_wait_share));  // a rate: two samples
  EXPECT_DOUBLE_EQ(s.cpu_pressure_pct, 42.5);
  // One second later: the training thread waited 0.3 s, the workers 0.5 s
  // together; the hypervisor took 50 of 1000 ticks.
  tree.At(1);
  proc.Write(train, "1000 2300000000 20\n");
  proc.Write("5001/schedstat", "1000 400000000 20\n");
  proc.Write("5002/schedstat", "1000 200000000 20\n");
  proc.Write("stat", "cpu 600 0 0 1250 100 0 0 50\n");
  t->Sample(1'000'000'000, &s);
  EXPECT_NEAR(s.cpu_wait_share, 0.3, 1e-9);
  EXPECT_NEAR(s.worker_cpu_wait_cores, 0.5, 1e-9);
  EXPECT_NEAR(s.steal_pct, 5.0, 1e-9);
  // Another thread takes over recording: it starts afresh (no rate yet).
  internal::SetTrainingThread(tree.me());
  t->Sample(2'000'000'000, &s);
  EXPECT_TRUE(std::isnan(s.cpu_wait_share));
  internal::ResetProcessRolesForTest();
}

TEST(TelemetryTest, SlowChangingGpuStateIsReadEveryTenthSampleAndCarriedBetween) {
  FakeGpu gpu;
  fake_nvml_set_gpus(&gpu, 1);
  fake_cuda_set_device(0);
  FakeProc proc;
  proc.Write("stat", "cpu 1 0 0 1 0 0 0 0\n");
  std::unique_ptr<internal::Telemetry> t =
      internal::MakeSystemTelemetry(proc.root(), proc.root() + "/cgroup");
  ASSERT_TRUE(t->Start().ok());
  internal::TelemetrySample s;
  t->Sample(0, &s);  // the first sample reads everything
  ASSERT_EQ(s.gpu_count, 1);
  EXPECT_DOUBLE_EQ(s.gpus[0].sm_clock_max_mhz, 1980);
  EXPECT_EQ(s.gpus[0].persistence_mode, 1);
  gpu.util_gpu = 50;        // changes sample to sample
  gpu.sm_clock = 1200;      // too
  gpu.sm_clock_max = 1500;  // slow-changing: taken in at the next full read
  gpu.persistence = 0;      // too
  gpu.ecc_uncorrected = 2;  // too
  fake_nvml_set_gpus(&gpu, 1);
  t->Sample(100 * kMs, &s);
  EXPECT_DOUBLE_EQ(s.gpus[0].utilization_pct, 50);
  EXPECT_DOUBLE_EQ(s.gpus[0].sm_clock_mhz, 1200);
  EXPECT_DOUBLE_EQ(s.gpus[0].sm_clock_max_mhz, 1980);  // carried over
  EXPECT_EQ(s.gpus[0].persistence_mode, 1);
  EXPECT_EQ(s.gpus[0].ecc_uncorrected, 0);
  EXPECT_EQ(s.gpus[0].pcie_width_max, 16);
  EXPECT_DOUBLE_EQ(s.gpus[0].power_limit_w, 700);
  for (int i = 2; i <= 10; ++i) t->Sample(i * 100 * kMs, &s);  // the 11th sample: a full read
  EXPECT_DOUBLE_EQ(s.gpus[0].sm_clock_max_mhz, 1500);
  EXPECT_EQ(s.gpus[0].persistence_mode, 0);
  EXPECT_EQ(s.gpus[0].ecc_uncorrected, 2);
  EXPECT_DOUBLE_EQ(s.gpus[0].utilization_pct, 50);
}

TEST(TelemetryTest, ThisProcesssGpuMemoryFromNvmlReachesTheSummary) {
  // The GPU this process uses runs another job's process too (listed
  // first); NVML's entry for this one says 6 GiB, while its allocator holds
  // 5 GiB (the rest: the CUDA context, other libraries).
  FakeGpu gpu;
  gpu.process_pids[0] = getpid() + 1;
  gpu.process_used[0] = 9LL << 30;
  gpu.process_pids[1] = getpid();
  gpu.process_used[1] = 6LL << 30;
  gpu.process_count = 2;
  fake_nvml_set_gpus(&gpu, 1);
  fake_cuda_set_bus_id(0, "0000:17:00.0");
  fake_cuda_set_device(0);
  FakeProc proc;
  proc.Write("stat", "cpu 1 0 0 1 0 0 0 0\n");
  auto clock = std::make_shared<ManualClock>();
  internal::Backends b;
  b.telemetry = internal::MakeSystemTelemetry(proc.root(), proc.root() + "/cgroup");
  b.memory = std::make_shared<internal::MemoryInbox>();
  std::unique_ptr<Session> s = internal::SessionTestPeer::Create(
      Options{.clock = clock, .flush_interval_ms = 10000, .telemetry_interval_ms = 10},
      std::move(b));
  const auto worker_pass = [&] { internal::SessionTestPeer::Impl(*s).Pump(); };
  worker_pass();  // a full NVML read
  for (int i = 0; i < 2; ++i) {
    StepScope step(*s);
    clock->Advance(5 * kMs);
    s->RecordMemory(AllocatorStats{.device = 0,
                                   .allocated_bytes = 4.0 * (1 << 30),
                                   .reserved_bytes = 5.0 * (1 << 30),
                                   .peak_allocated_bytes = 4.0 * (1 << 30),
                                   .peak_reserved_bytes = 5.0 * (1 << 30)});
    clock->Advance(5 * kMs);
    worker_pass();  // a sampler's read of what changes
  }
  clock->Advance(5 * kMs);
  worker_pass();
  const Summary sum = s->Summarize();
  ASSERT_TRUE(sum.telemetry.has_value());
  ASSERT_EQ(sum.telemetry->gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(sum.telemetry->gpus[0].process_memory_bytes, 6.0 * (1 << 30));
  ASSERT_TRUE(sum.memory.has_value());
  ASSERT_EQ(sum.memory->gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(sum.memory->gpus[0].process_used_bytes, 6.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(sum.memory->gpus[0].peak_reserved_bytes, 5.0 * (1 << 30));
}

TEST(TelemetryTest, WithoutNvmlTheHostIsStillSampledAndItSaysWhy) {
  setenv("GPUSCOPE_LIBNVML", "/nonexistent/libnvidia-ml.so.1", 1);
  FakeProc proc;
  proc.Write("stat", "cpu 1 0 0 1 0 0 0 0\n");
  std::unique_ptr<internal::Telemetry> t =
      internal::MakeSystemTelemetry(proc.root(), proc.root() + "/cgroup");
  const absl::Status started = t->Start();
  setenv("GPUSCOPE_LIBNVML", FAKE_LIBNVML_PATH, 1);
  ASSERT_TRUE(started.ok());
  EXPECT_THAT(t->description(), ::testing::HasSubstr("/proc (no GPU telemetry: "));
  internal::TelemetrySample s;
  t->Sample(0, &s);
  EXPECT_EQ(s.gpu_count, 0);
}

}  // namespace
}  // namespace gpuscope

int main(int argc, char** argv) {
  setenv("GPUSCOPE_LIBNVML", FAKE_LIBNVML_PATH, 1);
  setenv("GPUSCOPE_LIBCUDA", FAKE_LIBCUDA_PATH, 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
