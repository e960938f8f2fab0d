// gpuscope._gpuscope: the extension module behind the `gpuscope` package.
//
// The hot types (_Session and its scopes) are declared in hot_types.h (defined in the hot_*.cc
// files), written against the C API; everything else, which is off the training loop's path, is
// bound with pybind11: summaries and findings (summary_types.cc, finding_types.cc) and the doctor's
// report (doctor_types.cc) as objects over the C++ ones, the test helpers here.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "bound_types.h"
#include "core/bootstrap.h"
#include "gpuscope/clock.h"
#include "gpuscope/report.h"
#include "gpuscope/testing.h"
#include "gpuscope/version.h"
#include "hot_types.h"
#include "status_to_python.h"
#include "type_hints.h"

namespace py = pybind11;

namespace gpuscope::python {
namespace {

PyObject* g_error = nullptr;

}  // namespace

PyObject* GpuscopeError() { return g_error; }

}  // namespace gpuscope::python

PYBIND11_MODULE(_gpuscope, m) {
  using namespace gpuscope;
  using namespace gpuscope::python;
  m.doc() = "gpuscope's C++ core: sessions, scopes, summaries, diagnosis.";
  m.attr("__version__") = GPUSCOPE_VERSION;

  g_error = PyErr_NewExceptionWithDoc(
      "gpuscope.GpuscopeError",
      "A gpuscope call was misused (a scope ended out of order, a step inside a step, a second "
      "recording thread, ...). The message says what to do.",
      PyExc_RuntimeError, nullptr);
  if (g_error == nullptr) throw py::error_already_set();
  m.add_object("GpuscopeError", py::handle(g_error));

  if (!AddHotTypes(m.ptr())) throw py::error_already_set();

  py::class_<ManualClock, std::shared_ptr<ManualClock>>(
      m, "ManualClock", "A clock that moves only when told to: exact step times in tests.")
      .def(py::init<int64_t>(), py::arg("start_ns") = 1'000'000'000)
      .def("advance", &ManualClock::Advance, py::arg("ns"), "Moves the clock forward by ns.")
      .def_property_readonly("now_ns", &ManualClock::NowNs);

  // The package's callbacks (python/gpuscope): any object is taken, as with
  // py::object; the hints say which callables the package passes.
  m.def(
      "_set_decorator",
      [](Hinted<"collections.abc.Callable[[typing.Any, collections.abc.Callable[..., typing.Any]],"
                " collections.abc.Callable[..., typing.Any]]">
             fn) { SetDecorator(fn.ptr()); },
      py::arg("fn"));
  m.def(
      "_set_stream_getter",
      [](Hinted<"collections.abc.Callable[[], int | None]"> fn) { SetStreamGetter(fn.ptr()); },
      py::arg("fn"));
  m.def(
      "_set_loop_range",
      [](Hinted<"collections.abc.Callable[[typing.Any, int], tuple[int, int] | None]"> fn) {
        SetLoopRange(fn.ptr());
      },
      py::arg("fn"));
  m.def(
      "_set_loader_note",
      [](Hinted<"collections.abc.Callable[[typing.Any, typing.Any], None]"> fn) {
        SetLoaderNote(fn.ptr());
      },
      py::arg("fn"));
  m.def(
      "_set_oom_details",
      [](Hinted<"collections.abc.Callable[[BaseException], tuple[int, float | None, float | None, "
                "float | None, float | None, str, str] | None]">
             fn) { SetOomDetails(fn.ptr()); },
      py::arg("fn"));
  m.def(
      "_add_loader_workers", [](const std::vector<int>& pids) { AddLoaderWorkers(pids); },
      py::arg("pids"),
      "Names the data loader's worker processes (pids; [] for a loader without workers) so "
      "that the telemetry counts their CPU as the loader's and other child processes apart.");
  m.def(
      "_log_once",
      [](const std::string& key, const std::string& message) {
        internal::LogOnce(key, LogLevel::kWarning, message);
      },
      py::arg("key"), py::arg("message"),
      "Says `message` through gpuscope's log (stderr, or the sink set), the first time `key` is "
      "seen in this process.");
  m.def(
      "_log_warning",
      [](const std::string& message) { internal::Log(LogLevel::kWarning, message); },
      py::arg("message"), "Says `message` through gpuscope's log (stderr, or the sink set).");
  m.def(
      "escape_for_terminal", [](py::bytes text) { return EscapeForTerminal(std::string(text)); },
      py::arg("text"),
      "Text (UTF-8 bytes) made safe to print on a terminal: control and invisible characters "
      "escaped, invalid UTF-8 as \\xNN.");

  // The noise test of `gpuscope compare` (python/gpuscope/_noise.py).
  m.def(
      "_bootstrap_block_length",
      [](const std::vector<double>& xs) { return internal::BootstrapBlockLength(xs); },
      py::arg("xs"), "The circular block bootstrap's block length for step times xs.");
  m.def(
      "_bootstrap_resamples",
      [](const std::vector<double>& xs, int block, py::bytes words_le, double q) {
        std::string bytes(words_le);
        std::vector<uint32_t> words(bytes.size() / 4);
        for (size_t i = 0; i < words.size(); ++i) {
          const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + 4 * i;
          words[i] =
              uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
        }
        py::gil_scoped_release unlocked;
        return internal::BootstrapResamples(xs, block, words, q);
      },
      py::arg("xs"), py::arg("block"), py::arg("words"), py::arg("q"),
      "The statistic (the mean for q < 0, else the q-quantile) of each circular block resample "
      "of xs, block starts from words (little-endian 32-bit).");

  py::class_<SimulatedDevice, std::shared_ptr<SimulatedDevice>> sim(
      m, "SimulatedDevice",
      "A GPU model for tests and demos without a GPU: in-order streams, kernels of given "
      "durations, markers that complete as CUDA events do, injectable faults. Times in ns on "
      "the session's clock.");
  sim.def(py::init([](int64_t marker_latency_ns, uint32_t initial_markers, uint32_t max_markers,
                      bool activity, uint32_t activity_capacity, uint64_t memory_bytes,
                      uint64_t memory_block_bytes) {
            if (initial_markers == 0 || max_markers < initial_markers) {
              throw py::value_error("need 0 < initial_markers <= max_markers");
            }
            if (memory_bytes == 0 || memory_block_bytes == 0) {
              throw py::value_error("memory_bytes and memory_block_bytes must be > 0");
            }
            return std::make_shared<SimulatedDevice>(
                SimulatedDevice::Config{marker_latency_ns, initial_markers, max_markers, activity,
                                        activity_capacity, memory_bytes, memory_block_bytes});
          }),
          py::kw_only(), py::arg("marker_latency_ns") = 0, py::arg("initial_markers") = 256,
          py::arg("max_markers") = 1 << 16, py::arg("activity") = false,
          py::arg("activity_capacity") = 1 << 20, py::arg("memory_bytes") = uint64_t{80} << 30,
          py::arg("memory_block_bytes") = uint64_t{2} << 20)
      .def("allocate", &SimulatedDevice::Allocate, py::arg("bytes"), py::arg("device") = 0,
           "The modelled caching allocator takes `bytes` on `device`: the block's id, or 0 for an "
           "out-of-memory error (after an allocation retry when it had a cache to free). The "
           "session attached gets the allocator's numbers at the clock's time.")
      .def("free", &SimulatedDevice::Free, py::arg("block"), py::arg("device") = 0,
           "Returns an allocated block to the allocator's cache (it stays reserved).")
      .def("empty_cache", &SimulatedDevice::EmptyCache, py::arg("device") = 0,
           "Gives the allocator's cache back to the device.")
      .def(
          "launch_copy",
          [](SimulatedDevice& d, const std::string& kind, uint64_t bytes, int64_t duration_ns,
             bool pageable, uint64_t stream) {
            SimulatedDevice::Copy k;
            if (kind == "h2d") {
              k = SimulatedDevice::Copy::kHostToDevice;
            } else if (kind == "d2h") {
              k = SimulatedDevice::Copy::kDeviceToHost;
            } else if (kind == "d2d") {
              k = SimulatedDevice::Copy::kDeviceToDevice;
            } else {
              throw py::value_error("kind must be 'h2d', 'd2h' or 'd2d'");
            }
            d.LaunchCopy(k, bytes, duration_ns, pageable, stream);
          },
          py::arg("kind"), py::arg("bytes"), py::arg("duration_ns"), py::arg("pageable") = false,
          py::arg("stream") = 0, "Enqueues a copy ('h2d', 'd2h', 'd2d') on stream now.")
      .def("launch_memset", &SimulatedDevice::LaunchMemset, py::arg("bytes"),
           py::arg("duration_ns"), py::arg("stream") = 0, "Enqueues a memset on stream now.")
      .def("synchronize", &SimulatedDevice::Synchronize, py::arg("stream") = 0,
           "The host blocks until stream's work is done: records the sync and returns the ns to "
           "wait (advance the clock by it).")
      .def_property_readonly("activity_dropped", &SimulatedDevice::activity_dropped)
      .def(
          "launch",
          [](SimulatedDevice& d, int64_t duration_ns, uint64_t stream, const std::string& name) {
            d.Launch(duration_ns, stream, name);
          },
          py::arg("duration_ns"), py::arg("stream") = 0, py::arg("name") = "",
          "Enqueues a kernel of duration_ns on stream now (from the recording thread); `name`, "
          "as CUPTI would report it, says what the kernel is (an FP32 GEMM, an NCCL collective).")
      .def("place_stream", &SimulatedDevice::PlaceStream, py::arg("stream"), py::arg("device"),
           "Puts `stream` on device ordinal `device` (streams start on device 0).")
      .def("device_busy_between", &SimulatedDevice::DeviceBusyBetween, py::arg("begin_ns"),
           py::arg("end_ns"), py::arg("device") = 0,
           "Ground truth: ns of [begin_ns, end_ns) in which any stream of `device` ran a kernel.")
      .def("busy_between", &SimulatedDevice::BusyBetween, py::arg("begin_ns"), py::arg("end_ns"),
           py::arg("stream") = 0, "Ground truth: ns of [begin, end) with a kernel running.")
      .def(
          "inject_fault",
          [](SimulatedDevice& d, const std::string& fault) {
            static const std::pair<const char*, SimulatedDevice::Fault> kFaults[] = {
                {"none", SimulatedDevice::Fault::kNone},
                {"no_driver", SimulatedDevice::Fault::kNoDriver},
                {"sticky_error", SimulatedDevice::Fault::kStickyError},
                {"context_destroyed", SimulatedDevice::Fault::kContextDestroyed},
                {"activity_refused", SimulatedDevice::Fault::kActivityRefused}};
            for (const auto& [name, value] : kFaults) {
              if (fault == name) return d.InjectFault(value);
            }
            throw py::value_error(
                "fault must be 'none', 'no_driver', 'sticky_error', 'context_destroyed' or "
                "'activity_refused'");
          },
          py::arg("fault"))
      .def_property_readonly("live_markers", &SimulatedDevice::live_markers)
      .def_property_readonly("markers_recorded", &SimulatedDevice::markers_recorded)
      .def_property_readonly("markers_created", &SimulatedDevice::markers_created);

  AddSummaryTypes(m);
  AddFindingTypes(m);
  AddDoctorTypes(m);
  AddAnalyzeTypes(m);
}
