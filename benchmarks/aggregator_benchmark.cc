// The background side: what a completed step costs the aggregator, and what
// Summarize() costs over a full window. Neither runs on the recording thread.

#include <vector>

#include "benchmark/benchmark.h"
#include "core/activity_timeline.h"
#include "core/aggregator.h"
#include "core/phase_table.h"
#include "core/record.h"
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

// A step with four top-level phases, the common case.
void BM_AggregateStepWith4Phases(benchmark::State& state) {
  internal::Aggregator agg(512, 64);
  uint64_t seq = 0;
  int64_t t = 0;
  for (auto _ : state) {
    ++seq;
    for (uint16_t p = 0; p < 4; ++p)
      agg.Consume(PhaseRecord(seq, p, t + p * 5'000'000, t + (p + 1) * 5'000'000));
    agg.Consume(StepRecord(seq, t, t + 21'000'000));
    t += 21'000'000;
  }
  benchmark::DoNotOptimize(agg.completed_steps());
}
BENCHMARK(BM_AggregateStepWith4Phases);

// Summarize() over a full window of steps with five phases each (one nested).
void BM_Summarize(benchmark::State& state) {
  const int window = static_cast<int>(state.range(0));
  auto clock = std::make_shared<ManualClock>();
  Session session(Options{
      .window = window, .clock = clock, .queue_capacity = 1 << 16, .flush_interval_ms = 10000});
  for (int i = 0; i < window; ++i) {
    StepScope step(session, {.samples = 64});
    for (Phase p : {Phase::kData, Phase::kH2D, Phase::kForward, Phase::kBackward}) {
      PhaseScope scope(session, p);
      clock->Advance(1'000'000 + (i * 7919 + static_cast<int>(p) * 104729) % 500'000);
      if (p == Phase::kForward) {
        PhaseScope nested(session, "attention");
        clock->Advance(300'000);
      }
    }
  }
  session.Flush();
  for (auto _ : state) benchmark::DoNotOptimize(session.Summarize());
  const Summary s = session.Summarize();
  state.counters["steps"] = static_cast<double>(s.steps);
  if (s.steps != window || s.misuse.total() != 0)
    state.SkipWithError("window not filled: numbers invalid");
}
BENCHMARK(BM_Summarize)->Arg(512)->Arg(4096)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpuscope

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
  gpuscope::internal::ActivityStepInput in;
  in.begin_ns = static_cast<int64_t>(kernels) * 25'000;
  in.end_ns = 2 * in.begin_ns;
  const int64_t q = (in.end_ns - in.begin_ns) / 4;
  for (int p = 0; p < 4; ++p)
    in.phases.push_back({p, 0, in.begin_ns + p * q, in.begin_ns + (p + 1) * q});
  in.activity = acts;
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

BENCHMARK_MAIN();
