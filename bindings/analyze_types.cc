// gpuscope.analyze_trace()'s C++ side: a recorded trace through the engine
// (gpuscope/analyze.h), the GIL released while it reads.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>

#include "bound_types.h"
#include "gpuscope/analyze.h"
#include "gpuscope/report.h"
#include "value_or_throw.h"

namespace py = pybind11;

namespace gpuscope::python {

void AddAnalyzeTypes(py::module_& m) {
  py::class_<TraceAnalysis>(m, "TraceAnalysis",
                            "A recorded trace read through the engine (gpuscope.analyze_trace).")
      .def_readonly("summary", &TraceAnalysis::summary)
      .def_readonly("format", &TraceAnalysis::format, "Which profiler wrote it, in which format.")
      .def_readonly("step_times", &TraceAnalysis::step_times,
                    "The summarized steps' times in seconds, in step order.")
      .def_readonly("events", &TraceAnalysis::events)
      .def_readonly("device_records", &TraceAnalysis::device_records)
      .def_readonly("sync_records", &TraceAnalysis::sync_records)
      .def_readonly("unmatched_correlations", &TraceAnalysis::unmatched_correlations,
                    "Device records whose launching call is not in the trace.")
      .def_readonly("gpu_names", &TraceAnalysis::gpu_names)
      .def_property_readonly(
          "_path", [](const TraceAnalysis& run) { return py::bytes(run.path); },
          "The file read, as bytes (os.fsdecode() gives the name).")
      .def_readonly("rank", &TraceAnalysis::rank, "The rank it was taken as (a folder's).")
      .def("_series_json", [](const TraceAnalysis& run) { return ToJson(run.series); })
      .def(
          "chrome_trace", [](const TraceAnalysis& run) { return ToChromeTrace(run); },
          "The kept steps' timelines (analyze_trace(trace_steps=N)) as a Chrome trace JSON "
          "text; an empty trace when none were kept.");
  m.def(
      "_analyze_trace",
      [](const std::string& path, const std::string& step_name, bool whole_trace, int window,
         int warmup_steps, int64_t launch_threshold_ns, uint64_t max_bytes, uint64_t max_events,
         int trace_steps) {
        AnalyzeOptions options{.step_name = step_name,
                               .whole_trace = whole_trace,
                               .window = window,
                               .warmup_steps = warmup_steps,
                               .launch_threshold_ns = launch_threshold_ns,
                               .max_bytes = max_bytes,
                               .max_events = max_events,
                               .trace_steps = trace_steps};
        absl::StatusOr<TraceAnalysis> run;
        {
          py::gil_scoped_release unlocked;
          run = AnalyzeTrace(path, options);
        }
        ThrowIfError(run.status());
        return std::move(*run);
      },
      py::arg("path"), py::arg("step_name"), py::arg("whole_trace"), py::arg("window"),
      py::arg("warmup_steps"), py::arg("launch_threshold_ns"), py::arg("max_bytes"),
      py::arg("max_events"), py::arg("trace_steps") = 0);
  m.def(
      "_analyze_job",
      [](const std::string& folder, const std::string& step_name, bool whole_trace, int window,
         int warmup_steps, int64_t launch_threshold_ns, uint64_t max_bytes, uint64_t max_events,
         int trace_steps) {
        AnalyzeOptions options{.step_name = step_name,
                               .whole_trace = whole_trace,
                               .window = window,
                               .warmup_steps = warmup_steps,
                               .launch_threshold_ns = launch_threshold_ns,
                               .max_bytes = max_bytes,
                               .max_events = max_events,
                               .trace_steps = trace_steps};
        absl::StatusOr<std::vector<TraceAnalysis>> job;
        {
          py::gil_scoped_release unlocked;
          job = AnalyzeJob(folder, options);
        }
        ThrowIfError(job.status());
        return std::move(*job);
      },
      py::arg("folder"), py::arg("step_name"), py::arg("whole_trace"), py::arg("window"),
      py::arg("warmup_steps"), py::arg("launch_threshold_ns"), py::arg("max_bytes"),
      py::arg("max_events"), py::arg("trace_steps") = 0);
}

}  // namespace gpuscope::python
