// `gpuscope doctor`'s report as a Python object over the C++ DoctorReport:
// the command line runs, prints, saves and compares it without passing JSON
// text across the boundary; JSON is only what --json prints and --save
// writes (ToJson) and what --baseline reads (DoctorFromJson, once).

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <string>
#include <string_view>
#include <vector>

#include "bound_types.h"
#include "field_properties.h"
#include "gil_released.h"
#include "gpuscope/doctor.h"
#include "gpuscope/report.h"
#include "value_or_throw.h"

namespace py = pybind11;

namespace gpuscope::python {

void AddDoctorTypes(py::module_& m) {
  py::class_<DoctorCheck>(m, "DoctorCheck", "One check of gpuscope doctor.")
      .def_property_readonly(
          "subject", [](const DoctorCheck& c) { return Str(c.subject); }, "\"host\", \"gpu0\", ...")
      .def_property_readonly(
          "id", [](const DoctorCheck& c) { return Str(c.id); }, "Stable: \"pcie_link\", ...")
      .def_property_readonly(
          "status", [](const DoctorCheck& c) { return Str(CheckStatusName(c.status)); },
          "\"OK\", \"WARN\" or \"FAIL\".")
      .def_property_readonly(
          "value", [](const DoctorCheck& c) { return Str(c.value); }, "What was seen.")
      .def_property_readonly(
          "reason", [](const DoctorCheck& c) { return Str(c.reason); },
          "Why not OK and what to do; empty when OK.")
      .def(
          "__eq__", [](const DoctorCheck& a, const DoctorCheck& b) { return a == b; },
          py::is_operator());

  py::class_<DoctorReport>(m, "DoctorReport",
                           "What gpuscope doctor found on this node (run_doctor()).")
      .def_static(
          "from_json", [](std::string_view text) { return ValueOrThrow(DoctorFromJson(text)); },
          py::arg("json_text"),
          "Reads a report written by to_json() (gpuscope doctor --save): ValueError naming what is "
          "wrong for text that is not one, GpuscopeError for another schema version.")
      .def_property_readonly("version", [](const DoctorReport& r) { return Str(r.version); })
      .def_property_readonly("hostname", [](const DoctorReport& r) { return Str(r.hostname); })
      .def_property_readonly(
          "driver_version", [](const DoctorReport& r) { return Str(r.driver_version); },
          "\"\" without a driver.")
      .def_readonly("cuda_driver_version", &DoctorReport::cuda_driver_version,
                    "-1 without a driver.")
      .def_readonly("gpu_count", &DoctorReport::gpu_count)
      .def_readonly("checks", &DoctorReport::checks, "The DoctorChecks, in the order printed.")
      .def_property_readonly(
          "facts",
          [](const DoctorReport& r) {
            py::typing::Dict<py::str, py::str> out;
            for (const auto& [k, v] : r.facts) out[Str(k)] = Str(v);
            return out;
          },
          "The node's stable facts (\"gpu0.pcie_link\" -> \"Gen4 x16\"): what a baseline compares.")
      .def("has_failures", &DoctorReport::has_failures, "Whether a check failed.")
      .def(
          "to_json", [](const DoctorReport& r) { return ToJson(r); },
          "The report as versioned JSON (what --json prints and --save writes).")
      .def(
          "format", [](const DoctorReport& r, bool color) { return FormatDoctor(r, color); },
          py::arg("color") = false,
          "The table gpuscope doctor prints (ANSI colours with color=True).")
      .def(
          "baseline_diff",
          [](const DoctorReport& baseline, const DoctorReport& now) {
            return DoctorBaselineDiff(baseline, now);
          },
          py::arg("now"),
          "One line per fact of this report, as a baseline, that `now` lacks or has changed; empty "
          "when the node is as it was.")
      .def(
          "__eq__", [](const DoctorReport& a, const DoctorReport& b) { return a == b; },
          py::is_operator());

  m.def(
      "run_doctor",
      []() {
        GilReleased released;  // it reads NVML and /proc: other threads may run meanwhile
        return RunDoctor();
      },
      "Runs gpuscope doctor's checks now (read-only); a DoctorReport.");
}

}  // namespace gpuscope::python
