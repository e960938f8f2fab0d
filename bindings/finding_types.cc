// gs.Finding (a Python view over the C++ Finding), diagnose(), and the run
// file that `Session.save()` writes: its summary and findings are written
// once, by the C++ writers.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bound_types.h"
#include "field_properties.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/report.h"
#include "gpuscope/summary.h"

namespace py = pybind11;

namespace gpuscope::python {
namespace {

constexpr char kFindingDoc[] =
    "One diagnosis: ``id`` (stable), ``title``, ``severity`` (\"info\", \"moderate\", \"high\"), "
    "``share`` of step time it explains, ``evidence`` (name -> number), ``recommendation``, "
    "``confidence`` and ``source``.";

Severity SeverityOf(std::string_view name) {
  for (Severity s : {Severity::kInfo, Severity::kModerate, Severity::kHigh}) {
    if (SeverityName(s) == name) return s;
  }
  throw py::value_error("severity must be 'info', 'moderate' or 'high'");
}

// Evidence is a list of (name, number) in C++ and a dict in Python; a name
// given twice keeps its last number, as the JSON object read back does.
py::typing::Dict<py::str, py::float_> EvidenceDict(const Finding& f) {
  py::typing::Dict<py::str, py::float_> out;
  for (const auto& [name, value] : f.evidence) out[Str(name)] = py::float_(value);
  return out;
}

Finding MakeFinding(std::string id, std::string title, std::string_view severity, double share,
                    const py::typing::Dict<py::str, py::float_>& evidence,
                    std::string recommendation, std::string confidence, std::string source) {
  Finding f;
  f.id = std::move(id);
  f.title = std::move(title);
  f.severity = SeverityOf(severity);
  f.share = share;
  for (const auto& [name, value] : evidence)
    f.evidence.emplace_back(name.cast<std::string>(), value.cast<double>());
  f.recommendation = std::move(recommendation);
  f.confidence = std::move(confidence);
  f.source = std::move(source);
  return f;
}

// `tail` (JSON text as JsonWriter writes it, so no newline inside a string)
// appended with every line after the first indented by `indent` more.
void AppendIndented(std::string* out, std::string_view tail, std::string_view indent) {
  while (!tail.empty() && tail.back() == '\n') tail.remove_suffix(1);
  for (char c : tail) {
    out->push_back(c);
    if (c == '\n') out->append(indent);
  }
}

// The run file: `head`, a JSON object as json.dumps(..., indent=2) writes it
// (the schema and the metadata, from Python), with "summary" and "findings"
// appended as C++ writes them. The same document as writing them all with
// one json.dumps, without the summary and findings going through Python.
std::string RunFileJson(std::string_view head, const Summary& summary,
                        const std::vector<Finding>& findings) {
  const size_t close = head.find_last_not_of(" \t\r\n");
  if (head.empty() || head.front() != '{' || close == std::string_view::npos ||
      head[close] != '}') {
    throw py::value_error("the run file's head must be a JSON object");
  }
  std::string_view members = head.substr(0, close);  // without the closing brace
  members = members.substr(0, members.find_last_not_of(" \t\r\n") + 1);
  std::string out(members);
  out.append(members == "{" ? "\n" : ",\n");
  out.append("  \"summary\": ");
  AppendIndented(&out, ToJson(summary), "  ");
  out.append(",\n  \"findings\": ");
  AppendIndented(&out, ToJson(findings), "  ");
  out.append("\n}\n");
  return out;
}

}  // namespace

void AddFindingTypes(py::module_& m) {
  using Text = py::str (*)(const Finding&);
  // The text attributes; with share and evidence, in the order of the
  // dataclass this type replaces.
  static const std::pair<const char*, Text> kText[] = {
      {"id", [](const Finding& f) { return Str(f.id); }},
      {"title", [](const Finding& f) { return Str(f.title); }},
      {"severity", [](const Finding& f) { return Str(SeverityName(f.severity)); }},
      {"recommendation", [](const Finding& f) { return Str(f.recommendation); }},
      {"confidence", [](const Finding& f) { return Str(f.confidence); }},
      {"source", [](const Finding& f) { return Str(f.source); }},
  };
  py::class_<Finding> finding(m, "Finding", kFindingDoc);
  finding.attr("__module__") = "gpuscope";
  finding
      .def(py::init(&MakeFinding), py::arg("id"), py::arg("title"), py::arg("severity"),
           py::arg("share"), py::arg("evidence") = py::typing::Dict<py::str, py::float_>(),
           py::arg("recommendation") = "", py::arg("confidence") = "", py::arg("source") = "")
      .def("__str__",
           [](const Finding& f) {
             return py::str("[{}] {}").format(Str(SeverityName(f.severity)), Str(f.title));
           })
      .def(py::pickle(
          [](const Finding& f) {
            return py::make_tuple(f.id, f.title, SeverityName(f.severity), f.share, EvidenceDict(f),
                                  f.recommendation, f.confidence, f.source);
          },
          [](const py::tuple& t) {
            return MakeFinding(
                t[0].cast<std::string>(), t[1].cast<std::string>(), t[2].cast<std::string>(),
                t[3].cast<double>(), t[4].cast<py::typing::Dict<py::str, py::float_>>(),
                t[5].cast<std::string>(), t[6].cast<std::string>(), t[7].cast<std::string>());
          }));
  std::vector<std::string> names;
  for (const auto& [name, get] : kText) {
    finding.def_property_readonly(name, get);
    names.emplace_back(name);
    if (names.size() == 3) {  // after severity
      finding.def_property_readonly("share", [](const Finding& f) { return py::float_(f.share); });
      finding.def_property_readonly("evidence", &EvidenceDict);
      names.insert(names.end(), {"share", "evidence"});
    }
  }
  // Not hashable (evidence is a dict), as the dataclass it replaces.
  AddValueMethods(finding, std::move(names), /*hashable=*/false);

  m.def(
      "diagnose", [](const Summary& summary) { return Diagnose(summary); }, py::arg("summary"),
      "The findings for a summary, ranked by the share of step time they explain.");
  m.def("_run_file_json", &RunFileJson, py::arg("head"), py::arg("summary"), py::arg("findings"),
        "A run file's text: `head` (a JSON object as json.dumps(indent=2) writes it) with the "
        "summary and findings appended as the C++ core writes them.");
}

}  // namespace gpuscope::python
