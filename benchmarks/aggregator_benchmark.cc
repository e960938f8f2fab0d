// The background side: what a completed step costs the aggregator, and what
// Summarize() costs over a full window. Neither runs on the recording thread.

#include <vector>

#include "benchmark/benchmark.h"
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
    for (uint16_t p = 0; p < 4; ++p) agg.Consume(PhaseRecord(seq, p, t + p * 5'000'000, t + (p + 1) * 5'000'000));
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
  Session session(Options{.window = window, .clock = clock, .queue_capacity = 1 << 16,
                          .flush_interval_ms = 10000});
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
  if (s.steps != window || s.misuse.total() != 0) state.SkipWithError("window not filled: numbers invalid");
}
BENCHMARK(BM_Summarize)->Arg(512)->Arg(4096)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpuscope

BENCHMARK_MAIN();
