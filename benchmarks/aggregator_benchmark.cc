// The background side: what a completed step costs the aggregator, and what
// Summarize() costs over a full window. Neither runs on the recording thread.

#include <malloc.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/activity_timeline.h"
#include "core/aggregator.h"
#include "core/phase_table.h"
#include "core/record.h"
#include "core/spikes.h"
#include "core/step_window.h"
#include "core/summarize.h"
#include "gpuscope/gpuscope.h"

namespace gpuscope {
namespace {

using internal::Record;
using internal::RecordKind;

Record StepRecord(uint64_t seq, int64_t begin, int64_t end) {
  Record r{};
  r.kind = RecordKind::kStep;
  r.step_seq = seq;
  r.begin_ns = begin;
  r.end_ns = end;
  r.samples = 32;
  r.tokens = -1;
  return r;
}

Record PhaseRecord(uint64_t seq, uint16_t id, int64_t begin, int64_t end) {
  Record r{};
  r.kind = RecordKind::kPhase;
  r.step_seq = seq;
  r.name_id = id;
  r.begin_ns = begin;
  r.end_ns = end;
  return r;
}

// A step with no phases: ring insert plus lifetime histogram.
void BM_AggregateStep(benchmark::State& state) {
  internal::Aggregator agg(512, 64);
  uint64_t seq = 0;
  int64_t t = 0;
  for (auto _ : state) {
    ++seq;
    agg.Consume(StepRecord(seq, t, t + 20'000'000 + static_cast<int64_t>(seq % 977) * 1000));
    t += 21'000'000;
  }
  benchmark::DoNotOptimize(agg.completed_steps());
}
BENCHMARK(BM_AggregateStep);

// A step with `range(1)` top-level phases in a window of `range(0)`: what
// the worker spends on a completed step (5 phases is a common loop). The
// cost must not grow with the window.
void BM_AggregateStepWithPhases(benchmark::State& state) {
  const int phases = static_cast<int>(state.range(1));
  internal::Aggregator agg(static_cast<int>(state.range(0)), phases + 8);
  uint64_t seq = 0;
  int64_t t = 0;
  for (auto _ : state) {
    ++seq;
    for (int p = 0; p < phases; ++p) {
      agg.Consume(PhaseRecord(seq, static_cast<uint16_t>(p), t + p * 1'000'000,
                              t + (p + 1) * 1'000'000 - static_cast<int64_t>(seq % 977)));
    }
    agg.Consume(StepRecord(seq, t, t + (phases + 1) * 1'000'000));
    t += (phases + 1) * 1'000'000;
  }
  benchmark::DoNotOptimize(agg.completed_steps());
}
BENCHMARK(BM_AggregateStepWithPhases)->Args({512, 5})->Args({65536, 5})->Args({65536, 100});

// A 5-phase step with `range(0)` allocator samples falling in it: the
// worker's cost of the memory window (each sample's phase looked up, the
// step's peak and its entry), beside BM_AggregateStepWithPhases/512/5. One
// sample a step is the Python sampler at 100 ms on 100 ms steps; 64 is an
// allocator that reports every change (the simulated device's).
void BM_AggregateStepWithMemory(benchmark::State& state) {
  const int samples = static_cast<int>(state.range(0));
  internal::Aggregator agg(512, 16);
  agg.SetMemorySource("benchmark");
  uint64_t seq = 0;
  int64_t t = 0;
  constexpr int kPhases = 5;
  constexpr int64_t kStep = (kPhases + 1) * 1'000'000;
  for (auto _ : state) {
    ++seq;
    for (int i = 0; i < samples; ++i) {
      internal::MemorySample m;
      m.host_ns = t + (kStep * i) / samples + 1;
      m.stats.allocated_bytes = 2e9 + 1e8 * (i % 7);
      m.stats.reserved_bytes = 3e9;
      m.stats.peak_allocated_bytes = 2.6e9;
      m.stats.peak_reserved_bytes = 3e9;
      m.stats.alloc_retries = 0;
      m.stats.ooms = 0;
      m.stats.total_bytes = 80e9;
      agg.AddMemory(m);
    }
    for (int p = 0; p < kPhases; ++p) {
      agg.Consume(PhaseRecord(seq, static_cast<uint16_t>(p), t + p * 1'000'000,
                              t + (p + 1) * 1'000'000 - static_cast<int64_t>(seq % 977)));
    }
    agg.Consume(StepRecord(seq, t, t + kStep));
    t += kStep;
  }
  benchmark::DoNotOptimize(agg.completed_steps());
}
BENCHMARK(BM_AggregateStepWithMemory)->Arg(1)->Arg(64);

// Bytes the heap holds now (glibc's count of what is allocated).
double HeapBytes() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd);
}

// A session with default options but the window, the phase table and a
// manual clock, filled with `window` steps of `phases` top-level phases
// (the first has one nested "attention" scope), timed with a spread of
// durations. Flushed as it goes, so nothing is dropped.
// With `spike_every_steps` > 0, every that many steps also has an "eval" phase of
// 10 ms, far longer than a step: the summary then looks for periodic spikes
// past its first check.
struct FilledSession {
  FilledSession(int window, int phases, int spike_every_steps = 0)
      : clock(std::make_shared<ManualClock>()),
        session(Options{.window = window, .clock = clock, .max_phases = phases + 64}),
        spike_every(spike_every_steps) {
    for (int p = 0; p < phases; ++p) ids.push_back(*session.RegisterPhase("p" + std::to_string(p)));
    nested = *session.RegisterPhase("attention");
    AddSteps(window);
  }
  // `n` more steps (the oldest leave the window).
  void AddSteps(int n) {
    for (int k = 0; k < n; ++k, ++steps) {
      StepScope step(session, {.samples = 64});
      for (size_t p = 0; p < ids.size(); ++p) {
        PhaseScope scope(session, ids[p]);
        clock->Advance(100'000 + (steps * 7919 + static_cast<int64_t>(p) * 104729) % 50'000);
        if (p == 0) {
          PhaseScope inner(session, nested);
          clock->Advance(30'000);
        }
      }
      if (spike_every > 0 && steps % spike_every == spike_every - 1) {
        PhaseScope eval(session, Phase::kEval);
        clock->Advance(10'000'000);
      }
      if (steps % 64 == 63) session.Flush();
    }
    session.Flush();
  }
  std::shared_ptr<ManualClock> clock;
  Session session;
  int spike_every = 0;
  std::vector<PhaseId> ids;
  PhaseId nested{Phase{}};  // set in the constructor
  int64_t steps = 0;
};

// The filled session for (window, phases), made once per process (a
// benchmark function runs many times), with the heap it took to make.
struct Filled {
  std::unique_ptr<FilledSession> filled;
  double heap_bytes = 0;
};
Filled& FilledFor(int window, int phases) {
  static auto* cache = new std::map<std::pair<int, int>, Filled>();
  Filled& f = (*cache)[{window, phases}];
  if (f.filled == nullptr) {
    const double before = HeapBytes();
    f.filled = std::make_unique<FilledSession>(window, phases);
    // With what a summary leaves behind: the values the window's chunks
    // keep for the next one, and the summarizing thread's buffers.
    (void)f.filled->session.Summarize();
    f.heap_bytes = HeapBytes() - before;
  }
  return f;
}

// Summarize() over a full window of `range(0)` steps of `range(1)` phases;
// the counter heap_MB is what the filled session holds once summarized,
// measured.
void BM_Summarize(benchmark::State& state) {
  const int window = static_cast<int>(state.range(0));
  const int phases = static_cast<int>(state.range(1));
  Filled& f = FilledFor(window, phases);
  Session& session = f.filled->session;
  for (auto _ : state) benchmark::DoNotOptimize(session.Summarize());
  const Summary s = session.Summarize();
  state.counters["heap_MB"] = f.heap_bytes / 1e6;
  if (s.steps != window || s.misuse.total() != 0 ||
      s.phases.size() != static_cast<size_t>(phases) + 2)
    state.SkipWithError("window not filled: numbers invalid");
}
BENCHMARK(BM_Summarize)
    ->Args({512, 5})
    ->Args({4096, 5})
    ->Args({65536, 5})
    ->Args({4096, 100})
    ->Args({65536, 100})
    ->Unit(benchmark::kMillisecond);

// Summarize() as a live job sees it: 256 more steps (untimed) before each
// summary, so the window has moved on since the last one; the chunks still
// wholly in it are read from what the previous summary found there.
void BM_SummarizeLive(benchmark::State& state) {
  const int window = static_cast<int>(state.range(0));
  const int phases = static_cast<int>(state.range(1));
  FilledSession live(window, phases);
  (void)live.session.Summarize();
  for (auto _ : state) {
    state.PauseTiming();
    live.AddSteps(256);
    state.ResumeTiming();
    benchmark::DoNotOptimize(live.session.Summarize());
  }
  const Summary s = live.session.Summarize();
  if (s.steps != window || s.misuse.total() != 0 ||
      s.phases.size() != static_cast<size_t>(phases) + 2)
    state.SkipWithError("window not filled: numbers invalid");
}
BENCHMARK(BM_SummarizeLive)->Args({4096, 5})->Args({65536, 100})->Unit(benchmark::kMillisecond);

// Summarize() over a full window of `range(0)` steps of `range(1)` phases
// with an evaluation every `range(2)` steps: what finding the periodic
// spikes adds to BM_Summarize (where no step is slow enough to look).
// Every 3 steps is the most slow steps a window can have for them.
void BM_SummarizeWithSpikes(benchmark::State& state) {
  const int window = static_cast<int>(state.range(0));
  const int phases = static_cast<int>(state.range(1));
  FilledSession filled(window, phases, static_cast<int>(state.range(2)));
  (void)filled.session.Summarize();  // as in BM_Summarize: the chunks keep what it found
  for (auto _ : state) benchmark::DoNotOptimize(filled.session.Summarize());
  const Summary s = filled.session.Summarize();
  if (s.steps != window || s.periodic_spikes.size() != 1 ||
      s.periodic_spikes[0].period_steps != state.range(2))
    state.SkipWithError("no periodic spike found: numbers invalid");
}
BENCHMARK(BM_SummarizeWithSpikes)
    ->Args({512, 5, 50})
    ->Args({4096, 5, 50})
    ->Args({4096, 100, 50})
    ->Args({65536, 100, 50})
    ->Args({65536, 100, 3})
    ->Unit(benchmark::kMillisecond);

// FindPeriodicSpikes() alone, the part of a summary that looks for work
// every N steps: a window of `range(0)` steps of `range(1)` phases (as
// FilledSession's) with a 10 ms evaluation every `range(2)` steps (0: none,
// a steady loop, which it leaves after a look at the step quantiles).
void BM_FindPeriodicSpikes(benchmark::State& state) {
  const int window = static_cast<int>(state.range(0));
  const int phases = static_cast<int>(state.range(1));
  const int64_t every = state.range(2);
  internal::StepWindow steps(window, phases + 1);
  std::vector<std::string> names;
  for (int p = 0; p < phases; ++p) names.push_back("p" + std::to_string(p));
  names.emplace_back("eval");
  std::vector<std::pair<uint16_t, internal::PhaseSample>> samples;
  int64_t t = 0;
  for (int64_t k = 0; k < window; ++k) {
    samples.clear();
    const auto add = [&](int id, int64_t ns) {
      samples.emplace_back(static_cast<uint16_t>(id),
                           internal::PhaseSample{.total_ns = ns, .top_ns = ns, .count = 1});
      samples.back().second.top_level = true;
      return ns;
    };
    internal::StepRecord r;
    for (int p = 0; p < phases; ++p) {
      r.top_level_ns += add(p, 100'000 + (k * 7919 + static_cast<int64_t>(p) * 104729) % 50'000);
    }
    if (every > 0 && k % every == every - 1) r.top_level_ns += add(phases, 10'000'000);
    r.begin_ns = t;
    r.end_ns = t + r.top_level_ns + 30'000;
    t = r.end_ns;
    steps.Append(r, samples);
  }
  internal::WindowSnapshot snapshot;
  snapshot.window = steps.Snapshot();
  snapshot.phase_names = names;
  internal::SummaryInputs facts;
  facts.window = window;
  const Summary s = internal::SummarizeWindow(snapshot, facts);
  for (auto _ : state) {
    benchmark::DoNotOptimize(internal::FindPeriodicSpikes(snapshot.window, names, s));
  }
  if (s.periodic_spikes.size() != (every > 0 ? 1u : 0u))
    state.SkipWithError("periodic spikes not as built: numbers invalid");
}
BENCHMARK(BM_FindPeriodicSpikes)
    ->Args({4096, 5, 0})
    ->Args({4096, 5, 50})
    ->Args({4096, 100, 50})
    ->Args({65536, 100, 0})
    ->Args({65536, 100, 50})
    ->Args({65536, 100, 3})
    ->Unit(benchmark::kMicrosecond);

// StepSeries() (the per-step plot data, C++ side) over the same windows.
void BM_StepSeries(benchmark::State& state) {
  Session& session =
      FilledFor(static_cast<int>(state.range(0)), static_cast<int>(state.range(1))).filled->session;
  for (auto _ : state) benchmark::DoNotOptimize(session.StepSeries());
}
BENCHMARK(BM_StepSeries)->Args({4096, 5})->Args({65536, 100})->Unit(benchmark::kMillisecond);

// StepColumns() (the same data, a column per field) over the same windows.
void BM_StepColumns(benchmark::State& state) {
  Session& session =
      FilledFor(static_cast<int>(state.range(0)), static_cast<int>(state.range(1))).filled->session;
  for (auto _ : state) benchmark::DoNotOptimize(session.StepColumns());
}
BENCHMARK(BM_StepColumns)->Args({4096, 5})->Args({65536, 100})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpuscope

// The middle one of three steps of `kernels` records 25 us apart (the
// slice holds the steps on either side too), in four equal phases.
static gpuscope::internal::ActivityStepInput MiddleStep(
    int kernels, const std::vector<gpuscope::internal::DeviceInterval>& acts) {
  gpuscope::internal::ActivityStepInput in;
  in.begin_ns = static_cast<int64_t>(kernels) * 25'000;
  in.end_ns = 2 * in.begin_ns;
  const int64_t q = (in.end_ns - in.begin_ns) / 4;
  for (int p = 0; p < 4; ++p)
    in.phases.push_back({p, 0, in.begin_ns + p * q, in.begin_ns + (p + 1) * q});
  in.activity = acts;
  return in;
}

// The cupti source's per-step analysis (worker side, under the aggregator
// lock): a step of `range(0)` kernels of 20 us with 5 us launch gaps on two
// streams, four phases, plus the neighbouring steps' records in the slice.
void BM_ActivityStep(benchmark::State& state) {
  const int kernels = static_cast<int>(state.range(0));
  std::vector<gpuscope::internal::DeviceInterval> acts;
  int64_t t = 0;
  for (int i = 0; i < 3 * kernels; ++i) {  // the step before, this one, the one after
    gpuscope::internal::DeviceInterval a;
    a.begin_ns = t;
    a.end_ns = t + 20'000;
    a.launch_ns = t - 3'000;
    a.stream = static_cast<uint32_t>(i % 2);
    acts.push_back(a);
    t += 25'000;
  }
  const gpuscope::internal::ActivityStepInput in = MiddleStep(kernels, acts);
  const int64_t q = (in.end_ns - in.begin_ns) / 4;
  for (auto _ : state) {
    gpuscope::internal::ActivityStepResult r = gpuscope::internal::AnalyzeActivityStep(in);
    benchmark::DoNotOptimize(r);
    benchmark::DoNotOptimize(
        gpuscope::internal::LaunchedDeviceTime(acts, {{in.begin_ns, in.begin_ns + q}}));
  }
  state.counters["ns_per_kernel"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kernels,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ActivityStep)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

// The same step with every kind the device-time split tells apart: every
// third kernel an NCCL collective on a third stream, every fourth record a
// copy on a fourth, every seventh a memset, overlapping the kernels (the
// split sorts each device's activity edges once per step).
void BM_ActivityStepMixed(benchmark::State& state) {
  const int kernels = static_cast<int>(state.range(0));
  std::vector<gpuscope::internal::DeviceInterval> acts;
  int64_t t = 0;
  for (int i = 0; i < 3 * kernels; ++i) {
    gpuscope::internal::DeviceInterval a;
    a.begin_ns = t;
    a.end_ns = t + 20'000;
    a.launch_ns = t - 3'000;
    a.stream = static_cast<uint32_t>(i % 2);
    if (i % 3 == 0) {
      a.kernel_class = gpuscope::internal::KernelClass::kCollective;
      a.stream = 2;
      a.end_ns = t + 40'000;  // runs under the next kernels
    } else if (i % 4 == 0) {
      a.kind = gpuscope::internal::ActivityKind::kMemcpyH2D;
      a.stream = 3;
      a.end_ns = t + 30'000;
    } else if (i % 7 == 0) {
      a.kind = gpuscope::internal::ActivityKind::kMemset;
    }
    acts.push_back(a);
    t += 25'000;
  }
  const gpuscope::internal::ActivityStepInput in = MiddleStep(kernels, acts);
  for (auto _ : state) {
    gpuscope::internal::ActivityStepResult r = gpuscope::internal::AnalyzeActivityStep(in);
    benchmark::DoNotOptimize(r);
  }
  state.counters["ns_per_record"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kernels,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ActivityStepMixed)->Arg(100)->Arg(10000)->Unit(benchmark::kMicrosecond);

// CompareRanks() over one exchange of `range(0)` ranks' records of 16
// phases each, one rank 3x slow in one phase: the scoring's cost as the
// world grows (decoding included, as a rank receiving the records pays it).
void BM_CompareRanks(benchmark::State& state) {
  const int world = static_cast<int>(state.range(0));
  std::vector<std::string> wire;
  for (int rank = 0; rank < world; ++rank) {
    gpuscope::RankRecord r;
    r.rank = rank;
    r.world_size = world;
    r.host = "node" + std::to_string(rank / 8);
    r.step_p50 = 0.1;
    r.step_p95 = 0.11;
    for (int p = 0; p < gpuscope::kMaxRankPhases; ++p) {
      const double t = 0.005 * (1 + (rank * 31 + p * 17) % 7 / 100.0);  // +-3 % spread
      r.phases.push_back({.name = "phase" + std::to_string(p),
                          .host_p50 = rank == world / 3 && p == 2 ? 3 * t : t,
                          .share = 0.05});
    }
    wire.push_back(gpuscope::EncodeRankRecord(r));
  }
  size_t found = 0;
  for (auto _ : state) {
    std::vector<gpuscope::RankRecord> records;
    records.reserve(wire.size());
    for (const std::string& bytes : wire) records.push_back(*gpuscope::DecodeRankRecord(bytes));
    found = gpuscope::CompareRanks(std::move(records), world).stragglers.size();
  }
  if (found != 1) state.SkipWithError("expected exactly one straggler");
}
BENCHMARK(BM_CompareRanks)->Arg(8)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
