// The parts of gpuscope._gpuscope bound with pybind11 over the C++ objects,
// each added by its own source file. Summaries, findings and doctor reports
// cross the C++/Python boundary as these objects, never as JSON text.

#ifndef GPUSCOPE_BINDINGS_BOUND_TYPES_H_
#define GPUSCOPE_BINDINGS_BOUND_TYPES_H_

#include <pybind11/pybind11.h>

namespace gpuscope::python {

// Summary and its parts (Quantiles, PhaseStats, DeviceStats, ActivityStats,
// GpuTelemetry, TelemetryStats), summarize(), format_report() and
// prometheus_text(). summary_types.cc.
void AddSummaryTypes(pybind11::module_& m);

// Finding, diagnose() and _run_file_json(). finding_types.cc.
void AddFindingTypes(pybind11::module_& m);

// DoctorCheck, DoctorReport and run_doctor(). doctor_types.cc.
void AddDoctorTypes(pybind11::module_& m);
void AddAnalyzeTypes(pybind11::module_& m);

}  // namespace gpuscope::python

#endif  // GPUSCOPE_BINDINGS_BOUND_TYPES_H_
