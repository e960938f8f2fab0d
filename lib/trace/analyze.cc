// AnalyzeTrace(): a recorded trace through the engine (core/engine.h).
// docs/analyze.md states every rule below for users.

#include "gpuscope/analyze.h"

#include <algorithm>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/text.h"
#include "core/engine.h"
#include "core/step_series.h"
#include "gpuscope/ranks.h"
#include "trace/kineto_reader.h"
#include "trace/nsys_reader.h"

namespace gpuscope {
namespace {

using internal::ActivityKind;
using internal::DeviceInterval;
using internal::RecordedTrace;
using internal::TraceHostEvent;

bool SW(std::string_view s, std::string_view prefix) { return s.starts_with(prefix); }
bool Has(std::string_view s, std::string_view part) { return s.find(part) != s.npos; }

// A phase occurrence read from the trace, before it becomes a Record.
struct Occurrence {
  int64_t begin_ns;
  int64_t end_ns;
  std::string phase;
  int depth = 0;  // 0: top level; nested annotations 1, 2, ...
};

struct Step {
  int64_t begin_ns;
  int64_t end_ns;
  uint32_t thread;
};

// gpuscope's NVTX domain, as an Nsight Systems export names its ranges
// ("gpuscope:step", "gpuscope:forward"; trace/nsys_reader.h).
constexpr std::string_view kGpuscopeDomain = "gpuscope:";
constexpr std::string_view kGpuscopeStep = "gpuscope:step";

bool IsStep(std::string_view name, std::string_view step_name) {
  return SW(name, step_name) && (name.size() == step_name.size() || name[step_name.size()] == '#');
}

bool IsSyncCall(std::string_view name) {
  return name == "cudaStreamSynchronize" || name == "cudaDeviceSynchronize" ||
         name == "cudaEventSynchronize" || name == "cuStreamSynchronize" ||
         name == "cuCtxSynchronize" || name == "cuEventSynchronize";
}

bool IsBackward(std::string_view name) {
  return SW(name, "autograd::engine::evaluate_function") ||
         name == "torch::autograd::AccumulateGrad" || Has(name, "Backward");
}

// The phase a top-level host range on the step's thread is, by its name; ""
// when the name says nothing.
std::string PhaseOfName(std::string_view name, TraceHostEvent::Kind kind) {
  if (kind == TraceHostEvent::Kind::kAnnotation && SW(name, kGpuscopeDomain)) {
    return std::string(name.substr(kGpuscopeDomain.size()));  // gpuscope's own phase
  }
  if (SW(name, "enumerate(DataLoader)")) return "data";
  if (SW(name, "Optimizer.step#") || SW(name, "Optimizer.zero_grad#")) return "optimizer";
  if (name == "aten::item" || name == "aten::_local_scalar_dense") return "sync";
  if (SW(name, "nccl:") || SW(name, "c10d::") || SW(name, "record_param_comms") ||
      SW(name, "MPI:") || SW(name, "MPI_")) {
    return "comm";
  }
  if (SW(name, "autograd::engine::evaluate_function")) return "backward";
  if (kind == TraceHostEvent::Kind::kAnnotation) return std::string(name);
  return "";
}

// The trace's steps: ranges named as AnalyzeOptions::step_name says, in
// time order, on the thread most of them are on; one overlapping an earlier
// one is left out.
std::vector<Step> RangesNamed(const RecordedTrace& trace, std::string_view name,
                              std::unordered_map<uint32_t, int>* per_thread) {
  std::vector<Step> steps;
  for (const TraceHostEvent& h : trace.host) {
    if (h.kind != TraceHostEvent::Kind::kRuntime && IsStep(trace.names[h.name], name)) {
      steps.push_back({h.begin_ns, h.end_ns, h.thread});
      ++(*per_thread)[h.thread];
    }
  }
  return steps;
}

// The whole trace as one step, on the thread with the most ranges (runtime
// calls count when there are no others).
Step WholeTrace(const RecordedTrace& trace) {
  Step step{INT64_MAX, INT64_MIN, 0};
  std::unordered_map<uint32_t, int64_t> per_thread;
  for (const TraceHostEvent& h : trace.host) {
    step.begin_ns = std::min(step.begin_ns, h.begin_ns);
    step.end_ns = std::max(step.end_ns, h.end_ns);
    per_thread[h.thread] += h.kind == TraceHostEvent::Kind::kRuntime ? 1 : 1 << 20;
  }
  for (const internal::TraceDeviceEvent& d : trace.device) {
    step.begin_ns = std::min(step.begin_ns, d.interval.begin_ns);
    step.end_ns = std::max(step.end_ns, d.interval.end_ns);
  }
  int64_t most = -1;
  for (const auto& [thread, n] : per_thread) {
    if (n > most || (n == most && thread < step.thread)) {
      most = n;
      step.thread = thread;
    }
  }
  if (step.begin_ns > step.end_ns) step.begin_ns = step.end_ns = 0;
  return step;
}

absl::StatusOr<std::vector<Step>> FindSteps(const RecordedTrace& trace, std::string_view name) {
  std::unordered_map<uint32_t, int> per_thread;
  std::vector<Step> steps = RangesNamed(trace, name.empty() ? "ProfilerStep" : name, &per_thread);
  if (steps.empty() && name.empty()) steps = RangesNamed(trace, kGpuscopeStep, &per_thread);
  if (name.empty()) name = "ProfilerStep";
  if (steps.empty()) {
    // The longest ranges' names, as a hint of what marks a step here.
    std::vector<std::pair<int64_t, uint32_t>> longest;
    std::unordered_set<uint32_t> seen;
    for (const TraceHostEvent& h : trace.host) {
      if (h.kind == TraceHostEvent::Kind::kRuntime) continue;
      longest.emplace_back(h.end_ns - h.begin_ns, h.name);
    }
    std::sort(longest.rbegin(), longest.rend());
    std::vector<std::string> names;
    for (const auto& [dur, n] : longest) {
      if (seen.insert(n).second) names.push_back(absl::StrCat("\"", trace.names[n], "\""));
      if (names.size() == 5) break;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "the trace has no \"", std::string(name),
        "\" ranges to take as steps (recorded without "
        "torch.profiler's schedule/prof.step()?); name the range that marks one step with "
        "--step NAME, or take the whole trace as one step with --whole-trace",
        names.empty() ? ""
                      : absl::StrCat(" (its longest ranges: ", absl::StrJoin(names, ", "), ")")));
  }
  uint32_t thread = steps[0].thread;
  for (const auto& [t, n] : per_thread) {
    if (n > per_thread[thread]) thread = t;
  }
  std::erase_if(steps, [&](const Step& s) { return s.thread != thread; });
  std::sort(steps.begin(), steps.end(),
            [](const Step& a, const Step& b) { return a.begin_ns < b.begin_ns; });
  std::vector<Step> kept;
  for (const Step& s : steps) {
    if (kept.empty() || s.begin_ns >= kept.back().end_ns) kept.push_back(s);
  }
  return kept;
}

// Host ranges by thread, sorted by begin (longest first on ties), runtime
// calls apart.
struct HostIndex {
  std::vector<const TraceHostEvent*> ops;       // the steps' thread: operators, annotations
  std::vector<const TraceHostEvent*> runtime;   // the steps' thread: runtime calls
  std::vector<const TraceHostEvent*> backward;  // other threads: autograd's work
};

HostIndex IndexHost(const RecordedTrace& trace, uint32_t thread) {
  HostIndex index;
  for (const TraceHostEvent& h : trace.host) {
    if (h.thread == thread) {
      (h.kind == TraceHostEvent::Kind::kRuntime ? index.runtime : index.ops).push_back(&h);
    } else if (h.kind != TraceHostEvent::Kind::kRuntime && IsBackward(trace.names[h.name])) {
      index.backward.push_back(&h);
    }
  }
  const auto order = [](const TraceHostEvent* a, const TraceHostEvent* b) {
    return a->begin_ns != b->begin_ns ? a->begin_ns < b->begin_ns : a->end_ns > b->end_ns;
  };
  for (auto* v : {&index.ops, &index.runtime, &index.backward})
    std::sort(v->begin(), v->end(), order);
  return index;
}

// The events of sorted `events` that lie within [begin, end].
std::pair<size_t, size_t> Within(const std::vector<const TraceHostEvent*>& events, int64_t begin,
                                 int64_t end) {
  const auto first =
      std::lower_bound(events.begin(), events.end(), begin,
                       [](const TraceHostEvent* e, int64_t t) { return e->begin_ns < t; });
  auto last = first;
  while (last != events.end() && (*last)->begin_ns <= end) ++last;
  return {static_cast<size_t>(first - events.begin()), static_cast<size_t>(last - events.begin())};
}

// One step's phase occurrences, top level, in time order, not overlapping.
std::vector<Occurrence> StepPhases(const RecordedTrace& trace, const HostIndex& index,
                                   const Step& step, std::string_view step_name,
                                   const std::unordered_set<uint32_t>& h2d_correlations) {
  // Backward: autograd's work on its own threads, first to last.
  int64_t bwd_begin = INT64_MAX, bwd_end = INT64_MIN;
  const auto [b0, b1] = Within(index.backward, step.begin_ns, step.end_ns);
  for (size_t i = b0; i < b1; ++i) {
    bwd_begin = std::min(bwd_begin, index.backward[i]->begin_ns);
    bwd_end = std::max(bwd_end, std::min(step.end_ns, index.backward[i]->end_ns));
  }
  // Top-level ranges on the step's thread.
  std::vector<Occurrence> top;
  const auto [o0, o1] = Within(index.ops, step.begin_ns, step.end_ns);
  int64_t covered = INT64_MIN;
  for (size_t i = o0; i < o1; ++i) {
    const TraceHostEvent* e = index.ops[i];
    const std::string_view name = trace.names[e->name];
    if (e->end_ns > step.end_ns || IsStep(name, "ProfilerStep") || IsStep(name, kGpuscopeStep) ||
        IsStep(name, step_name)) {
      continue;
    }
    if (e->begin_ns < covered) continue;  // nested in the previous top-level range
    covered = e->end_ns;
    top.push_back({e->begin_ns, e->end_ns, PhaseOfName(name, e->kind)});
  }
  // Runtime calls: an unnamed range that copies to the device is h2d; a
  // synchronizing call outside every range is sync.
  const auto [r0, r1] = Within(index.runtime, step.begin_ns, step.end_ns);
  size_t t = 0;
  for (size_t i = r0; i < r1; ++i) {
    const TraceHostEvent* r = index.runtime[i];
    while (t < top.size() && top[t].end_ns < r->begin_ns) ++t;
    const bool inside = t < top.size() && top[t].begin_ns <= r->begin_ns;
    if (inside && top[t].phase.empty() && h2d_correlations.contains(r->correlation)) {
      top[t].phase = "h2d";
    } else if (!inside && IsSyncCall(trace.names[r->name])) {
      top.insert(top.begin() + static_cast<std::ptrdiff_t>(t), {r->begin_ns, r->end_ns, "sync"});
      ++t;
    }
  }
  // Unnamed operators before backward began are the forward pass; after,
  // they stay unnamed (the step's "other").
  for (Occurrence& o : top) {
    if (o.phase.empty() && o.begin_ns < bwd_begin) o.phase = "forward";
  }
  if (bwd_begin < bwd_end) top.push_back({bwd_begin, bwd_end, "backward"});
  std::sort(top.begin(), top.end(),
            [](const Occurrence& a, const Occurrence& b) { return a.begin_ns < b.begin_ns; });
  // Consecutive occurrences of one phase are one (the host time between
  // its operators is the phase's own); overlaps (backward's threads against
  // the step's) are clipped to what the earlier left.
  std::vector<Occurrence> out;
  bool broken = false;  // an unnamed range since the last occurrence
  for (Occurrence& o : top) {
    if (o.phase.empty()) {
      broken = true;
      continue;
    }
    if (!out.empty() && o.begin_ns < out.back().end_ns) o.begin_ns = out.back().end_ns;
    if (o.end_ns <= o.begin_ns) continue;
    if (!out.empty() && !broken && out.back().phase == o.phase) {
      out.back().end_ns = o.end_ns;
    } else {
      out.push_back(std::move(o));
    }
    broken = false;
  }
  return out;
}

// The annotations (record_function, NVTX ranges) nested inside the step's
// top-level occurrences `top`, on the steps' thread, with their depth below
// the occurrence; at most kMaxNestedDepth deep (a session's scopes nest as
// deep), deeper ones left out. An annotation that is the top-level
// occurrence itself, or that crosses an occurrence's edge, is not one.
std::vector<Occurrence> NestedPhases(const RecordedTrace& trace, const HostIndex& index,
                                     const Step& step, std::string_view step_name,
                                     const std::vector<Occurrence>& top) {
  constexpr int kMaxNestedDepth = 15;
  std::vector<Occurrence> nested;
  const auto [o0, o1] = Within(index.ops, step.begin_ns, step.end_ns);
  size_t t = 0;
  std::vector<int64_t> open_ends;  // enclosing nested annotations' ends
  for (size_t i = o0; i < o1; ++i) {
    const TraceHostEvent* e = index.ops[i];
    const std::string_view name = trace.names[e->name];
    if (e->kind != TraceHostEvent::Kind::kAnnotation || IsStep(name, "ProfilerStep") ||
        IsStep(name, kGpuscopeStep) || IsStep(name, step_name)) {
      continue;
    }
    while (t < top.size() && top[t].end_ns <= e->begin_ns) {
      ++t;
      open_ends.clear();
    }
    if (t == top.size()) break;
    const Occurrence& parent = top[t];
    if (e->begin_ns < parent.begin_ns || e->end_ns > parent.end_ns ||
        (e->begin_ns == parent.begin_ns && e->end_ns == parent.end_ns)) {
      continue;
    }
    while (!open_ends.empty() && open_ends.back() <= e->begin_ns) open_ends.pop_back();
    if (!open_ends.empty() && e->end_ns > open_ends.back()) continue;  // crosses its parent
    const int depth = static_cast<int>(open_ends.size()) + 1;
    if (depth > kMaxNestedDepth) continue;
    open_ends.push_back(e->end_ns);
    nested.push_back({e->begin_ns, e->end_ns, PhaseOfName(name, e->kind), depth});
  }
  return nested;
}

// The device records as the engine takes them: launch times from the
// runtime calls they correlate to, times from `origin`. Synchronizations
// come from the trace's cuda_sync records, or, in a trace without any (older
// Kineto), from the runtime's synchronizing calls.
std::vector<DeviceInterval> DeviceIntervals(const RecordedTrace& trace, int64_t origin,
                                            TraceAnalysis* out) {
  std::unordered_map<uint32_t, int64_t> launch;
  for (const TraceHostEvent& h : trace.host) {
    if (h.kind == TraceHostEvent::Kind::kRuntime && h.correlation != 0)
      launch.emplace(h.correlation, h.begin_ns);
  }
  std::vector<DeviceInterval> intervals;
  intervals.reserve(trace.device.size());
  std::unordered_map<uint32_t, uint32_t> kernel_names;  // trace's name index -> table id
  for (const internal::TraceDeviceEvent& d : trace.device) {
    DeviceInterval i = d.interval;
    if (i.kind == ActivityKind::kKernel) {
      const auto [it, added] = kernel_names.try_emplace(d.name, 0);
      if (added) it->second = internal::InternKernelName(trace.names[d.name]);
      i.name = it->second;
    }
    i.begin_ns -= origin;
    i.end_ns -= origin;
    if (const auto it = launch.find(d.correlation); d.correlation != 0 && it != launch.end()) {
      i.launch_ns = it->second - origin;
    } else if (i.kind != ActivityKind::kSync) {
      ++out->unmatched_correlations;
    }
    (i.kind == ActivityKind::kSync ? out->sync_records : out->device_records) += 1;
    intervals.push_back(i);
  }
  if (!trace.has_sync_records) {
    for (const TraceHostEvent& h : trace.host) {
      if (h.kind != TraceHostEvent::Kind::kRuntime || !IsSyncCall(trace.names[h.name])) continue;
      DeviceInterval i;
      i.begin_ns = h.begin_ns - origin;
      i.end_ns = h.end_ns - origin;
      i.kind = ActivityKind::kSync;
      ++out->sync_records;
      intervals.push_back(i);
    }
  }
  return intervals;
}

int64_t Origin(const RecordedTrace& trace) {
  int64_t origin = INT64_MAX;
  for (const TraceHostEvent& h : trace.host) origin = std::min(origin, h.begin_ns);
  for (const internal::TraceDeviceEvent& d : trace.device)
    origin = std::min(origin, d.interval.begin_ns);
  return origin == INT64_MAX ? 0 : origin;
}

internal::Record HostRecord(int64_t begin, int64_t end, uint64_t seq, internal::RecordKind kind,
                            uint16_t name_id) {
  internal::Record r{};
  r.begin_ns = begin;
  r.end_ns = end;
  r.step_seq = seq;
  r.samples = r.tokens = -1;
  r.begin_event = r.end_event = internal::kNoEvent;
  r.name_id = name_id;
  r.kind = kind;
  return r;
}

// Each step's phase occurrences, then the step, into `engine` (times from
// `origin`), in the order a session's scopes would have ended.
void FeedSteps(const RecordedTrace& trace, const std::vector<Step>& steps,
               std::string_view step_name, int64_t origin, const std::unordered_set<uint32_t>& h2d,
               internal::Engine& engine) {
  const HostIndex index = IndexHost(trace, steps[0].thread);
  uint64_t seq = 0;
  for (const Step& step : steps) {
    ++seq;
    std::vector<Occurrence> phases = StepPhases(trace, index, step, step_name, h2d);
    for (Occurrence& n : NestedPhases(trace, index, step, step_name, phases))
      phases.push_back(std::move(n));
    // In the order their scopes would have ended: inner before outer.
    std::sort(phases.begin(), phases.end(), [](const Occurrence& a, const Occurrence& b) {
      return a.end_ns != b.end_ns ? a.end_ns < b.end_ns : a.depth > b.depth;
    });
    for (const Occurrence& p : phases) {
      absl::StatusOr<PhaseId> id = engine.Phase(p.phase);
      if (!id.ok()) continue;  // a name a session refuses, or past max_phases: "other"
      internal::Record r = HostRecord(p.begin_ns - origin, p.end_ns - origin, seq,
                                      internal::RecordKind::kPhase, id->value());
      r.depth = static_cast<uint8_t>(p.depth);
      engine.AddHostRange(r);
    }
    engine.AddHostRange(HostRecord(step.begin_ns - origin, step.end_ns - origin, seq,
                                   internal::RecordKind::kStep, 0));
  }
}

// What the summary says its numbers come from: the profiler, the file (its
// name only, made safe to print) and what was read.
std::string SourceReason(const std::string& profiler, std::string_view path,
                         const TraceAnalysis& out) {
  std::string where(path);
  if (const size_t slash = where.rfind('/'); slash != std::string::npos) where.erase(0, slash + 1);
  where = internal::TerminalSafe(where);
  const std::string head =
      absl::StrCat("recorded: ", profiler, " trace ", where, " (", out.format, ")");
  return out.device_records > 0 ? absl::StrCat(head, ", ", out.device_records, " device records")
                                : absl::StrCat(head, " has no GPU records: a host-only trace");
}

}  // namespace

absl::StatusOr<TraceAnalysis> AnalyzeTrace(std::string_view path, const AnalyzeOptions& options) {
  if (options.window < 0 || options.warmup_steps < 0 || options.launch_threshold_ns < 0) {
    return absl::InvalidArgumentError("window, warmup_steps and launch_threshold_ns must be >= 0");
  }
  const internal::ReadLimits limits{.max_bytes = options.max_bytes,
                                    .max_events = options.max_events};
  const bool nsys = internal::IsSqliteFile(path);
  absl::StatusOr<RecordedTrace> trace =
      nsys ? internal::ReadNsysTrace(path, limits) : internal::ReadKinetoTrace(path, limits);
  if (!trace.ok()) return trace.status();
  const std::string profiler = nsys ? "Nsight Systems" : "torch.profiler";
  absl::StatusOr<std::vector<Step>> steps = options.whole_trace
                                                ? std::vector<Step>{WholeTrace(*trace)}
                                                : FindSteps(*trace, options.step_name);
  if (!steps.ok()) return steps.status();

  TraceAnalysis out;
  out.path = std::string(path);
  out.rank = trace->rank.value_or(-1);
  out.world_size = trace->world_size.value_or(-1);
  out.format = trace->format;
  out.events = trace->events;
  out.gpu_names = trace->gpu_names;
  const int64_t origin = Origin(*trace);
  std::vector<DeviceInterval> intervals = DeviceIntervals(*trace, origin, &out);
  std::unordered_set<uint32_t> h2d;
  for (const internal::TraceDeviceEvent& d : trace->device) {
    if (d.interval.kind == ActivityKind::kMemcpyH2D && d.correlation != 0)
      h2d.insert(d.correlation);
  }
  trace->device = {};  // in `intervals` now: free it before the analysis grows

  const int window =
      std::clamp(options.window > 0 ? options.window
                                    : static_cast<int>(std::min<size_t>(steps->size(), kMaxWindow)),
                 1, kMaxWindow);
  internal::Engine engine({.window = window,
                           .warmup_steps = options.warmup_steps,
                           .device_activity = out.device_records > 0,
                           .launch_threshold_ns = options.launch_threshold_ns,
                           .trace_steps = std::clamp(options.trace_steps, 0, kMaxWindow),
                           .activity_name = absl::StrCat(profiler, " trace")});
  engine.AddDeviceIntervals(std::move(intervals));
  FeedSteps(*trace, *steps, options.step_name, origin, h2d, engine);
  const size_t counted =
      steps->size() - std::min<size_t>(steps->size(), static_cast<size_t>(options.warmup_steps));
  for (size_t i = steps->size() - std::min<size_t>(counted, static_cast<size_t>(window));
       i < steps->size(); ++i) {
    out.step_times.push_back(static_cast<double>((*steps)[i].end_ns - (*steps)[i].begin_ns) * 1e-9);
  }

  internal::SummaryInputs inputs;
  inputs.window = window;
  inputs.source = out.device_records > 0 ? Source::kCupti : Source::kHost;
  inputs.source_reason = SourceReason(profiler, path, out);
  out.summary = engine.Summarize(inputs);
  const internal::WindowSnapshot snapshot = engine.Snapshot();
  internal::FillSeries(snapshot.window, snapshot.phase_names, &out.series);
  if (options.trace_steps > 0) {
    out.timeline = std::make_shared<const internal::TraceCapture>(engine.Trace());
  }
  return out;
}

namespace {

// The folder's trace files, in name order.
absl::StatusOr<std::vector<std::string>> TraceFiles(std::string_view folder) {
  std::error_code error;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file(error) &&
        (name.ends_with(".json") || name.ends_with(".json.gz") || name.ends_with(".sqlite"))) {
      files.push_back(entry.path().string());
    }
  }
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat(internal::TerminalSafe(folder), ": cannot list it (", error.message(), ")"));
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat(internal::TerminalSafe(folder),
                                            " has no traces (files ending .json, .json.gz or "
                                            ".sqlite): give a folder of per-rank traces"));
  }
  return files;
}

}  // namespace

absl::StatusOr<std::vector<TraceAnalysis>> AnalyzeJob(std::string_view folder,
                                                      const AnalyzeOptions& options) {
  absl::StatusOr<std::vector<std::string>> files = TraceFiles(folder);
  if (!files.ok()) return files.status();
  std::vector<TraceAnalysis> ranks;
  int world = static_cast<int>(files->size());
  for (const std::string& file : *files) {
    absl::StatusOr<TraceAnalysis> run = AnalyzeTrace(file, options);
    if (!run.ok()) return run.status();  // its message names the file
    if (run->rank < 0) run->rank = static_cast<int>(ranks.size());
    world = std::max({world, run->world_size, run->rank + 1});
    ranks.push_back(*std::move(run));
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const TraceAnalysis& a, const TraceAnalysis& b) { return a.rank < b.rank; });
  std::vector<RankRecord> records;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0 && ranks[i].rank == ranks[i - 1].rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          internal::TerminalSafe(ranks[i - 1].path), " and ", internal::TerminalSafe(ranks[i].path),
          " are both rank ", ranks[i].rank, ": give one trace per rank"));
    }
    // The file stands for the host, which a trace does not record.
    std::string file = std::filesystem::path(ranks[i].path).filename().string();
    size_t cut = std::min<size_t>(file.size(), 63);
    while (cut > 0 && cut < file.size() && (static_cast<unsigned char>(file[cut]) & 0xC0) == 0x80)
      --cut;
    ranks[i].summary.rank = RankIdentity{.rank = ranks[i].rank,
                                         .world_size = world,
                                         .host = internal::TerminalSafe(file.substr(0, cut))};
    records.push_back(RankRecordOf(ranks[i].summary, *ranks[i].summary.rank));
  }
  const RankComparison c = CompareRanks(records, world);
  RanksStats stats{.ranks = c.ranks,
                   .missing = c.missing,
                   .stragglers = c.stragglers,
                   .exchanges = 1,
                   .recent_exchanges = c.ranks.size() >= 3 ? 1 : 0,
                   .straggler_exchanges = c.stragglers.empty() ? 0 : 1};
  for (TraceAnalysis& r : ranks) r.summary.ranks = stats;
  return ranks;
}

}  // namespace gpuscope
