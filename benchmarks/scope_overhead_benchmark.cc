// The hot path's budget (scopes.h): a phase scope, begin and end, costs at
// most two clock reads plus 15 ns, and so does a step scope. The clock is the
// TSC where it is trustworthy (backends/host/tsc.h); run with
// GPUSCOPE_CLOCK=monotonic to measure the CLOCK_MONOTONIC path.
// BM_ClockRead/tsc and BM_ClockRead/monotonic measure one read of each clock
// as the hot path reads it, in the same run: the budget is
// 2 x BM_ClockRead + 15 ns of the clock the scopes read.
//
// Most rows drain the queue outside the timed region every kDrainEvery
// iterations, and keep the background worker idle (long flush interval), so
// they measure the recording thread's own cost. The *WorkerDraining rows run
// a session with default options: the background worker drains the queue
// while the scopes record, as in a training loop. Each benchmark reports
// `dropped`: it must be 0, or the numbers measure the drop path.
//
// Unless the command line says otherwise, every benchmark runs 9 times,
// interleaved at random, and reports the median (and mean, stddev, cv) of
// the repetitions: a shared VM's noise then hits every benchmark alike.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "backends/host/clock.h"
#include "backends/host/tsc.h"
#include "backends/sim/simulated_device.h"
#include "benchmark/benchmark.h"
#include "gpuscope/gpuscope.h"
#include "gpuscope/testing.h"
#include "session/session_impl.h"

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
  // Which clock the scopes read: 1 the TSC, 0 CLOCK_MONOTONIC.
  state.counters["tsc"] = internal::TscClock::Get() != nullptr ? 1 : 0;
  const Summary s = session.Summarize();
  state.counters["dropped"] = static_cast<double>(s.misuse.dropped_records);
  state.counters["misuse"] = static_cast<double>(s.misuse.total() - s.misuse.dropped_records);
  if (s.misuse.total() != 0)
    state.SkipWithError("records were dropped or misused: numbers invalid");
}

// One clock read as the hot path makes it (SessionImpl::Now()): `rdtsc`, or
// clock_gettime(CLOCK_MONOTONIC) through the vDSO. Inline, as there.
enum class HostClock { kTsc, kMonotonic };
void BM_ClockRead(benchmark::State& state, HostClock clock) {
  if (clock == HostClock::kTsc) {
    for (auto _ : state) benchmark::DoNotOptimize(internal::ReadTsc());
  } else {
    for (auto _ : state) benchmark::DoNotOptimize(internal::ReadMonotonicNs());
  }
}
BENCHMARK_CAPTURE(BM_ClockRead, tsc, HostClock::kTsc);
BENCHMARK_CAPTURE(BM_ClockRead, monotonic, HostClock::kMonotonic);

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
    {
      PhaseScope p(session, phase);
    }
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
    {
      StepScope s(session, {.samples = 32});
    }
    if (++n % kDrainEvery == 0) {
      state.PauseTiming();
      session.Flush();
      state.ResumeTiming();
    }
  }
  Finish(state, session);
}
BENCHMARK(BM_StepScope);

// What each iteration of a Python `for batch in s.steps(loader)` asks of
// the session: a step, and inside it the `data` phase around next().
void BM_StepWithDataPhase(benchmark::State& state) {
  Session session(BenchOptions());
  int64_t n = 0;
  for (auto _ : state) {
    {
      StepScope s(session);
      PhaseScope p(session, Phase::kData);
    }
    if (++n % kDrainEvery == 0) {
      state.PauseTiming();
      session.Flush();
      state.ResumeTiming();
    }
  }
  Finish(state, session);
}
BENCHMARK(BM_StepWithDataPhase);

// Session::RecordMemory(): what a C++ trainer's allocator hook (or the
// Python sampler thread, through the bindings) pays per sample: the
// session clock, a lock and a copy. Not the recording thread's cost: it is
// made from a thread of the caller's, and scopes never take the lock.
void BM_RecordMemory(benchmark::State& state) {
  Session session(Options{.window = 512});
  AllocatorStats stats{.allocated_bytes = 2e9, .reserved_bytes = 3e9, .total_bytes = 80e9};
  for (auto _ : state) {
    stats.allocated_bytes += 1;
    session.RecordMemory(stats, "benchmark");
  }
}
BENCHMARK(BM_RecordMemory);

// A phase scope on the events source (the simulated device: two markers per
// scope). Compare with BM_PhaseScope plus two BM_SimulatedMarkerRecord.
void BM_PhaseScopeWithEvents(benchmark::State& state) {
  constexpr uint32_t kMarkers = 1 << 16;
  auto gpu = std::make_shared<SimulatedDevice>(
      SimulatedDevice::Config{.initial_markers = kMarkers, .max_markers = kMarkers});
  Options options = BenchOptions();
  options.simulated_device = gpu;
  options.stream = 0;  // the stream markers go on
  Session session(options);
  ScopeToken step = session.BeginStep();
  int64_t n = 0;
  const int64_t recorded_before = gpu->markers_recorded();
  for (auto _ : state) {
    {
      PhaseScope p(session, Phase::kForward);
    }
    if (++n % kPhasesPerStep == 0) {
      session.End(step);
      step = session.BeginStep();
    }
    if (n % (kMarkers / 4) == 0) {  // markers complete at once here: draining returns them
      state.PauseTiming();
      session.Flush();
      state.ResumeTiming();
    }
  }
  session.End(step);
  const double markers = static_cast<double>(gpu->markers_recorded() - recorded_before);
  state.counters["markers_per_scope"] = markers / static_cast<double>(std::max<int64_t>(n, 1));
  if (markers < 1.9 * static_cast<double>(n)) state.SkipWithError("scopes went without markers");
  Finish(state, session);
}
BENCHMARK(BM_PhaseScopeWithEvents);

// As BM_PhaseScopeWithEvents, the phase naming its own stream (a copy
// stream): the same two markers, on a second lane.
void BM_PhaseScopeOnNamedStream(benchmark::State& state) {
  constexpr uint32_t kMarkers = 1 << 16;
  auto gpu = std::make_shared<SimulatedDevice>(
      SimulatedDevice::Config{.initial_markers = kMarkers, .max_markers = kMarkers});
  Options options = BenchOptions();
  options.simulated_device = gpu;
  options.stream = 0;
  Session session(options);
  ScopeToken step = session.BeginStep();
  int64_t n = 0;
  const int64_t recorded_before = gpu->markers_recorded();
  for (auto _ : state) {
    {
      PhaseScope p(session, Phase::kH2D, Stream(1));
    }
    if (++n % kPhasesPerStep == 0) {
      session.End(step);
      step = session.BeginStep();
    }
    if (n % (kMarkers / 4) == 0) {
      state.PauseTiming();
      session.Flush();
      state.ResumeTiming();
    }
  }
  session.End(step);
  const double markers = static_cast<double>(gpu->markers_recorded() - recorded_before);
  if (markers < 1.9 * static_cast<double>(n)) state.SkipWithError("scopes went without markers");
  Finish(state, session);
}
BENCHMARK(BM_PhaseScopeOnNamedStream);

// The simulated device's marker record alone (what a cuEventRecord is to a
// real GPU): batches of 256 records, then their releases untimed; the time
// reported is per record.
void BM_SimulatedMarkerRecord(benchmark::State& state) {
  constexpr int kBatch = 256;
  auto gpu = std::make_shared<SimulatedDevice>();
  std::unique_ptr<internal::DeviceTimer> timer = internal::MakeSimulatedTimer(gpu, nullptr);
  if (!timer->Start().ok()) state.SkipWithError("simulated device did not start");
  uint32_t slots[kBatch];
  int64_t records = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) slots[i] = timer->Record(0);
    benchmark::DoNotOptimize(slots);
    state.PauseTiming();
    for (int i = 0; i < kBatch; ++i) {
      if (slots[i] != internal::kNoEvent) timer->Release(slots[i]);
      records += slots[i] != internal::kNoEvent;
    }
    state.ResumeTiming();
  }
  if (records != static_cast<int64_t>(state.iterations()) * kBatch)
    state.SkipWithError("pool ran out");
  state.counters["ns_per_record"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kBatch,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SimulatedMarkerRecord);

void BM_PhaseScopeDisabled(benchmark::State& state) {
  Session session(Options{.enabled = false});
  for (auto _ : state) {
    PhaseScope p(session, Phase::kForward);
    benchmark::DoNotOptimize(&p);
  }
}
BENCHMARK(BM_PhaseScopeDisabled);

// The *WorkerDraining rows: a session with default options, whose
// background worker drains the queue (every 10 ms, sooner as it fills) while
// the scopes record, so the records' cache lines and the queue's indices are
// shared with a live consumer. Empty scopes end faster than the worker
// aggregates them (a step's records are sorted and grouped), which no
// training loop does; so that the rows measure recording and not the drop
// path, the loop waits, untimed, whenever the queue is half full, until the
// worker has brought it down to an eighth.
class WorkerPace {
 public:
  explicit WorkerPace(Session& session)
      : session_(session), capacity_(static_cast<size_t>(session.options().queue_capacity)) {}

  void Check(benchmark::State& state) {
    if (++n_ % kCheckEvery != 0 || Queued() < capacity_ / 2) return;
    state.PauseTiming();
    while (Queued() > capacity_ / 8) std::this_thread::sleep_for(std::chrono::microseconds(100));
    state.ResumeTiming();
  }

 private:
  static constexpr int64_t kCheckEvery = 1024;
  size_t Queued() { return internal::SessionTestPeer::QueuedRecords(session_); }
  Session& session_;
  const size_t capacity_;
  int64_t n_ = 0;
};

void BM_PhaseScopeWorkerDraining(benchmark::State& state) {
  Session session;
  WorkerPace pace(session);
  ScopeToken step = session.BeginStep();
  int64_t n = 0;
  for (auto _ : state) {
    {
      PhaseScope p(session, Phase::kForward);
    }
    if (++n % kPhasesPerStep == 0) {
      session.End(step);
      step = session.BeginStep();
    }
    pace.Check(state);
  }
  session.End(step);
  Finish(state, session);
}
BENCHMARK(BM_PhaseScopeWorkerDraining);

void BM_StepScopeWorkerDraining(benchmark::State& state) {
  Session session;
  WorkerPace pace(session);
  for (auto _ : state) {
    {
      StepScope s(session, {.samples = 32});
    }
    pace.Check(state);
  }
  Finish(state, session);
}
BENCHMARK(BM_StepScopeWorkerDraining);

}  // namespace
}  // namespace gpuscope

// BENCHMARK_MAIN(), with the defaults of `make bench` (BENCH_FLAGS): 9
// repetitions interleaved at random, aggregates only. Flags given on the
// command line come later and win.
int main(int argc, char** argv) {
  static char repetitions[] = "--benchmark_repetitions=9";
  static char interleaving[] = "--benchmark_enable_random_interleaving=true";
  static char aggregates[] = "--benchmark_report_aggregates_only=true";
  std::vector<char*> args(argv, argv + argc);
  args.insert(args.begin() + (argc > 0 ? 1 : 0), {repetitions, interleaving, aggregates});
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
