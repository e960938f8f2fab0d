// What one telemetry sample costs the background worker, on this machine's
// real /proc and /sys/fs/cgroup (NVML where it loads): the whole sample, and
// the host parts on their own. Run it under `strace -c -f` to count the
// system calls a sample makes.
//
// The process is dressed as a training job: Arg(0) extra threads (a
// PyTorch process has an intra-op pool, pin-memory and CUDA threads) and
// Arg(1) child processes (DataLoader workers), idle.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/host/host_stats.h"
#include "backends/telemetry.h"
#include "backends/telemetry/system_telemetry.h"
#include "benchmark/benchmark.h"

namespace gpuscope {
namespace {

// Idle threads and child processes for as long as it lives.
class JobShape {
 public:
  JobShape(int threads, int children) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this] {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return done_; });
      });
    }
    for (int i = 0; i < children; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        pause();
        _exit(0);
      }
      if (pid > 0) children_.push_back(pid);
    }
  }
  ~JobShape() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    for (pid_t pid : children_) kill(pid, SIGKILL);
    for (pid_t pid : children_) waitpid(pid, nullptr, 0);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<std::thread> threads_;
  std::vector<pid_t> children_;
};

// One sample as the worker takes it, at 10 Hz of simulated time.
void BM_SystemTelemetrySample(benchmark::State& state) {
  JobShape job(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  std::unique_ptr<internal::Telemetry> t = internal::MakeSystemTelemetry();
  if (!t->Start().ok()) {
    state.SkipWithError("no telemetry on this machine");
    return;
  }
  internal::TelemetrySample s;
  int64_t now = 0;
  for (auto _ : state) {
    now += 100'000'000;
    t->Sample(now, &s);
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(BM_SystemTelemetrySample)
    ->Args({0, 0})
    ->Args({32, 4})
    ->Args({64, 16})
    ->Unit(benchmark::kMicrosecond);

// The host snapshot alone (/proc/stat, /proc/self/stat, meminfo, loadavg,
// PSI, vmstat), as the doctor reads it: every file opened afresh.
void BM_ReadHost(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(internal::ReadHost());
}
BENCHMARK(BM_ReadHost)->Unit(benchmark::kMicrosecond);

// The container's memory limit along the process's cgroups, opened afresh.
void BM_ReadContainerMemory(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(internal::ReadContainerMemory());
}
BENCHMARK(BM_ReadContainerMemory)->Unit(benchmark::kMicrosecond);

// A container CPU limit's throttling counters as the sampler reads them:
// its files kept open, the process's cgroups looked up again every tenth
// read (a refresh, once a second at 10 Hz).
void BM_ReadContainerCpu(benchmark::State& state) {
  internal::ContainerCpuReader reader;
  bool rebuilt = false;
  int64_t reads = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(reader.Read(/*look_again=*/++reads % 10 == 0, &rebuilt));
  }
}
BENCHMARK(BM_ReadContainerCpu)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpuscope

BENCHMARK_MAIN();
