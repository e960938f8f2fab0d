// _PhaseScope, the context manager and decorator `s.phase(name)` returns,
// and s.phase() itself, which caches one scope per name (and stream) on the
// session so that the hot path is a dict lookup and two C calls.

#include <cstdint>
#include <string_view>

#include "gpuscope/options.h"
#include "gpuscope/phase.h"
#include "gpuscope/session.h"
#include "hot_internal.h"
#include "status_to_python.h"

namespace gpuscope::python::hot {
namespace {

struct PhaseScopeObject {
  PyObject_HEAD
  PyObject* core;    // the session capsule, or nullptr for a scope that records nothing
  Session* session;  // borrowed from `core`
  LoopWatch* watch;  // borrowed from `core`
  PhaseId id;
  bool has_stream;  // s.phase(name, stream=...): marks go on `stream`
  uint64_t stream;
  int depth;  // tokens[0..depth) are open (the same name may nest)
  ScopeToken tokens[kMaxOpenScopes];
  Py_ssize_t overflow;  // open levels beyond kMaxOpenScopes (recorded by nobody)
  PyObject* name;
};

void PhaseScopeDealloc(PyObject* self) {
  auto* s = reinterpret_cast<PhaseScopeObject*>(self);
  Py_XDECREF(s->core);
  Py_XDECREF(s->name);
  Py_TYPE(self)->tp_free(self);
}

PyObject* PhaseScopeCall(PyObject* self, PyObject* args, PyObject* kwargs) {
  return Decorate(self, args, kwargs);
}

PyObject* PhaseScopeRepr(PyObject* self) {
  auto* s = reinterpret_cast<PhaseScopeObject*>(self);
  return PyUnicode_FromFormat("<gpuscope phase %R>", s->name);
}

PyObject* PhaseScopeName(PyObject* self, void*) {
  auto* s = reinterpret_cast<PhaseScopeObject*>(self);
  Py_INCREF(s->name);
  return s->name;
}

PyGetSetDef kPhaseScopeGetSet[] = {
    {"name", PhaseScopeName, nullptr, "The phase name.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyObject* NewPhaseScope(PyObject* core, Session* session, PhaseId id, PyObject* name,
                        const uint64_t* stream = nullptr) {
  auto* s = PyObject_New(PhaseScopeObject, &PhaseScopeType);
  if (s == nullptr) return nullptr;
  Py_XINCREF(core);
  s->core = core;
  s->session = session;
  s->watch = WatchOf(core);
  s->id = id;
  s->has_stream = stream != nullptr;
  s->stream = stream != nullptr ? *stream : 0;
  s->depth = 0;
  s->overflow = 0;
  Py_INCREF(name);
  s->name = name;
  return reinterpret_cast<PyObject*>(s);
}

PyObject* SessionPhaseNamed(PyObject* self, PyObject* name) {
  auto* s = reinterpret_cast<SessionObject*>(self);
  PyObject* cached = PyDict_GetItemWithError(s->phases, name);
  if (cached != nullptr) {
    Py_INCREF(cached);
    return cached;
  }
  if (PyErr_Occurred()) return nullptr;
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "phase name must be a str, not %.100s", Py_TYPE(name)->tp_name);
    return nullptr;
  }
  Session* session = Checked(s);
  if (session == nullptr) return nullptr;
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(name, &size);
  if (utf8 == nullptr) return nullptr;
  absl::StatusOr<PhaseId> id =
      session->RegisterPhase(std::string_view(utf8, static_cast<size_t>(size)));
  PyObject* scope = nullptr;
  if (id.ok()) {
    scope = NewPhaseScope(s->core, session, *id, name);
  } else if (id.status().code() == absl::StatusCode::kFailedPrecondition) {
    // A session inherited through fork(): records nothing here, and says
    // nothing either (DataLoader workers run user code that may use it).
    scope = NewPhaseScope(nullptr, nullptr, Phase::kData, name);
  } else {
    return SetError(id.status());
  }
  if (scope == nullptr) return nullptr;
  if (PyDict_SetItem(s->phases, name, scope) < 0) {
    Py_DECREF(scope);
    return nullptr;
  }
  return scope;
}

}  // namespace

PyObject* PhaseScopeEnter(PyObject* self, PyObject*) {
  auto* s = reinterpret_cast<PhaseScopeObject*>(self);
  ScopeToken token;
  if (s->session != nullptr && s->session->recording()) {
    if (s->watch != nullptr && s->watch->open != nullptr) CheckLoopLeft(s->watch);
    token = s->has_stream ? s->session->BeginPhase(s->id, Stream(s->stream))
                          : s->session->BeginPhase(s->id);
    if (!token.ok() && IsMisuse(token.status)) return RaiseMisuse(token.status);
  }
  if (s->depth >= kMaxOpenScopes) {
    // Deeper than any session records: C++ ignored (and counted) it already.
    ++s->overflow;
  } else {
    s->tokens[s->depth++] = token;
  }
  Py_INCREF(self);
  return self;
}

PyObject* PhaseScopeExit(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  auto* s = reinterpret_cast<PhaseScopeObject*>(self);
  if (s->overflow > 0) {
    --s->overflow;
    Py_RETURN_FALSE;
  }
  if (s->depth == 0) {
    if (ExceptionInFlight(args, nargs)) Py_RETURN_FALSE;
    return SetGpuscopeError("phase scope exited without being entered: use `with s.phase(name):`");
  }
  const ScopeToken token = s->tokens[--s->depth];
  if (token.ok()) {
    if (nargs >= 2 && ExceptionInFlight(args, nargs)) [[unlikely]]
      NoteScopeException(s->session, args[1]);  // before End(): the phase is still open
    const ScopeStatus status = s->session->End(token);
    if (IsMisuse(status) && !ExceptionInFlight(args, nargs)) return RaiseMisuse(status);
  }
  Py_RETURN_FALSE;
}

PyTypeObject PhaseScopeType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "gpuscope._gpuscope._PhaseScope";
  t.tp_basicsize = sizeof(PhaseScopeObject);
  t.tp_dealloc = PhaseScopeDealloc;
  t.tp_repr = PhaseScopeRepr;
  t.tp_call = PhaseScopeCall;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "A phase of a gpuscope session: a context manager and a decorator.";
  t.tp_getset = kPhaseScopeGetSet;
  return t;
}();

// s.phase(name, stream=None) -> the cached scope for `name` (and `stream`).
PyObject* SessionPhase(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nargs == 1 && nkw == 0) return SessionPhaseNamed(self, args[0]);  // the hot path
  PyObject* name = nargs >= 1 ? args[0] : nullptr;
  PyObject* stream = nargs >= 2 ? args[1] : nullptr;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, i);
    PyObject** slot = nullptr;
    if (PyUnicode_CompareWithASCIIString(key, "name") == 0) slot = &name;
    if (PyUnicode_CompareWithASCIIString(key, "stream") == 0) slot = &stream;
    if (slot == nullptr || *slot != nullptr) {
      PyErr_Format(PyExc_TypeError, "phase() got an unexpected or repeated keyword argument %R",
                   key);
      return nullptr;
    }
    *slot = args[nargs + i];
  }
  if (name == nullptr || nargs > 2) {
    PyErr_SetString(PyExc_TypeError,
                    "phase() takes a name and an optional stream: phase(name, stream=None)");
    return nullptr;
  }
  if (stream == nullptr || stream == Py_None) return SessionPhaseNamed(self, name);
  uint64_t handle = 0;
  if (!StreamHandleOf(stream, &handle)) return nullptr;
  auto* s = reinterpret_cast<SessionObject*>(self);
  PyObject* key = Py_BuildValue("(OK)", name, static_cast<unsigned long long>(handle));
  if (key == nullptr) return nullptr;
  PyObject* cached = PyDict_GetItemWithError(s->phases, key);
  if (cached != nullptr) {
    Py_DECREF(key);
    Py_INCREF(cached);
    return cached;
  }
  // The scope without a stream gives the id (and checks the name).
  PyObject* plain = PyErr_Occurred() ? nullptr : SessionPhaseNamed(self, name);
  if (plain == nullptr) {
    Py_DECREF(key);
    return nullptr;
  }
  auto* p = reinterpret_cast<PhaseScopeObject*>(plain);
  PyObject* scope = NewPhaseScope(p->core, p->session, p->id, name, &handle);
  Py_DECREF(plain);
  if (scope == nullptr || PyDict_SetItem(s->phases, key, scope) < 0) {
    Py_DECREF(key);
    Py_XDECREF(scope);
    return nullptr;
  }
  Py_DECREF(key);
  return scope;
}

}  // namespace gpuscope::python::hot
