// File: gpuscope/analyze.h
// -----------------------------------------------------------------------------
//
// `AnalyzeTrace()` turns a profiler trace recorded on a real GPU into the
// same `Summary` a live session gives, through the same engine: the trace's
// host ranges become steps and phases, its device records (kernels, copies,
// memsets, synchronizations) the activity timeline that live CUPTI feeds.
// Nothing of the GPU arithmetic is done twice: the trace reader only reads.
//
// Inputs: torch.profiler (Kineto) Chrome-trace JSON, plain or gzip, in both
// formats seen in the wild (a list of events, categories `Operator`,
// `Runtime`, `Kernel`, `Memcpy`, `Memset`; or an object with `traceEvents`,
// categories `cpu_op`, `cuda_runtime`, `kernel`, `gpu_memcpy`, `gpu_memset`,
// `cuda_sync`, `user_annotation`); and Nsight Systems SQLite exports (`nsys
// export --type sqlite`: CUPTI_ACTIVITY_KIND_* tables, NVTX ranges; a
// gpuscope-instrumented script's steps and phases come from gpuscope's own
// NVTX ranges). docs/analyze.md states how steps and phases are read from
// the trace and what differs from a live run.
//
// Example:
//
//   absl::StatusOr<gpuscope::TraceAnalysis> run =
//       gpuscope::AnalyzeTrace("resnet50.pt.trace.json.gz");
//   if (!run.ok()) { std::cerr << run.status().message() << "\n"; return 2; }
//   std::cout << gpuscope::FormatReport(run->summary);
//   for (const gpuscope::Finding& f : gpuscope::Diagnose(run->summary)) ...

#ifndef GPUSCOPE_ANALYZE_H_
#define GPUSCOPE_ANALYZE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpuscope/summary.h"
#include "gpuscope/timeline.h"

namespace gpuscope {
namespace internal {
struct TraceCapture;  // core/trace_steps.h
}  // namespace internal

// AnalyzeOptions
//
// How a trace is read. The defaults suit a torch.profiler trace of a
// training loop under `torch.profiler.schedule`.
struct AnalyzeOptions {
  // The host range that marks one step: a range whose name is this, or
  // begins with it followed by '#' (torch.profiler's `ProfilerStep#N`).
  // Empty: "ProfilerStep", else gpuscope's own NVTX step ranges
  // ("gpuscope:step" in an Nsight Systems export). A trace without such
  // ranges is refused, with the names of the longest ranges it has, so that
  // the user can name one.
  std::string step_name;
  // The whole trace, from its first record to its last, as one step (for a
  // trace without ranges that mark steps); step_name is then not used.
  bool whole_trace = false;
  // The most steps summarized (the last ones); 0: every step the trace
  // holds, up to 65,536.
  int window = 0;
  // The first steps of the trace, left out (a profiler's warm-up steps are
  // already left out of its trace).
  int warmup_steps = 0;
  // An idle gap between two pieces of device work shorter than this is
  // charged to kernel launch (Options' launch threshold).
  int64_t launch_threshold_ns = 20'000;
  // Bounds on what a trace may hold before it is refused: its decompressed
  // size and its events. A trace past either is not read further.
  uint64_t max_bytes = uint64_t{64} << 30;
  uint64_t max_events = 50'000'000;
  // The last steps whose timelines the result keeps for ToChromeTrace()
  // (gpuscope/report.h): step and phase slices, device activity, idle
  // labelled with its cause. 0: none.
  int trace_steps = 0;
};

// TraceAnalysis
//
// A trace read through the engine.
struct TraceAnalysis {
  Summary summary;
  // "Kineto JSON (list of events)", "Kineto JSON", "Nsight Systems SQLite
  // export": which profiler wrote the trace, and in which format.
  std::string format;
  // The summarized steps' times in seconds, in step order (what `gpuscope
  // compare` tests for noise).
  std::vector<double> step_times;
  // What the reader saw and did with it.
  int64_t events = 0;          // trace events read
  int64_t device_records = 0;  // kernels, copies and memsets
  int64_t sync_records = 0;    // host calls that blocked on the device
  // Device records whose correlation id matched no runtime call (Kineto
  // drops some runtime records: normal, their launch time is unknown).
  int64_t unmatched_correlations = 0;
  std::vector<std::string> gpu_names;  // deviceProperties' names, by ordinal
  std::string path;                    // the file read
  // The trace's own rank and world size (Kineto's distributedInfo); -1 when
  // it does not say.
  int rank = -1;
  int world_size = -1;
  // The window's steps, as Session::StepSeries() gives a live run's (for
  // the HTML report's plots).
  std::vector<StepPoint> series;
  // AnalyzeOptions::trace_steps' timelines (null without), for
  // ToChromeTrace(const TraceAnalysis&).
  std::shared_ptr<const internal::TraceCapture> timeline;
};

// AnalyzeTrace()
//
// Reads the trace at `path` and summarizes it. InvalidArgument with one line
// that says what is wrong and what to do: not a trace, a truncated file, no
// steps, a trace past the options' bounds; NotFound when the file is missing.
absl::StatusOr<TraceAnalysis> AnalyzeTrace(std::string_view path,
                                           const AnalyzeOptions& options = {});

// AnalyzeJob()
//
// A folder of per-rank traces (its files ending .json, .json.gz or .sqlite,
// in name order; one file is one rank): each read as AnalyzeTrace() reads
// it, then the ranks compared as a live job's are (CompareRanks(),
// gpuscope/ranks.h). Each summary carries its rank (the trace's
// distributedInfo rank, else its place in name order) and the comparison
// (Summary::ranks, one exchange), so Diagnose() names a straggler, as it
// does live. By rank. InvalidArgument naming the file for a trace that
// cannot be read, or for two traces of one rank; NotFound for a folder
// without traces.
absl::StatusOr<std::vector<TraceAnalysis>> AnalyzeJob(std::string_view folder,
                                                      const AnalyzeOptions& options = {});

}  // namespace gpuscope

#endif  // GPUSCOPE_ANALYZE_H_
