// _Session, the C part of gpuscope.Session: it owns the C++ session through
// the capsule it shares with its scopes, parses Session(...)'s options, and
// has the methods and properties that are not the hot path's (close, flush,
// set_stream, the JSON exports...). phase(), step() and steps() are in the
// files of the scopes they make.

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "gpuscope/clock.h"
#include "gpuscope/options.h"
#include "gpuscope/report.h"
#include "gpuscope/session.h"
#include "gpuscope/summary.h"
#include "gpuscope/testing.h"
#include "gpuscope/timeline.h"
#include "hot_internal.h"
#include "hot_types.h"
#include "session_options.h"
#include "status_to_python.h"

namespace gpuscope::python::hot {
namespace {

// The capsule holding the C++ session; its context pointer is the LoopWatch.
constexpr const char* kCapsuleName = "gpuscope.Session";

void DeleteSessionCapsule(PyObject* capsule) {
  delete WatchOf(capsule);
  auto* session = static_cast<Session*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (session == nullptr) {
    PyErr_Clear();
    return;
  }
  // Close() drains the queue and leaves the background worker; drop the GIL
  // while it waits for a worker pass, which never needs the GIL.
  Py_BEGIN_ALLOW_THREADS
  delete session;
  Py_END_ALLOW_THREADS
}

PyObject* SessionNew(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = type->tp_alloc(type, 0);
  if (self == nullptr) return nullptr;
  auto* s = reinterpret_cast<SessionObject*>(self);
  s->session = nullptr;
  s->core = nullptr;
  s->weakrefs = nullptr;
  s->simulated = nullptr;
  s->follow_torch = false;
  s->phases = PyDict_New();
  if (s->phases == nullptr) {
    Py_DECREF(self);
    return nullptr;
  }
  return self;
}

int SessionInit(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* s = reinterpret_cast<SessionObject*>(self);
  if (s->core != nullptr) {
    PyErr_SetString(GpuscopeError(), "Session.__init__ called twice");
    return -1;
  }
  Options options;
  HeldOptions held;  // the keywords and their converters: session_options.cc
  if (!ParseSessionOptions(args, kwargs, &options, &held)) return -1;
  PyObject* stream = held.stream;
  PyObject* simulated = held.simulated;
  // Stalls are said by the Python watch (_stalls.py), with the Python stack
  // and the other ranks' places, and on_stall is called there, with the GIL.
  options.log_stalls = false;
  if (held.on_stall != Py_None) Py_XSETREF(s->on_stall, Py_NewRef(held.on_stall));
  if (stream != Py_None) {
    uint64_t handle = 0;
    if (!StreamHandleOf(stream, &handle)) return -1;
    options.stream = handle;
  }
  s->follow_torch = stream == Py_None;
  const bool simulating =
      (simulated != Py_None && simulated != Py_False) || (options.enabled && SimulationRequested());
  if (stream == Py_None && simulating) {
    options.stream = 0;  // simulated kernels launch on stream 0 unless told otherwise
  }
  if (simulated == Py_True) {
    simulated = pybind11::cast(std::make_shared<SimulatedDevice>()).release().ptr();
  } else if (simulated == Py_False || simulated == Py_None) {
    simulated = nullptr;
  } else {
    Py_INCREF(simulated);
  }
  if (simulated != nullptr) {
    try {
      options.simulated_device =
          pybind11::cast<std::shared_ptr<SimulatedDevice>>(pybind11::handle(simulated));
    } catch (const pybind11::cast_error&) {
      Py_DECREF(simulated);
      PyErr_SetString(PyExc_TypeError,
                      "simulated_device must be a gpuscope.testing.SimulatedDevice, True or None");
      return -1;
    }
    Py_XSETREF(s->simulated, simulated);
  }
  absl::StatusOr<std::unique_ptr<Session>> created = absl::InternalError("");
  try {
    created = Session::Create(std::move(options));
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
    return -1;
  }
  if (!created.ok()) {
    SetError(created.status());
    return -1;
  }
  Session* session = created->release();
  s->core = PyCapsule_New(session, kCapsuleName, DeleteSessionCapsule);
  if (s->core == nullptr) {
    delete session;
    return -1;
  }
  if (PyCapsule_SetContext(s->core, new LoopWatch()) != 0) return -1;
  s->session = session;
  return 0;
}

void SessionDealloc(PyObject* self) {
  auto* s = reinterpret_cast<SessionObject*>(self);
  if (s->weakrefs != nullptr) PyObject_ClearWeakRefs(self);
  Py_XDECREF(s->phases);
  Py_XDECREF(s->simulated);
  Py_XDECREF(s->on_stall);
  Py_XDECREF(s->core);  // deletes the Session unless a scope still holds it
  Py_TYPE(self)->tp_free(self);
}

PyObject* SessionStepSeriesJson(PyObject* self, PyObject*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  std::string json;
  Py_BEGIN_ALLOW_THREADS
  json = ToJson(session->StepSeries());
  Py_END_ALLOW_THREADS
  return PyUnicode_FromStringAndSize(json.data(), static_cast<Py_ssize_t>(json.size()));
}

// The window's steps a column per field (Session::StepColumns()): a dict of
// bytes (native uint64 for "index", native double for the rest; NaN: not
// measured), "phases" and "idle_by_cause" dicts of name -> bytes. Python
// (_session.py) wraps each in an array.array without another copy of
// values into Python objects.
PyObject* SessionStepColumns(PyObject* self, PyObject*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  SeriesColumns c;
  Py_BEGIN_ALLOW_THREADS
  c = session->StepColumns();
  Py_END_ALLOW_THREADS
  namespace py = pybind11;
  try {
    const auto bytes = [](const auto& v) {
      return py::bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
    };
    const auto named = [&](const std::vector<std::string>& names,
                           const std::vector<std::vector<double>>& columns) {
      py::dict d;
      for (size_t i = 0; i < names.size() && i < columns.size(); ++i) {
        d[py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(
            names[i].data(), static_cast<Py_ssize_t>(names[i].size()), "replace"))] =
            bytes(columns[i]);
      }
      return d;
    };
    py::dict out;
    out["index"] = bytes(c.index);
    out["begin"] = bytes(c.begin);
    out["duration"] = bytes(c.duration);
    out["phases"] = named(c.phase_names, c.phases);
    out["gpu_idle_pct"] = bytes(c.gpu_idle_pct);
    out["idle_by_cause"] = named(c.idle_causes, c.idle_by_cause);
    out["gpu_utilization_pct"] = bytes(c.gpu_utilization_pct);
    out["sm_clock_ratio"] = bytes(c.sm_clock_ratio);
    out["host_cpu_pct"] = bytes(c.host_cpu_pct);
    out["host_iowait_pct"] = bytes(c.host_iowait_pct);
    out["worker_cores"] = bytes(c.worker_cores);
    out["memory_peak_bytes"] = bytes(c.memory_peak_bytes);
    return out.release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_MemoryError, e.what());
    return nullptr;
  }
}

PyObject* SessionTraceJson(PyObject* self, PyObject*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  std::string json;
  Py_BEGIN_ALLOW_THREADS
  json = ToChromeTrace(*session);
  Py_END_ALLOW_THREADS
  return PyUnicode_FromStringAndSize(json.data(), static_cast<Py_ssize_t>(json.size()));
}

PyObject* SessionClose(PyObject* self, PyObject*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  if (LoopWatch* watch = WatchOf(reinterpret_cast<SessionObject*>(self)->core);
      watch != nullptr && watch->open != nullptr) {
    CheckLoopLeft(watch);  // a loop left by break: its step counts
  }
  Py_BEGIN_ALLOW_THREADS
  session->Close();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

// s.reset(warmup=None): Session::Reset(), the GIL released while it drains.
PyObject* SessionReset(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kKeywords[] = {"warmup", nullptr};
  PyObject* warmup = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:reset", const_cast<char**>(kKeywords),
                                   &warmup)) {
    return nullptr;
  }
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  std::optional<int> steps;
  if (warmup != Py_None) {
    if (!PyLong_Check(warmup) || PyBool_Check(warmup)) {
      PyErr_Format(PyExc_TypeError,
                   "reset(warmup=...) takes an int >= 0 (warm-up steps) or None (the session's "
                   "warmup), not %.100s",
                   Py_TYPE(warmup)->tp_name);
      return nullptr;
    }
    int overflow = 0;
    const long long n = PyLong_AsLongLongAndOverflow(warmup, &overflow);
    if (n == -1 && PyErr_Occurred()) return nullptr;
    if (overflow != 0 || n < 0 || n > kMaxWarmupSteps) {
      PyErr_Format(PyExc_ValueError,
                   "reset(warmup=%R): use a value from 0 to %d (nothing was reset)", warmup,
                   kMaxWarmupSteps);
      return nullptr;
    }
    steps = static_cast<int>(n);
  }
  absl::Status status;
  Py_BEGIN_ALLOW_THREADS
  status = session->Reset(steps);
  Py_END_ALLOW_THREADS
  if (!status.ok()) {
    SetError(status);
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* SessionOpenScopes(PyObject* self, PyObject*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  return PyLong_FromLong(session->OpenScopes());
}

// s._record_memory(device, allocated, reserved, peak_allocated,
// peak_reserved, retries, ooms, total, source): Session::RecordMemory().
// NaN / -1 where unknown. The sampler thread's call (gpuscope._memory).
PyObject* SessionRecordMemory(PyObject* self, PyObject* args) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  AllocatorStats a;
  long long retries = -1, ooms = -1;
  const char* source = "";
  if (!PyArg_ParseTuple(args, "iddddLLds:_record_memory", &a.device, &a.allocated_bytes,
                        &a.reserved_bytes, &a.peak_allocated_bytes, &a.peak_reserved_bytes,
                        &retries, &ooms, &a.total_bytes, &source)) {
    return nullptr;
  }
  a.alloc_retries = retries;
  a.ooms = ooms;
  session->RecordMemory(a, source);
  Py_RETURN_NONE;
}

// s._record_oom(exc): records `exc` if it is a CUDA out-of-memory error (a
// scope's exit does it itself; this is for an error caught outside every
// scope, as the zero-code runner's top level does). Recording thread.
PyObject* SessionRecordOom(PyObject* self, PyObject* exc) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  NoteScopeException(session, exc);
  Py_RETURN_NONE;
}

PyObject* SessionFlush(PyObject* self, PyObject*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  Py_BEGIN_ALLOW_THREADS
  session->Flush();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

PyObject* SessionSetStream(PyObject* self, PyObject* stream) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  uint64_t handle = 0;
  if (!StreamHandleOf(stream, &handle)) return nullptr;
  reinterpret_cast<SessionObject*>(self)->follow_torch = false;
  session->SetStream(handle);
  Py_RETURN_NONE;
}

PyObject* SessionReleaseCupti(PyObject* self, PyObject*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  Py_BEGIN_ALLOW_THREADS
  session->ReleaseCupti();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

PyObject* SessionSimulated(PyObject* self, void*) {
  PyObject* sim = reinterpret_cast<SessionObject*>(self)->simulated;
  return Py_NewRef(sim != nullptr ? sim : Py_None);
}

PyObject* SessionSource(PyObject* self, void*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  const std::string_view name = SourceName(session->source());
  return PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size()));
}

PyObject* SessionRecording(PyObject* self, void*) {
  Session* session = reinterpret_cast<SessionObject*>(self)->session;
  return PyBool_FromLong(session != nullptr && session->recording());
}

PyObject* SessionWindow(PyObject* self, void*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  return PyLong_FromLong(session->options().window);
}

// The options the session was made with, as Session(...) takes them.
PyObject* SessionOptionsOf(PyObject* self, void*) {
  auto* s = reinterpret_cast<SessionObject*>(self);
  Session* session = Checked(s);
  if (session == nullptr) return nullptr;
  PyObject* options = OptionsToPython(session->options());
  if (options != nullptr && s->on_stall != nullptr &&
      PyDict_SetItemString(options, "on_stall", s->on_stall) != 0) {
    Py_CLEAR(options);
  }
  return options;
}

PyObject* SessionStatus(PyObject* self, void*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  if (session->status().ok()) Py_RETURN_NONE;
  const std::string m(session->status().message());
  return PyUnicode_FromString(m.c_str());
}

PyMethodDef kSessionMethods[] = {
    {"phase", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(SessionPhase)),
     METH_FASTCALL | METH_KEYWORDS,
     "phase(name, stream=None) -> context manager / decorator for phase `name` (cached per name "
     "and stream). `stream` (a torch.cuda.Stream or a handle): the stream this phase's GPU work "
     "goes on, when it is not the session's (a copy stream, another device's stream)."},
    {"step", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(SessionStep)),
     METH_FASTCALL | METH_KEYWORDS,
     "step(samples=None, tokens=None) -> context manager / decorator for one step."},
    {"steps", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(SessionSteps)),
     METH_FASTCALL | METH_KEYWORDS,
     "steps(iterable, samples=None, tokens=None) -> iterator; one step per item, next() is "
     "phase 'data'. samples/tokens: an int or a callable(batch) -> int."},
    {"set_stream", SessionSetStream, METH_O,
     "set_stream(stream) -> marks steps and phases from now on on this device stream (a "
     "torch.cuda.Stream, or a CUstream as an int), instead of following torch's current stream."},
    {"release_cupti", SessionReleaseCupti, METH_NOARGS,
     "release_cupti() -> gives CUPTI back (so that torch.profiler or Nsight can use it); the "
     "session goes on with CUDA events. No-op unless the source is 'cupti'."},
    {"_step_series_json", SessionStepSeriesJson, METH_NOARGS,
     "The window's steps as JSON (C++ ToJson(session.StepSeries()))."},
    {"_step_columns", SessionStepColumns, METH_NOARGS,
     "The window's steps a column per field, as bytes (C++ Session::StepColumns)."},
    {"trace_json", SessionTraceJson, METH_NOARGS,
     "trace_json() -> the last trace_steps steps as a Chrome trace (JSON text): host phases, "
     "device activity, idle gaps. Open in chrome://tracing or ui.perfetto.dev."},
    {"reset", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(SessionReset)),
     METH_VARARGS | METH_KEYWORDS,
     "reset(warmup=None) -> restarts measurement: drops the window, the run's histogram and "
     "totals and the warm-up totals; the next `warmup` completed steps (None: the session's "
     "warmup) are warm-up again. Steps that ended before the call are dropped; a step still open "
     "(e.g. reset() called inside the loop's body) is counted, whole. Misuse counts, the rank, "
     "the trace and step numbers are kept. Safe from any thread; ValueError for a bad warmup."},
    {"close", SessionClose, METH_NOARGS, "Stops recording and flushes. Idempotent."},
    {"flush", SessionFlush, METH_NOARGS, "Drains queued records into the aggregator."},
    {"_record_memory", SessionRecordMemory, METH_VARARGS,
     "_record_memory(device, allocated, reserved, peak_allocated, peak_reserved, retries, "
     "ooms, total, source): one GPU's allocator numbers now (NaN / -1 where unknown)."},
    {"_record_oom", SessionRecordOom, METH_O,
     "_record_oom(exc): records exc if it is a CUDA out-of-memory error, with the scopes open "
     "now (recording thread)."},
    {"_open_scopes", SessionOpenScopes, METH_NOARGS,
     "Scopes open on the recording thread now, the step included (recording thread only)."},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef kSessionGetSet[] = {
    {"recording", SessionRecording, nullptr, "Whether scopes record.", nullptr},
    {"window", SessionWindow, nullptr, "Steps kept for exact quantiles.", nullptr},
    {"status", SessionStatus, nullptr, "None, or why the session records nothing.", nullptr},
    {"_options", SessionOptionsOf, nullptr,
     "The options it was made with: a dict of keyword -> value, as Session(...) takes them.",
     nullptr},
    {"source", SessionSource, nullptr, "'cupti', 'events' or 'host', right now.", nullptr},
    {"simulated_device", SessionSimulated, nullptr, "The SimulatedDevice it runs on, or None.",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

PyTypeObject SessionType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "gpuscope._gpuscope._Session";
  t.tp_basicsize = sizeof(SessionObject);
  t.tp_dealloc = SessionDealloc;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  t.tp_doc = "The C part of gpuscope.Session.";
  t.tp_weaklistoffset = offsetof(SessionObject, weakrefs);
  t.tp_methods = kSessionMethods;
  t.tp_getset = kSessionGetSet;
  t.tp_init = SessionInit;
  t.tp_new = SessionNew;
  return t;
}();

bool StreamHandleOf(PyObject* stream, uint64_t* out) {
  PyObject* value = stream;
  Py_INCREF(value);
  if (!PyLong_Check(value)) {
    Py_SETREF(value, PyObject_GetAttrString(stream, "cuda_stream"));
    if (value == nullptr) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return false;  // KeyboardInterrupt...
      PyErr_Clear();
    }
  }
  bool ok = value != nullptr && PyLong_Check(value);
  if (ok) {
    *out = PyLong_AsUnsignedLongLong(value);
    ok = !(*out == static_cast<unsigned long long>(-1) && PyErr_Occurred());
    if (!ok) PyErr_Clear();
  }
  Py_XDECREF(value);
  if (!ok) {
    PyErr_Format(PyExc_TypeError,
                 "stream must be a torch.cuda.Stream, a stream handle (an int >= 0) or None, not "
                 "%.100s",
                 Py_TYPE(stream)->tp_name);
  }
  return ok;
}

}  // namespace gpuscope::python::hot

namespace gpuscope::python {

Session* SessionOf(PyObject* obj) {
  if (!PyObject_TypeCheck(obj, &hot::SessionType)) {
    PyErr_SetString(PyExc_TypeError, "expected a gpuscope.Session");
    return nullptr;
  }
  return hot::Checked(reinterpret_cast<hot::SessionObject*>(obj));
}

}  // namespace gpuscope::python
