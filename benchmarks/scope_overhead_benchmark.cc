// The hot path's budget (scopes.h): a phase scope costs about two clock reads
// plus an NVTX push/pop and a record append; a disabled one, a branch. The
// clock is the TSC where it is trustworthy (backends/tsc.h); run with
// GPUSCOPE_CLOCK=monotonic to measure the CLOCK_MONOTONIC path.
//
// The queue is drained outside the timed region every kDrainEvery
// iterations, and the background worker is kept idle (long flush interval),
// so these numbers are the recording thread's own cost. Each benchmark
// reports `dropped`: it must be 0, or the numbers measure the drop path.

#include <cstdint>

#include "backends/clock.h"
#include "backends/tsc.h"
#include "benchmark/benchmark.h"
#include "gpuscope/gpuscope.h"

#if GPUSCOPE_HAVE_NVTX
#include "nvtx3/nvToolsExt.h"
#endif

namespace gpuscope {
namespace {

constexpr int64_t kDrainEvery = 1 << 15;
constexpr int kPhasesPerStep = 64;

Options BenchOptions() {
  return Options{.window = 512, .queue_capacity = 1 << 17, .flush_interval_ms = 10000};
}

void Finish(benchmark::State& state, Session& session) {
  const Summary s = session.Summarize();
  state.counters["dropped"] = static_cast<double>(s.misuse.dropped_records);
  state.counters["misuse"] = static_cast<double>(s.misuse.total() - s.misuse.dropped_records);
  if (s.misuse.total() != 0) state.SkipWithError("records were dropped or misused: numbers invalid");
}

void BM_ClockNow(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(MonotonicNowNs());
}
BENCHMARK(BM_ClockNow);

void BM_TscNow(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(internal::ReadTsc());
}
BENCHMARK(BM_TscNow);

void BM_NvtxRangeNoTool(benchmark::State& state) {
#if GPUSCOPE_HAVE_NVTX
  nvtxDomainHandle_t domain = nvtxDomainCreateA("gpuscope-bench");
  nvtxStringHandle_t name = nvtxDomainRegisterStringA(domain, "forward");
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attr.message.registered = name;
  for (auto _ : state) {
    nvtxDomainRangePushEx(domain, &attr);
    nvtxDomainRangePop(domain);
  }
#else
  state.SkipWithError("built with GPUSCOPE_WITH_NVTX=OFF");
  for (auto _ : state) {
  }
#endif
}
BENCHMARK(BM_NvtxRangeNoTool);

// One phase scope, begin and end, inside a step (a new step every 64
// phases); `phase` is a Phase or a name.
template <typename P>
void PhaseScopeLoop(benchmark::State& state, P phase) {
  Session session(BenchOptions());
  ScopeToken step = session.BeginStep();
  int64_t n = 0;
  for (auto _ : state) {
    { PhaseScope p(session, phase); }
    if (++n % kPhasesPerStep == 0) {
      session.End(step);
      step = session.BeginStep();
    }
    if (n % kDrainEvery == 0) {
      state.PauseTiming();
      session.Flush();
      state.ResumeTiming();
    }
  }
  session.End(step);
  Finish(state, session);
}

void BM_PhaseScope(benchmark::State& state) { PhaseScopeLoop(state, Phase::kForward); }
BENCHMARK(BM_PhaseScope);

// The same with the phase given by name: a lock-free lookup per scope.
void BM_PhaseScopeByName(benchmark::State& state) { PhaseScopeLoop(state, "attention"); }
BENCHMARK(BM_PhaseScopeByName);

// One step scope, begin and end, with nothing inside.
void BM_StepScope(benchmark::State& state) {
  Session session(BenchOptions());
  int64_t n = 0;
  for (auto _ : state) {
    { StepScope s(session, {.samples = 32}); }
    if (++n % kDrainEvery == 0) {
      state.PauseTiming();
      session.Flush();
      state.ResumeTiming();
    }
  }
  Finish(state, session);
}
BENCHMARK(BM_StepScope);

void BM_PhaseScopeDisabled(benchmark::State& state) {
  Session session(Options{.enabled = false});
  for (auto _ : state) {
    PhaseScope p(session, Phase::kForward);
    benchmark::DoNotOptimize(&p);
  }
}
BENCHMARK(BM_PhaseScopeDisabled);

}  // namespace
}  // namespace gpuscope

BENCHMARK_MAIN();
