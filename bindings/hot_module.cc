// What module.cc sees of the hot types (hot_types.h): AddHotTypes(), which
// readies them and adds them to the module, and the Python hooks that
// gpuscope._session installs for them, with the one use of a hook that is
// not on a hot path: a scope used as a decorator.

#include <string>
#include <utility>

#include "hot_fast_slots.h"
#include "hot_internal.h"
#include "hot_types.h"
#include "session_options.h"
#include "status_to_python.h"

namespace gpuscope::python {
namespace hot {

// The hooks (hot_internal.h), set once when gpuscope._session is imported.
PyObject* g_decorate = nullptr;
PyObject* g_stream_getter = nullptr;
PyObject* g_loop_range = nullptr;
PyObject* g_loader_note = nullptr;
PyObject* g_oom_details = nullptr;

namespace {

double FloatOr(PyObject* v, double otherwise) {
  if (v == nullptr || v == Py_None) return otherwise;
  const double d = PyFloat_AsDouble(v);
  if (d == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return otherwise;
  }
  return d;
}

std::string StrOr(PyObject* v) {
  if (v == nullptr || !PyUnicode_Check(v)) return {};
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(v, &n);
  if (s == nullptr) {
    PyErr_Clear();
    return {};
  }
  return std::string(s, static_cast<size_t>(n));
}

}  // namespace

void NoteScopeException(Session* session, PyObject* exc) {
  // The same error passes every enclosing scope's exit: the innermost, which
  // saw the most scopes open, records it and marks it (an attribute in its
  // __dict__), and the exits around it pass. Not its address: a later error
  // may reuse a caught one's; not a reference: the error holds frames, and
  // they the tensors.
  static PyObject* const kMark = PyUnicode_InternFromString("__gpuscope_recorded__");
  if (session == nullptr || exc == nullptr || exc == Py_None || g_oom_details == nullptr ||
      kMark == nullptr) {
    return;
  }
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);  // keep any error already set as it is
  PyObject* mark = PyObject_GetAttr(exc, kMark);
  if (mark != nullptr) {  // recorded already
    Py_DECREF(mark);
    PyErr_Restore(type, value, tb);
    return;
  }
  PyErr_Clear();  // AttributeError: not recorded yet
  PyObject* details = PyObject_CallFunctionObjArgs(g_oom_details, exc, nullptr);
  if (details == nullptr) PyErr_Clear();
  if (details != nullptr && PyTuple_Check(details) && PyTuple_GET_SIZE(details) == 7) {
    if (PyObject_SetAttr(exc, kMark, Py_True) < 0) PyErr_Clear();
    OomEvent oom;
    const double device = FloatOr(PyTuple_GET_ITEM(details, 0), -1);
    oom.device = device >= 0 && device < 1024 ? static_cast<int>(device) : -1;
    oom.requested_bytes = FloatOr(PyTuple_GET_ITEM(details, 1), oom.requested_bytes);
    oom.allocated_bytes = FloatOr(PyTuple_GET_ITEM(details, 2), oom.allocated_bytes);
    oom.reserved_bytes = FloatOr(PyTuple_GET_ITEM(details, 3), oom.reserved_bytes);
    oom.total_bytes = FloatOr(PyTuple_GET_ITEM(details, 4), oom.total_bytes);
    oom.message = StrOr(PyTuple_GET_ITEM(details, 5));
    oom.snapshot = StrOr(PyTuple_GET_ITEM(details, 6));
    session->RecordOom(std::move(oom), "torch.cuda");
  }
  Py_XDECREF(details);
  PyErr_Restore(type, value, tb);
}

PyObject* Decorate(PyObject* cm, PyObject* args, PyObject* kwargs) {
  PyObject* fn = nullptr;
  if (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "a scope used as a decorator takes one function");
    return nullptr;
  }
  if (!PyArg_UnpackTuple(args, "decorator", 1, 1, &fn)) return nullptr;
  if (!PyCallable_Check(fn)) {
    PyErr_SetString(PyExc_TypeError, "a scope used as a decorator must decorate a callable");
    return nullptr;
  }
  if (g_decorate == nullptr) return SetGpuscopeError("gpuscope package not initialized");
  return PyObject_CallFunctionObjArgs(g_decorate, cm, fn, nullptr);
}

}  // namespace hot

void SetDecorator(PyObject* fn) {
  Py_XINCREF(fn);
  Py_XSETREF(hot::g_decorate, fn);
}

void SetStreamGetter(PyObject* fn) {
  Py_XINCREF(fn);
  Py_XSETREF(hot::g_stream_getter, fn);
}

void SetLoopRange(PyObject* fn) {
  Py_XINCREF(fn);
  Py_XSETREF(hot::g_loop_range, fn);
}

void SetOomDetails(PyObject* fn) {
  Py_XINCREF(fn);
  Py_XSETREF(hot::g_oom_details, fn);
}

void SetLoaderNote(PyObject* fn) {
  Py_XINCREF(fn);
  Py_XSETREF(hot::g_loader_note, fn);
}

bool AddHotTypes(PyObject* module) {
  if (!hot::ReadyFastSlotTypes()) return false;
  for (auto [type, name] :
       {std::pair{&hot::SessionType, "_Session"}, std::pair{&hot::PhaseScopeType, "_PhaseScope"},
        std::pair{&hot::StepScopeType, "_StepScope"}, std::pair{&hot::StepsIterType, "_StepsIter"},
        std::pair{&hot::SizedStepsIterType, "_SizedStepsIter"}}) {
    if (PyType_Ready(type) < 0) return false;
    Py_INCREF(type);
    if (PyModule_AddObject(module, name, reinterpret_cast<PyObject*>(type)) < 0) {
      Py_DECREF(type);
      return false;
    }
  }
  // Session(...)'s options, for _session.py and _runner.py (session_options.h).
  PyObject* table = hot::SessionOptionsTable();
  if (table == nullptr || PyModule_AddObject(module, "_SESSION_OPTIONS", table) < 0) {
    Py_XDECREF(table);
    return false;
  }
  return hot::InstallFastSlots(&hot::PhaseScopeType, hot::PhaseScopeEnter, hot::PhaseScopeExit) &&
         hot::InstallFastSlots(&hot::StepScopeType, hot::StepScopeEnter, hot::StepScopeExit);
}

}  // namespace gpuscope::python
