// What the files of the hot types (hot_types.h) share, and nothing else
// includes: the _Session's layout, the session capsule and its LoopWatch,
// the Python hooks gpuscope._session installs, and the small helpers every
// enter/exit calls.
//
// The helpers on the hot path are inline here, not defined in one .cc file:
// each type's file then compiles them into its enter/exit as when all the
// types were one file, so that splitting the types costs no call. The one
// shared helper that is not small, CheckLoopLeft(), was a call before too.
//
//   hot_module.cc       AddHotTypes, the hooks, scopes used as decorators
//   hot_fast_slots.cc   the __enter__/__exit__ descriptors (hot_fast_slots.h)
//   hot_session.cc      _Session: the capsule, __init__, methods, getters
//   hot_phase_scope.cc  _PhaseScope and s.phase()
//   hot_step_scope.cc   _StepScope and s.step()
//   hot_steps_iter.cc   _StepsIter, s.steps() and the loop watch

#ifndef GPUSCOPE_BINDINGS_HOT_INTERNAL_H_
#define GPUSCOPE_BINDINGS_HOT_INTERNAL_H_

#include <Python.h>

#include <cstdint>

#include "gpuscope/session.h"
#include "status_to_python.h"

namespace gpuscope::python::hot {

// ---------------------------------------------------------------------------
// The Python hooks, installed by SetDecorator(), SetStreamGetter() and
// SetLoopRange() and SetLoaderNote() (hot_module.cc). Strong references, or
// nullptr.

extern PyObject* g_decorate;       // gpuscope._session._decorate
extern PyObject* g_stream_getter;  // gpuscope._session._torch_stream
extern PyObject* g_loop_range;     // gpuscope._loopwatch._loop_range
extern PyObject* g_loader_note;    // gpuscope._loader.note_loader
extern PyObject* g_oom_details;    // gpuscope._memory.oom_details

// A scope of `session` is ending by the exception `exc` (not None): if it is
// a CUDA out-of-memory error not already recorded, records it with the
// scopes still open (Session::RecordOom()), the details from
// gpuscope._memory.oom_details. Never raises; leaves `exc` as it is. Only on
// the exception path. (hot_module.cc)
void NoteScopeException(Session* session, PyObject* exc);

// ---------------------------------------------------------------------------
// The session capsule.

struct StepsIterObject;  // hot_steps_iter.cc

// Per session: the s.steps() loop whose step is open, if any. A `for` loop
// does not tell its iterator when it is left by `break`, `return` or an
// exception; while the iterator lives (`it = s.steps(...)`), its step would
// stay open and the next step would be refused as nested. So the iterator
// notes where its loop is (the frame iterating it and the loop's bytecode
// range), and the session's next scope checks whether that frame has left
// the loop: if so, the step ends there. Owned by the session capsule (its
// context pointer); scopes borrow it through the capsule they hold.
struct LoopWatch {
  StepsIterObject* open = nullptr;  // borrowed; cleared when that step ends or the iterator dies
};

// The C++ session lives in a capsule shared by the _Session and every scope
// made from it: whichever is released last deletes it (hot_session.cc).
inline LoopWatch* WatchOf(PyObject* capsule) {
  if (capsule == nullptr) return nullptr;
  void* watch = PyCapsule_GetContext(capsule);
  if (watch == nullptr) PyErr_Clear();
  return static_cast<LoopWatch*>(watch);
}

// Ends the open s.steps() step of `watch` when its loop has been left (see
// LoopWatch): called before a scope begins, so that a phase or step after the
// loop is never counted in the loop's last step. Never raises. Callers test
// `watch->open` first: with no steps() step open, a scope makes no call.
// (hot_steps_iter.cc)
void CheckLoopLeft(LoopWatch* watch);

// ---------------------------------------------------------------------------
// _Session (hot_session.cc); its phase(), step() and steps() make the scopes
// and are defined with them.

struct SessionObject {
  PyObject_HEAD
  Session* session;  // borrowed from core
  PyObject* core;    // capsule owning the Session
  PyObject* phases;  // dict: name -> _PhaseScope
  PyObject* weakrefs;
  PyObject* simulated;  // the SimulatedDevice it runs on, or nullptr
  PyObject* on_stall;   // Session(on_stall=...), or nullptr
  bool follow_torch;    // stream=None: follow torch's current CUDA stream
};

inline Session* Checked(SessionObject* s) {
  if (s->session == nullptr) {
    PyErr_SetString(GpuscopeError(), "Session.__init__ was not called");
  }
  return s->session;
}

// A stream argument as a handle: an int >= 0, or an object with an int
// `cuda_stream` (torch.cuda.Stream, ExternalStream). False with a TypeError.
bool StreamHandleOf(PyObject* stream, uint64_t* out);

// s.phase(name, stream=None) (hot_phase_scope.cc)
PyObject* SessionPhase(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
// s.step(samples=None, tokens=None) (hot_step_scope.cc)
PyObject* SessionStep(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
// s.steps(iterable, samples=None, tokens=None) (hot_steps_iter.cc)
PyObject* SessionSteps(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);

// Parses (samples=None, tokens=None), positional or keyword, without the
// generic keyword machinery.
inline bool ParseStepCounts(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                            PyObject** samples, PyObject** tokens, int first) {
  PyObject* slots[2] = {nullptr, nullptr};
  const Py_ssize_t positional = nargs;
  if (positional - first > 2) {
    PyErr_SetString(PyExc_TypeError, "expected at most samples and tokens");
    return false;
  }
  for (Py_ssize_t i = first; i < positional; ++i) slots[i - first] = args[i];
  if (kwnames != nullptr) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); ++k) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, k);
      int index = -1;
      if (PyUnicode_CompareWithASCIIString(key, "samples") == 0) index = 0;
      if (PyUnicode_CompareWithASCIIString(key, "tokens") == 0) index = 1;
      if (index < 0) {
        PyErr_Format(PyExc_TypeError, "unexpected keyword argument %R", key);
        return false;
      }
      if (slots[index] != nullptr) {
        PyErr_Format(PyExc_TypeError, "%R given twice", key);
        return false;
      }
      slots[index] = args[positional + k];
    }
  }
  *samples = slots[0] != nullptr ? slots[0] : Py_None;
  *tokens = slots[1] != nullptr ? slots[1] : Py_None;
  return true;
}

// ---------------------------------------------------------------------------
// What every scope does on enter and exit.

// The statuses Python raises GpuscopeError for. Not kOk, not kDisabled (a
// disabled or forked-away session is silent), and not kTooDeep: as in C++,
// scopes beyond the depth limit are ignored and counted, never an error.
inline bool IsMisuse(ScopeStatus status) {
  return status != ScopeStatus::kOk && status != ScopeStatus::kDisabled &&
         status != ScopeStatus::kTooDeep;
}

inline PyObject* RaiseMisuse(ScopeStatus status) {
  return SetGpuscopeError(ScopeStatusMessage(status));
}

// An __exit__ with an exception in flight never raises a misuse of its own:
// the user's exception propagates unchanged.
inline bool ExceptionInFlight(PyObject* const* args, Py_ssize_t nargs) {
  return nargs >= 1 && args[0] != Py_None;
}

// Before each step of a session that times a device and was given no fixed
// stream: marks go on the stream torch launches on now (about a microsecond,
// once per step, and only once torch has initialized CUDA). False with a
// Python error set if the getter raised.
inline bool FollowTorchStream(Session* session, bool follow) {
  if (!follow || g_stream_getter == nullptr || session == nullptr ||
      session->source() == Source::kHost) {
    return true;
  }
  PyObject* stream = PyObject_CallNoArgs(g_stream_getter);
  if (stream == nullptr) return false;
  if (PyLong_Check(stream)) {
    const unsigned long long handle = PyLong_AsUnsignedLongLong(stream);
    if (PyErr_Occurred()) {
      PyErr_Clear();  // not a stream handle: keep the current one
    } else {
      session->SetStream(handle);
    }
  }
  Py_DECREF(stream);
  return true;
}

// A scope called as a decorator: gpuscope._session._decorate(scope, fn).
// (hot_module.cc)
PyObject* Decorate(PyObject* cm, PyObject* args, PyObject* kwargs);

// ---------------------------------------------------------------------------
// The types and their fast __enter__/__exit__, for AddHotTypes (hot_module.cc).

extern PyTypeObject SessionType;
extern PyTypeObject PhaseScopeType;
extern PyTypeObject StepScopeType;
extern PyTypeObject StepsIterType;
extern PyTypeObject SizedStepsIterType;

PyObject* PhaseScopeEnter(PyObject* self, PyObject*);
PyObject* PhaseScopeExit(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* StepScopeEnter(PyObject* self, PyObject*);
PyObject* StepScopeExit(PyObject* self, PyObject* const* args, Py_ssize_t nargs);

}  // namespace gpuscope::python::hot

#endif  // GPUSCOPE_BINDINGS_HOT_INTERNAL_H_
