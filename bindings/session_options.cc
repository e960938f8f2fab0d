// The table of gpuscope.Session's options (session_options.h): each keyword
// with its annotation, default, accepted range or values, doc, `gpuscope run`
// flag, and the converters between its Python value and its Options field.

#include "session_options.h"

#include <pybind11/pybind11.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "gpuscope/clock.h"
#include "gpuscope/options.h"
#include "gpuscope/phase.h"
#include "gpuscope/report.h"
#include "gpuscope/testing.h"

namespace gpuscope::python::hot {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A default as Python sees it.
struct Default {
  enum Kind : uint8_t { kNone, kBool, kInt, kFloat, kStr } kind = kNone;
  double number = 0;
  const char* text = nullptr;
};
constexpr Default NoneDefault() { return {}; }
constexpr Default BoolDefault(bool b) { return {Default::kBool, b ? 1.0 : 0.0, nullptr}; }
constexpr Default IntDefault(int n) { return {Default::kInt, static_cast<double>(n), nullptr}; }
constexpr Default FloatDefault(double x) { return {Default::kFloat, x, nullptr}; }
constexpr Default StrDefault(const char* s) { return {Default::kStr, 0, s}; }

struct Row;
using Setter = bool (*)(PyObject* value, const Row& row, Options* options, HeldOptions* held);
using Getter = PyObject* (*)(const Options& options);

struct Row {
  const char* name;  // the keyword
  const char* type;  // its annotation
  Default default_value;
  bool has_range;  // numbers: [lo, hi] (the doc says where a bound is open)
  double lo;
  double hi;
  const char* const* values;  // accepted values (nullptr-terminated), or nullptr
  const char* unit;           // what the number counts, for `gpuscope run`'s messages
  const char* flag;           // `gpuscope run`'s --flag: its metavar; nullptr: no flag
  const char* flag_help;
  const char* doc;  // the docstring's text for it
  Setter set;
  Getter get;
};

// ---- Converters: a Python value into Options (false with an exception).

// As PyArg_ParseTuple's "i": an int (or __index__), a C int.
bool IntOf(PyObject* value, int* out) {
  const long v = PyLong_AsLong(value);  // TypeError for a float or a str
  if (v == -1 && PyErr_Occurred()) return false;
  if (v > INT_MAX || v < INT_MIN) {
    PyErr_SetString(PyExc_OverflowError, v > INT_MAX ? "signed integer is greater than maximum"
                                                     : "signed integer is less than minimum");
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

template <int Options::* Field>
bool SetInt(PyObject* value, const Row&, Options* options, HeldOptions*) {
  return IntOf(value, &(options->*Field));
}

template <int Options::* Field>
PyObject* GetInt(const Options& options) {
  return PyLong_FromLong(options.*Field);
}

bool SetEnabled(PyObject* value, const Row&, Options* options, HeldOptions*) {
  const int truth = PyObject_IsTrue(value);
  if (truth < 0) return false;
  options->enabled = truth != 0;
  return true;
}

PyObject* GetEnabled(const Options& options) { return PyBool_FromLong(options.enabled); }

// FLOPs: None -> 0 (not given); an int or a float (Validate() checks the value).
template <double Options::* Field>
bool SetFlops(PyObject* value, const Row& row, Options* options, HeldOptions*) {
  if (value == Py_None) {
    options->*Field = 0;
    return true;
  }
  if (PyBool_Check(value) || !(PyLong_Check(value) || PyFloat_Check(value))) {
    PyErr_Format(PyExc_TypeError, "%s must be a number or None, not %.100s", row.name,
                 Py_TYPE(value)->tp_name);
    return false;
  }
  const double v = PyFloat_AsDouble(value);  // OverflowError for an int too large
  if (v == -1.0 && PyErr_Occurred()) return false;
  options->*Field = v;
  return true;
}

template <double Options::* Field>
PyObject* GetDouble(const Options& options) {
  return PyFloat_FromDouble(options.*Field);
}

constexpr const char* kPrecisionNames[] = {"bf16", "fp16", "tf32", "fp32", "fp8", nullptr};

bool SetPrecision(PyObject* value, const Row& row, Options* options, HeldOptions*) {
  if (!PyUnicode_Check(value)) {
    PyErr_Format(PyExc_TypeError, "Session() argument '%s' must be str, not %.100s", row.name,
                 Py_TYPE(value)->tp_name);
    return false;
  }
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(value, &size);
  if (text == nullptr) return false;
  for (Precision p :
       {Precision::kBf16, Precision::kFp16, Precision::kTf32, Precision::kFp32, Precision::kFp8}) {
    if (std::string_view(text, static_cast<size_t>(size)) == PrecisionName(p)) {
      options->peak_precision = p;
      return true;
    }
  }
  PyErr_Format(PyExc_ValueError,
               "peak_precision='%.40s': use \"bf16\", \"fp16\", \"tf32\", \"fp32\" or "
               "\"fp8\" (the precision the model's matrix multiplies run in)",
               text);
  return false;
}

PyObject* GetPrecision(const Options& options) {
  return PyUnicode_FromString(PrecisionName(options.peak_precision));
}

// A str, or None (Options' empty string).
template <std::string Options::* Field>
bool SetOptionalStr(PyObject* value, const Row& row, Options* options, HeldOptions*) {
  if (value == Py_None) return true;
  if (!PyUnicode_Check(value)) {
    PyErr_Format(PyExc_TypeError, "Session() argument '%s' must be str or None, not %.100s",
                 row.name, Py_TYPE(value)->tp_name);
    return false;
  }
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(value, &size);
  if (text == nullptr) return false;
  if (std::strlen(text) != static_cast<size_t>(size)) {
    PyErr_SetString(PyExc_ValueError, "embedded null character");
    return false;
  }
  (options->*Field).assign(text, static_cast<size_t>(size));
  return true;
}

template <std::string Options::* Field>
PyObject* GetOptionalStr(const Options& options) {
  const std::string& text = options.*Field;
  if (text.empty()) Py_RETURN_NONE;
  return PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
}

// The run id: as SetOptionalStr, at most kMaxPrometheusLabelBytes bytes (it
// is a label value).
bool SetRunId(PyObject* value, const Row& row, Options* options, HeldOptions* held) {
  if (!SetOptionalStr<&Options::run_id>(value, row, options, held)) return false;
  if (options->run_id.size() > kMaxPrometheusLabelBytes) {
    PyErr_Format(PyExc_ValueError, "Session() argument '%s' must be at most %d bytes in UTF-8",
                 row.name, static_cast<int>(kMaxPrometheusLabelBytes));
    return false;
  }
  return true;
}

// Seconds, or None (Options' 0). A value of the wrong type is a ValueError, as
// it always was for these two.
bool SecondsOf(PyObject* value, const Row& row, const char* rule, double* out) {
  if (value == Py_None) {
    *out = 0;
    return true;
  }
  double v = std::nan("");
  if (!PyBool_Check(value) && (PyLong_Check(value) || PyFloat_Check(value))) {
    v = PyFloat_AsDouble(value);
    if (v == -1.0 && PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return false;
      PyErr_Clear();
      v = kInf;  // an int too large: not finite, refused below
    }
  }
  // lo is inclusive for the interval (0.1) and open for the timeout (0).
  const bool in_range = std::isfinite(v) && (row.lo > 0 ? v >= row.lo : v > row.lo);
  if (!in_range) {
    PyObject* repr = PyObject_Repr(value);
    if (repr == nullptr) return false;
    const char* text = PyUnicode_AsUTF8(repr);
    if (text != nullptr) {
      PyErr_SetString(PyExc_ValueError, absl::StrCat(row.name, "=", text, ": ", rule).c_str());
    }
    Py_DECREF(repr);
    return false;
  }
  *out = v;
  return true;
}

bool SetRankInterval(PyObject* value, const Row& row, Options* options, HeldOptions*) {
  const std::string rule = absl::StrCat("use a number of seconds, at least ", kMinRankIntervalS,
                                        ", or None to exchange only in sync_ranks()");
  return SecondsOf(value, row, rule.c_str(), &options->rank_interval_s);
}

bool SetRankTimeout(PyObject* value, const Row& row, Options* options, HeldOptions*) {
  return SecondsOf(value, row, "use a number of seconds above 0", &options->rank_timeout_s);
}

template <double Options::* Field>
PyObject* GetSecondsOrNone(const Options& options) {
  if (options.*Field == 0) Py_RETURN_NONE;
  return PyFloat_FromDouble(options.*Field);
}

bool SetStallAfter(PyObject* value, const Row& row, Options* options, HeldOptions*) {
  if (value == Py_None) {
    options->stall_after_s = 0;
    return true;
  }
  double v = PyFloat_AsDouble(value);  // an int or a float; TypeError otherwise
  if (v == -1.0 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return false;
    PyErr_Clear();
    v = kInf;  // an int too large for a double: no limit in practice
  }
  if (!(v > 0)) {  // NaN, 0 and below
    PyObject* repr = PyObject_Repr(value);
    if (repr == nullptr) return false;
    const char* text = PyUnicode_AsUTF8(repr);
    if (text != nullptr) {
      PyErr_SetString(PyExc_ValueError,
                      absl::StrCat(row.name, "=", text,
                                   ": use a number of seconds above 0, float('inf') for no stall "
                                   "watch, or None for a limit from the job's own step times")
                          .c_str());
    }
    Py_DECREF(repr);
    return false;
  }
  options->stall_after_s = v;
  return true;
}

bool SetOnStall(PyObject* value, const Row&, Options*, HeldOptions* held) {
  if (value != Py_None && PyCallable_Check(value) == 0) {
    PyErr_SetString(PyExc_TypeError, "on_stall must be None or a callable taking a gpuscope.Stall");
    return false;
  }
  held->on_stall = value;
  return true;
}

PyObject* GetNone(const Options&) { Py_RETURN_NONE; }

bool SetClock(PyObject* value, const Row&, Options* options, HeldOptions*) {
  if (value == Py_None) return true;
  try {
    options->clock = pybind11::cast<std::shared_ptr<ManualClock>>(pybind11::handle(value));
  } catch (const pybind11::cast_error&) {
    PyErr_SetString(PyExc_TypeError, "clock must be a gpuscope.testing.ManualClock or None");
    return false;
  }
  return true;
}

PyObject* GetClock(const Options& options) {
  auto manual = std::dynamic_pointer_cast<ManualClock>(options.clock);
  if (manual == nullptr) Py_RETURN_NONE;
  try {
    return pybind11::cast(manual).release().ptr();
  } catch (pybind11::error_already_set& e) {
    e.restore();
    return nullptr;
  }
}

bool SetStream(PyObject* value, const Row&, Options*, HeldOptions* held) {
  held->stream = value;  // SessionInit: with the simulated device it decides
  return true;
}

PyObject* GetStream(const Options& options) {
  if (options.stream == kNoStream) Py_RETURN_NONE;
  return PyLong_FromUnsignedLongLong(options.stream);
}

bool SetSimulated(PyObject* value, const Row&, Options*, HeldOptions* held) {
  held->simulated = value;  // SessionInit: it makes one for True
  return true;
}

PyObject* GetSimulated(const Options& options) {
  if (options.simulated_device == nullptr) Py_RETURN_NONE;
  try {
    return pybind11::cast(options.simulated_device).release().ptr();
  } catch (pybind11::error_already_set& e) {
    e.restore();
    return nullptr;
  }
}

bool SetCupti(PyObject* value, const Row&, Options* options, HeldOptions*) {
  if (value == Py_True) {
    options->cupti = Cupti::kOn;
  } else if (value == Py_False) {
    options->cupti = Cupti::kOff;
  } else if (value == Py_None) {
    options->cupti = Cupti::kAuto;
  } else {
    PyErr_SetString(PyExc_TypeError,
                    "cupti must be None (use CUPTI when it can be shared), True (also older CUPTI, "
                    "which then blocks torch.profiler until release_cupti()) or False");
    return false;
  }
  return true;
}

PyObject* GetCupti(const Options& options) {
  switch (options.cupti) {
    case Cupti::kOn: Py_RETURN_TRUE;
    case Cupti::kOff: Py_RETURN_FALSE;
    case Cupti::kAuto: break;
  }
  Py_RETURN_NONE;
}

// ---- The table. The order is the signature's; only the first (window) may be
// given by position.
const Row kRows[] = {
    {"window", "int", IntDefault(512), true, 1, kMaxWindow, nullptr, "steps", nullptr, nullptr,
     "completed steps kept for exact quantiles and the phase breakdown (the last ``window`` "
     "steps), 1 to 65536. About 128 bytes a step plus 5 a step per phase name.",
     SetInt<&Options::window>, GetInt<&Options::window>},
    {"enabled", "bool", BoolDefault(true), false, 0, 0, nullptr, nullptr, nullptr, nullptr,
     "False makes every scope a no-op and starts no thread.", SetEnabled, GetEnabled},
    {"max_phases", "int", IntDefault(128), true, kNumBuiltinPhases + 1, kMaxPhases, nullptr,
     "phase names", nullptr, nullptr,
     "distinct phase names the session can hold, the nine built-in ones included, 10 to 4096.",
     SetInt<&Options::max_phases>, GetInt<&Options::max_phases>},
    {"queue_capacity", "int", IntDefault(131072), true, 64, kMaxQueueCapacity, nullptr, "records",
     nullptr, nullptr,
     "records (one per ended scope) that may wait for the background worker, 64 to 4194304 "
     "(rounded up to a power of two); when it is full records are dropped and counted, never "
     "waited for.",
     SetInt<&Options::queue_capacity>, GetInt<&Options::queue_capacity>},
    {"flush_interval_ms", "int", IntDefault(10), true, 1, 10000, nullptr, "milliseconds", nullptr,
     nullptr,
     "how often the background worker drains the queue, 1 to 10000 ms (``summary()`` drains "
     "too, so it is never stale).",
     SetInt<&Options::flush_interval_ms>, GetInt<&Options::flush_interval_ms>},
    {"clock", "Optional[ManualClock]", NoneDefault(), false, 0, 0, nullptr, nullptr, nullptr,
     nullptr, "a ``gpuscope.testing.ManualClock`` for tests; None: the host clock.", SetClock,
     GetClock},
    {"stream", "Any", NoneDefault(), false, 0, 0, nullptr, nullptr, nullptr, nullptr,
     "the CUDA stream scope boundaries are marked on with a GPU source: None follows torch's "
     "current stream (read once per step, once torch has initialized CUDA); an int or a "
     "``torch.cuda.Stream`` fixes it (``set_stream()`` changes it).",
     SetStream, GetStream},
    {"simulated_device", "Union[SimulatedDevice, bool, None]", NoneDefault(), false, 0, 0, nullptr,
     nullptr, nullptr, nullptr,
     "True (or a ``gpuscope.testing.SimulatedDevice``) times a simulated GPU instead, for tests "
     "and demos, labelled SIMULATED GPU wherever its numbers appear; ``GPUSCOPE_SIMULATE=1`` does "
     "the same for every session.",
     SetSimulated, GetSimulated},
    {"cupti", "Optional[bool]", NoneDefault(), false, 0, 0, nullptr, nullptr, nullptr, nullptr,
     "None uses CUPTI (exact GPU idle, launch gaps, copies, syncs) when it can be shared (CUPTI "
     "13+: ``cuptiSubscribe_v2``), no profiler injected itself and CUDA is already initialized "
     "(create the session after the model is on the GPU); True also takes an older CUPTI, which "
     "then keeps torch.profiler from recording GPU events until ``release_cupti()`` or "
     "``close()``; False never uses it. Without CUPTI, CUDA events give a lower bound. "
     "``s.source`` says which is in use.",
     SetCupti, GetCupti},
    {"telemetry_interval_ms", "int", IntDefault(100), true, 0, 60000, nullptr, "milliseconds",
     nullptr, nullptr,
     "how often the background worker samples NVML and ``/proc`` (``summary().telemetry``), 0 "
     "(never) to 60000 ms.",
     SetInt<&Options::telemetry_interval_ms>, GetInt<&Options::telemetry_interval_ms>},
    {"trace_steps", "int", IntDefault(16), true, 0, 4096, nullptr, "steps", nullptr, nullptr,
     "steps whose timelines ``save_trace()`` writes (the last ones), 0 to 4096.",
     SetInt<&Options::trace_steps>, GetInt<&Options::trace_steps>},
    {"warmup", "int", IntDefault(0), true, 0, kMaxWarmupSteps, nullptr, "steps", "STEPS",
     "leave the first STEPS optimizer steps (workers starting, compilation, autotuning) out of the "
     "window and the run's numbers, reported apart, as Session(warmup=N) does",
     "completed steps at the start (and after each ``reset()``) left out of the window, the run's "
     "numbers and every total, and reported apart (``summary().warmup``; the report says \"N "
     "warm-up steps excluded\"), 0 to 1048576. Default 0: every step counts. Step 0 holds "
     "one-time costs (DataLoader workers starting, cuDNN autotuning, torch.compile): "
     "``warmup=1`` or more keeps them out of short runs and baselines.",
     SetInt<&Options::warmup_steps>, GetInt<&Options::warmup_steps>},
    {"stall_after", "Optional[float]", NoneDefault(), true, 0, kInf, nullptr, "seconds", "SECONDS",
     "seconds a step may stay open before gpuscope says where it hangs (default: from the job's "
     "own step times, at least 30 s)",
     "seconds a step may stay open before it is a stall: said once, at the warning level, while "
     "it lasts (the step, the open phase, the GPU's state and the training thread's Python "
     "stack; in a distributed job, the rank that is somewhere else), then kept in "
     "``summary().stalls`` (finding ``\"stall\"``). None (default): 10 x the window's p99 step "
     "time or twice its longest step, at least 30 s; ``float('inf')``: never. The first 10 steps "
     "and warm-up wait at least 300 s, phases outside steps 10 x this or 3 x their longest "
     "earlier run (docs/definitions.md \"Stalls\").",
     SetStallAfter, GetSecondsOrNone<&Options::stall_after_s>},
    {"on_stall", "Optional[Callable[[Stall], Any]]", NoneDefault(), false, 0, 0, nullptr, nullptr,
     nullptr, nullptr,
     "called once per stall with the ``gpuscope.Stall`` as it is found (the step still open), on "
     "gpuscope's watch thread: dump the job's own state, take ``torch.cuda``'s memory snapshot or "
     "the flight recorder's, or end the job. Exceptions are logged and ignored.",
     SetOnStall, GetNone},
    {"rank_interval", "Optional[float]", FloatDefault(kDefaultRankIntervalS), true,
     kMinRankIntervalS, kInf, nullptr, "seconds", nullptr, nullptr,
     "in a distributed job, seconds between exchanges of rank records (default 30, at least "
     "0.1; None: only in ``sync_ranks()``).",
     SetRankInterval, GetSecondsOrNone<&Options::rank_interval_s>},
    {"rank_timeout_s", "Optional[float]", NoneDefault(), true, 0, kInf, nullptr, "seconds", nullptr,
     nullptr,
     "how long each exchange waits for the other ranks, above 0 s (default None: a third of "
     "``rank_interval``, at most 10 s).",
     SetRankTimeout, GetSecondsOrNone<&Options::rank_timeout_s>},
    {"flops_per_step", "Optional[float]", FloatDefault(0), true, 0, kInf, nullptr, "FLOPs", "FLOPS",
     "this rank's model FLOPs per optimizer step: model FLOP/s and MFU in the status line, the "
     "report and the metrics",
     "the model FLOPs THIS process (this rank) executes, forward and backward, per optimizer step "
     "(every gradient accumulation micro-batch of it); 0 (default): not given. "
     "``summary().efficiency`` then has the achieved FLOP/s and the MFU (docs/mfu.md).",
     SetFlops<&Options::flops_per_step>, GetDouble<&Options::flops_per_step>},
    {"flops_per_sample", "Optional[float]", FloatDefault(0), true, 0, kInf, nullptr, "FLOPs",
     nullptr, nullptr,
     "the same per sample, times each step's ``samples=`` (the samples this rank processed in the "
     "optimizer step); at most one of the two. ``gpuscope.count_flops()`` counts them once with "
     "torch.",
     SetFlops<&Options::flops_per_sample>, GetDouble<&Options::flops_per_sample>},
    {"peak_flops", "Optional[float]", FloatDefault(0), true, 0, kInf, nullptr, "FLOPs", "FLOPS",
     "one GPU's peak FLOP/s (default: the GPU's dense peak from gpuscope's table)",
     "one GPU's peak FLOP/s for MFU; 0 (default): the dense peak of the GPU in "
     "``peak_precision`` from the table in docs/mfu.md.",
     SetFlops<&Options::peak_flops>, GetDouble<&Options::peak_flops>},
    {"peak_precision", "str", StrDefault("bf16"), false, 0, 0, kPrecisionNames, nullptr, "P",
     "the precision for the peak table",
     "the precision the matmuls run in, for that table: ``\"bf16\"`` (default), ``\"fp16\"``, "
     "``\"tf32\"``, ``\"fp32\"`` or ``\"fp8\"``.",
     SetPrecision, GetPrecision},
    {"device_name", "Optional[str]", NoneDefault(), false, 0, 0, nullptr, nullptr, nullptr, nullptr,
     "the GPU's model name for that table; None: with FLOPs given, "
     "``torch.cuda.get_device_name()`` of the current device when torch is imported and sees a "
     "GPU (else MFU is None and ``efficiency.reason`` says why).",
     SetOptionalStr<&Options::device_name>, GetOptionalStr<&Options::device_name>},
    {"run_id", "Optional[str]", NoneDefault(), false, 0, 0, nullptr, nullptr, "ID",
     "the job's id in its Prometheus series' run_id label (default: the launcher's)",
     "the job's id: the ``run_id`` label of its Prometheus series "
     "(docs/prometheus.md#labels-and-cardinality), at most 256 bytes; None (default): the "
     "launcher's (``GPUSCOPE_RUN_ID``, torchrun's run id, ``SLURM_JOB_ID``, the Kubernetes "
     "pod), else one made up for this process.",
     SetRunId, GetOptionalStr<&Options::run_id>},
};

PyObject* DefaultToPython(const Default& d) {
  switch (d.kind) {
    case Default::kBool: return PyBool_FromLong(d.number != 0);
    case Default::kInt: return PyLong_FromDouble(d.number);
    case Default::kFloat: return PyFloat_FromDouble(d.number);
    case Default::kStr: return PyUnicode_FromString(d.text);
    case Default::kNone: break;
  }
  Py_RETURN_NONE;
}

PyObject* StrOrNone(const char* s) {
  if (s == nullptr) Py_RETURN_NONE;
  return PyUnicode_FromString(s);
}

PyObject* RowToPython(const Row& row) {
  PyObject* range = nullptr;
  if (row.has_range) {
    range = Py_BuildValue("(dd)", row.lo, row.hi);
    if (range != nullptr && row.lo == std::floor(row.lo) && std::isfinite(row.hi)) {
      Py_SETREF(range, Py_BuildValue("(LL)", static_cast<long long>(row.lo),
                                     static_cast<long long>(row.hi)));
    }
  } else {
    range = Py_NewRef(Py_None);
  }
  PyObject* values = nullptr;
  if (row.values != nullptr) {
    values = PyTuple_New(0);
    for (const char* const* v = row.values; values != nullptr && *v != nullptr; ++v) {
      PyObject* item = PyUnicode_FromString(*v);
      PyObject* one = item == nullptr ? nullptr : PyTuple_Pack(1, item);
      Py_XDECREF(item);
      if (one == nullptr) {
        Py_CLEAR(values);
        break;
      }
      Py_SETREF(values, PySequence_Concat(values, one));
      Py_DECREF(one);
    }
  } else {
    values = Py_NewRef(Py_None);
  }
  const Options defaults;
  PyObject* out = nullptr;
  if (range != nullptr && values != nullptr) {
    out = Py_BuildValue("{s:s,s:s,s:N,s:O,s:O,s:s,s:N,s:N,s:N,s:N}", "name", row.name, "type",
                        row.type, "default", DefaultToPython(row.default_value), "range", range,
                        "values", values, "doc", row.doc, "flag", StrOrNone(row.flag), "flag_help",
                        StrOrNone(row.flag_help), "unit", StrOrNone(row.unit), "options_default",
                        row.get(defaults));
  }
  Py_XDECREF(range);
  Py_XDECREF(values);
  return out;
}

}  // namespace

bool ParseSessionOptions(PyObject* args, PyObject* kwargs, Options* options, HeldOptions* held) {
  const Py_ssize_t nargs = args == nullptr ? 0 : PyTuple_GET_SIZE(args);
  if (nargs > 1) {
    PyErr_Format(PyExc_TypeError, "Session() takes at most 1 positional argument (%zd given)",
                 nargs);
    return false;
  }
  Py_ssize_t matched = 0;
  for (const Row& row : kRows) {
    PyObject* value = nullptr;  // borrowed
    if (kwargs != nullptr) {
      value = PyDict_GetItemString(kwargs, row.name);
      if (value != nullptr) ++matched;
    }
    if (&row == &kRows[0] && nargs == 1) {
      if (value != nullptr) {
        PyErr_Format(PyExc_TypeError,
                     "argument for Session() given by name ('%s') and position (1)", row.name);
        return false;
      }
      value = PyTuple_GET_ITEM(args, 0);
    }
    if (value != nullptr && !row.set(value, row, options, held)) return false;
  }
  if (kwargs != nullptr && matched != PyDict_GET_SIZE(kwargs)) {
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      if (!PyUnicode_Check(key)) {
        PyErr_SetString(PyExc_TypeError, "keywords must be strings");
        return false;
      }
      bool known = false;
      for (const Row& row : kRows)
        known = known || PyUnicode_CompareWithASCIIString(key, row.name) == 0;
      if (!known) {
        PyErr_Format(PyExc_TypeError, "'%U' is an invalid keyword argument for Session()", key);
        return false;
      }
    }
  }
  return true;
}

PyObject* OptionsToPython(const Options& options) {
  PyObject* out = PyDict_New();
  for (const Row& row : kRows) {
    if (out == nullptr) return nullptr;
    PyObject* value = row.get(options);
    if (value == nullptr || PyDict_SetItemString(out, row.name, value) < 0) Py_CLEAR(out);
    Py_XDECREF(value);
  }
  return out;
}

PyObject* SessionOptionsTable() {
  constexpr Py_ssize_t n = sizeof(kRows) / sizeof(kRows[0]);
  PyObject* out = PyTuple_New(n);
  for (Py_ssize_t i = 0; out != nullptr && i < n; ++i) {
    PyObject* row = RowToPython(kRows[i]);
    if (row == nullptr) {
      Py_CLEAR(out);
      break;
    }
    PyTuple_SET_ITEM(out, i, row);
  }
  return out;
}

}  // namespace gpuscope::python::hot
