// _StepScope, the context manager and decorator `s.step()` returns, and
// s.step() itself. A step scope is made per call, from a free list, and
// remembers its counts (samples, tokens) until it is entered.

#include <cstdint>

#include "gpuscope/options.h"
#include "gpuscope/session.h"
#include "hot_internal.h"
#include "status_to_python.h"

namespace gpuscope::python::hot {
namespace {

struct StepScopeObject {
  PyObject_HEAD
  PyObject* core;
  Session* session;
  LoopWatch* watch;
  StepOptions counts;
  ScopeToken token;
  bool entered;
  bool follow_torch;
};

// One step scope per s.step() call, from a free list: a step costs no
// allocation in steady state.
constexpr int kStepScopeFreeListSize = 16;
StepScopeObject* g_step_free[kStepScopeFreeListSize];
int g_step_free_count = 0;

void StepScopeDealloc(PyObject* self) {
  auto* s = reinterpret_cast<StepScopeObject*>(self);
  Py_CLEAR(s->core);
  if (g_step_free_count < kStepScopeFreeListSize) {
    g_step_free[g_step_free_count++] = s;
  } else {
    PyObject_Free(self);
  }
}

PyObject* StepScopeCall(PyObject* self, PyObject* args, PyObject* kwargs) {
  return Decorate(self, args, kwargs);
}

bool ParseCount(PyObject* value, const char* what, int64_t* out) {
  if (value == nullptr || value == Py_None) {
    *out = -1;
    return true;
  }
  const long long v = PyLong_AsLongLong(value);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Format(PyExc_TypeError, "%s must be an int or None", what);
    return false;
  }
  if (v < 0) {
    PyErr_Format(PyExc_ValueError, "%s must be >= 0, got %lld", what, v);
    return false;
  }
  *out = v;
  return true;
}

}  // namespace

PyObject* StepScopeEnter(PyObject* self, PyObject*) {
  auto* s = reinterpret_cast<StepScopeObject*>(self);
  if (s->entered) {
    return SetGpuscopeError(
        "this step is already open: steps do not nest; end it before beginning the next one");
  }
  if (s->session != nullptr && s->session->recording()) {
    if (s->watch != nullptr && s->watch->open != nullptr) CheckLoopLeft(s->watch);
    if (!FollowTorchStream(s->session, s->follow_torch)) return nullptr;
    const ScopeToken token = s->session->BeginStep(s->counts);
    if (!token.ok() && IsMisuse(token.status)) return RaiseMisuse(token.status);
    s->token = token;
  }
  s->entered = true;
  Py_INCREF(self);
  return self;
}

PyObject* StepScopeExit(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  auto* s = reinterpret_cast<StepScopeObject*>(self);
  if (!s->entered) {
    if (ExceptionInFlight(args, nargs)) Py_RETURN_FALSE;
    return SetGpuscopeError("step scope exited without being entered: use `with s.step():`");
  }
  s->entered = false;
  const ScopeToken token = s->token;
  s->token = ScopeToken{};
  if (token.ok()) {
    if (nargs >= 2 && ExceptionInFlight(args, nargs)) [[unlikely]]
      NoteScopeException(s->session, args[1]);  // before End(): the step is still open
    const ScopeStatus status = s->session->End(token);
    if (IsMisuse(status) && !ExceptionInFlight(args, nargs)) return RaiseMisuse(status);
  }
  Py_RETURN_FALSE;
}

// step._cancel(): closes an entered step (and any scope opened inside it)
// without recording it: for a step begun ahead of work that never came,
// such as the one the zero-code runner opens after the last optimizer step.
PyObject* StepScopeCancel(PyObject* self, PyObject*) {
  auto* s = reinterpret_cast<StepScopeObject*>(self);
  if (!s->entered) Py_RETURN_NONE;
  s->entered = false;
  const ScopeToken token = s->token;
  s->token = ScopeToken{};
  if (token.ok()) s->session->Cancel(token);
  Py_RETURN_NONE;
}

PyMethodDef kStepScopeMethods[] = {
    {"_cancel", StepScopeCancel, METH_NOARGS,
     "Closes the entered step without recording it (and any scope opened inside it)."},
    {nullptr, nullptr, 0, nullptr},
};

PyTypeObject StepScopeType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "gpuscope._gpuscope._StepScope";
  t.tp_methods = kStepScopeMethods;
  t.tp_basicsize = sizeof(StepScopeObject);
  t.tp_dealloc = StepScopeDealloc;
  t.tp_call = StepScopeCall;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "A training step of a gpuscope session: a context manager and a decorator.";
  return t;
}();

// s.step(samples=None, tokens=None) -> a step scope.
PyObject* SessionStep(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  auto* s = reinterpret_cast<SessionObject*>(self);
  Session* session = Checked(s);
  if (session == nullptr) return nullptr;
  PyObject *samples = nullptr, *tokens = nullptr;
  if (!ParseStepCounts(args, nargs, kwnames, &samples, &tokens, 0)) return nullptr;
  StepOptions counts;
  if (!ParseCount(samples, "samples", &counts.samples) ||
      !ParseCount(tokens, "tokens", &counts.tokens)) {
    return nullptr;
  }
  StepScopeObject* scope;
  if (g_step_free_count > 0) {
    scope = g_step_free[--g_step_free_count];
  } else {
    scope = static_cast<StepScopeObject*>(PyObject_Malloc(sizeof(StepScopeObject)));
    if (scope == nullptr) return PyErr_NoMemory();
  }
  PyObject_Init(reinterpret_cast<PyObject*>(scope), &StepScopeType);
  Py_INCREF(s->core);
  scope->core = s->core;
  scope->session = session;
  scope->watch = WatchOf(s->core);
  scope->counts = counts;
  scope->token = ScopeToken{};
  scope->entered = false;
  scope->follow_torch = s->follow_torch;
  return reinterpret_cast<PyObject*>(scope);
}

}  // namespace gpuscope::python::hot
