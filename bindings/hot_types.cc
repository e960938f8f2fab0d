#include "hot_types.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <utility>

#include "gpuscope/clock.h"
#include "gpuscope/options.h"
#include "gpuscope/phase.h"
#include "gpuscope/session.h"
#include "gpuscope/testing.h"
#include "status_to_python.h"

namespace gpuscope::python {
namespace {

PyObject* g_decorate = nullptr;       // gpuscope._session._decorate (strong ref)
bool StreamHandleOf(PyObject* stream, uint64_t* out);

PyObject* g_stream_getter = nullptr;  // gpuscope._session._torch_stream (strong ref)
PyObject* g_loop_range = nullptr;     // gpuscope._session._loop_range (strong ref)

struct StepsIterObject;

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

// Before each step of a session that times a device and was given no fixed
// stream: marks go on the stream torch launches on now (about a microsecond,
// once per step, and only once torch has initialized CUDA). False with a
// Python error set if the getter raised.
bool FollowTorchStream(Session* session, bool follow) {
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

// ---------------------------------------------------------------------------
// The C++ session lives in a capsule shared by the _Session and every scope
// made from it: whichever is released last deletes it.

constexpr const char* kCapsuleName = "gpuscope.Session";

LoopWatch* WatchOf(PyObject* capsule) {
  if (capsule == nullptr) return nullptr;
  void* watch = PyCapsule_GetContext(capsule);
  if (watch == nullptr) PyErr_Clear();
  return static_cast<LoopWatch*>(watch);
}

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

// The statuses Python raises GpuscopeError for. Not kOk, not kDisabled (a
// disabled or forked-away session is silent), and not kTooDeep: as in C++,
// scopes beyond the depth limit are ignored and counted, never an error.
bool IsMisuse(ScopeStatus status) {
  return status != ScopeStatus::kOk && status != ScopeStatus::kDisabled &&
         status != ScopeStatus::kTooDeep;
}

PyObject* RaiseMisuse(ScopeStatus status) { return SetGpuscopeError(ScopeStatusMessage(status)); }

// An __exit__ with an exception in flight never raises a misuse of its own:
// the user's exception propagates unchanged.
bool ExceptionInFlight(PyObject* const* args, Py_ssize_t nargs) {
  return nargs >= 1 && args[0] != Py_None;
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

// ---------------------------------------------------------------------------
// Fast __enter__/__exit__.
//
// CPython 3.11's `with` looks both methods up on the type and binds each to
// the object: with ordinary methods that allocates and frees two GC-tracked
// bound-method objects per block, a third of the block's cost. Here the
// type's __enter__/__exit__ are descriptors of our own whose binding comes
// from a small free list of untracked callables that call the C function
// directly (vectorcall). Behaviour is that of ordinary methods.

using EnterFn = PyObject* (*)(PyObject* self, PyObject*);
using ExitFn = PyObject* (*)(PyObject* self, PyObject* const* args, Py_ssize_t nargs);

struct SlotDescrObject {
  PyObject_HEAD
  PyTypeObject* owner_type;  // the scope type it belongs to (static: no reference)
  EnterFn enter;             // exactly one of enter/exit is set
  ExitFn exit;
};

struct BoundSlotObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* owner;
  EnterFn enter;
  ExitFn exit;
};

constexpr int kBoundSlotFreeListSize = 64;
BoundSlotObject* g_bound_free[kBoundSlotFreeListSize];
int g_bound_free_count = 0;

PyObject* CallSlot(EnterFn enter, ExitFn exit, PyObject* owner, PyObject* const* args,
                   Py_ssize_t nargs) {
  if (enter != nullptr) {
    if (nargs != 0) {
      PyErr_SetString(PyExc_TypeError, "__enter__() takes no arguments");
      return nullptr;
    }
    return enter(owner, nullptr);
  }
  return exit(owner, args, nargs);
}

PyObject* BoundSlotVectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* b = reinterpret_cast<BoundSlotObject*>(self);
  if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0) {
    PyErr_SetString(PyExc_TypeError, "takes no keyword arguments");
    return nullptr;
  }
  return CallSlot(b->enter, b->exit, b->owner, args, PyVectorcall_NARGS(nargsf));
}

void BoundSlotDealloc(PyObject* self) {
  auto* b = reinterpret_cast<BoundSlotObject*>(self);
  Py_CLEAR(b->owner);
  if (g_bound_free_count < kBoundSlotFreeListSize) {
    g_bound_free[g_bound_free_count++] = b;
  } else {
    PyObject_Free(self);
  }
}

PyTypeObject BoundSlotType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "gpuscope._gpuscope._BoundSlot";
  t.tp_basicsize = sizeof(BoundSlotObject);
  t.tp_dealloc = BoundSlotDealloc;
  t.tp_vectorcall_offset = offsetof(BoundSlotObject, vectorcall);
  t.tp_call = PyVectorcall_Call;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  t.tp_doc = "__enter__ or __exit__ bound to a gpuscope scope.";
  return t;
}();

PyObject* SlotDescrGet(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  auto* d = reinterpret_cast<SlotDescrObject*>(self);
  if (!PyObject_TypeCheck(obj, d->owner_type)) {
    PyErr_Format(PyExc_TypeError, "descriptor needs a '%s', not '%.100s'", d->owner_type->tp_name,
                 Py_TYPE(obj)->tp_name);
    return nullptr;
  }
  BoundSlotObject* b;
  if (g_bound_free_count > 0) {
    b = g_bound_free[--g_bound_free_count];
  } else {
    b = static_cast<BoundSlotObject*>(PyObject_Malloc(sizeof(BoundSlotObject)));
    if (b == nullptr) return PyErr_NoMemory();
  }
  PyObject_Init(reinterpret_cast<PyObject*>(b), &BoundSlotType);
  b->vectorcall = BoundSlotVectorcall;
  b->owner = Py_NewRef(obj);
  b->enter = d->enter;
  b->exit = d->exit;
  return reinterpret_cast<PyObject*>(b);
}

// Type.__enter__(scope) and Type.__exit__(scope, ...), unbound.
PyObject* SlotDescrCall(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* d = reinterpret_cast<SlotDescrObject*>(self);
  if ((kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) || PyTuple_GET_SIZE(args) < 1 ||
      !PyObject_TypeCheck(PyTuple_GET_ITEM(args, 0), d->owner_type)) {
    PyErr_Format(PyExc_TypeError, "expected a '%s' as the first argument", d->owner_type->tp_name);
    return nullptr;
  }
  return CallSlot(d->enter, d->exit, PyTuple_GET_ITEM(args, 0), &PyTuple_GET_ITEM(args, 1),
                  PyTuple_GET_SIZE(args) - 1);
}

PyTypeObject SlotDescrType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "gpuscope._gpuscope._SlotDescriptor";
  t.tp_basicsize = sizeof(SlotDescrObject);
  t.tp_dealloc = [](PyObject* self) { PyObject_Free(self); };
  t.tp_call = SlotDescrCall;
  t.tp_descr_get = SlotDescrGet;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "__enter__ / __exit__ of a gpuscope scope.";
  return t;
}();

// Installs `enter` and `exit` as type's __enter__ and __exit__.
bool InstallFastSlots(PyTypeObject* type, EnterFn enter, ExitFn exit) {
  for (int i = 0; i < 2; ++i) {
    auto* d = PyObject_New(SlotDescrObject, &SlotDescrType);
    if (d == nullptr) return false;
    d->owner_type = type;
    d->enter = i == 0 ? enter : nullptr;
    d->exit = i == 0 ? nullptr : exit;
    const int rc = PyDict_SetItemString(type->tp_dict, i == 0 ? "__enter__" : "__exit__",
                                        reinterpret_cast<PyObject*>(d));
    Py_DECREF(d);
    if (rc < 0) return false;
  }
  PyType_Modified(type);
  return true;
}

// Ends the open s.steps() step of `watch` when its loop has been left (see
// LoopWatch): called before a scope begins, so that a phase or step after the
// loop is never counted in the loop's last step. Never raises.
void CheckLoopLeft(LoopWatch* watch);

// ---------------------------------------------------------------------------
// _PhaseScope

struct PhaseScopeObject {
  PyObject_HEAD
  PyObject* core;    // the session capsule, or nullptr for a scope that records nothing
  Session* session;  // borrowed from `core`
  LoopWatch* watch;  // borrowed from `core`
  PhaseId id;
  bool has_stream;   // s.phase(name, stream=...): marks go on `stream`
  uint64_t stream;
  int depth;         // tokens[0..depth) are open (the same name may nest)
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

PyObject* PhaseScopeEnter(PyObject* self, PyObject*) {
  auto* s = reinterpret_cast<PhaseScopeObject*>(self);
  ScopeToken token;
  if (s->session != nullptr && s->session->recording()) {
    if (s->watch != nullptr && s->watch->open != nullptr) CheckLoopLeft(s->watch);
    token = s->has_stream ? s->session->BeginPhase(s->id, Stream(s->stream)) : s->session->BeginPhase(s->id);
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
    const ScopeStatus status = s->session->End(token);
    if (IsMisuse(status) && !ExceptionInFlight(args, nargs)) return RaiseMisuse(status);
  }
  Py_RETURN_FALSE;
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

// ---------------------------------------------------------------------------
// _StepScope

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
    const ScopeStatus status = s->session->End(token);
    if (IsMisuse(status) && !ExceptionInFlight(args, nargs)) return RaiseMisuse(status);
  }
  Py_RETURN_FALSE;
}

PyObject* StepScopeCall(PyObject* self, PyObject* args, PyObject* kwargs) {
  return Decorate(self, args, kwargs);
}

PyTypeObject StepScopeType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "gpuscope._gpuscope._StepScope";
  t.tp_basicsize = sizeof(StepScopeObject);
  t.tp_dealloc = StepScopeDealloc;
  t.tp_call = StepScopeCall;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "A training step of a gpuscope session: a context manager and a decorator.";
  return t;
}();

// ---------------------------------------------------------------------------
// _StepsIter: for item in s.steps(iterable, samples=..., tokens=...)
//
// Step k begins when the loop asks for item k and ends when it asks for item
// k + 1 (or the loop ends); the wait inside next() is phase "data". The step
// begun to ask for an item that never comes is cancelled, not recorded.

constexpr int kMaxLoopRanges = 32;  // as _session._MAX_LOOP_RANGES

struct StepsIterObject {
  PyObject_HEAD
  PyObject* core;
  Session* session;
  LoopWatch* watch;   // borrowed from `core`
  PyObject* it;       // the inner iterator; nullptr once exhausted
  PyObject* samples;  // None, an int, or a callable(item) -> int
  PyObject* tokens;
  ScopeToken step;    // the open step
  unsigned long step_thread;  // the thread that began it (and iterates the loop)
  bool follow_torch;
  // Where the loop iterating this object is, noted at each next() called by
  // a `for` loop's FOR_ITER (not by a bare next(it)). While the step is open
  // the loop's frame is held (so that no other frame can take its place and
  // be mistaken for it); a generator's frame is reached through a weak
  // reference to the generator instead.
  bool loop_known;
  PyObject* loop_frame;       // strong while the step is open; nullptr otherwise
  PyObject* loop_code;        // strong: the frame's code object
  PyObject* loop_generator;   // weakref to the generator running the loop, or nullptr
  int loop_lasti;             // the FOR_ITER offset the ranges were computed for
  int loop_ranges;            // bytecode offsets [begin, end) inside the loop
  int loop_begin[kMaxLoopRanges];
  int loop_end[kMaxLoopRanges];
};

// Ends the open step: now (the loop asked for the next item, or ended), or,
// `abandoned`, at its loop's last recorded scope (the loop was left by
// break, return or an exception some time before this was noticed). Only
// the thread that began the step ends it (a garbage collection may free the
// iterator on any thread): elsewhere the step is left to Close(). The loop's
// frame is let go last: it may hold the last reference to `s`.
void EndStep(StepsIterObject* s, bool abandoned) {
  if (s->watch != nullptr && s->watch->open == s) s->watch->open = nullptr;
  PyObject* frame = s->loop_frame;
  s->loop_frame = nullptr;
  if (s->step.ok()) {
    const ScopeToken step = s->step;
    s->step = ScopeToken{};
    if (s->step_thread == PyThread_get_thread_ident()) {
      if (abandoned) {
        s->session->EndAtLastActivity(step);
      } else {
        s->session->End(step);
      }
    }
  }
  Py_XDECREF(frame);  // `s` may be gone from here on
}

void StepsIterFinish(StepsIterObject* s) { EndStep(s, /*abandoned=*/false); }
void StepsIterAbandon(StepsIterObject* s) { EndStep(s, /*abandoned=*/true); }

int StepsIterTraverse(PyObject* self, visitproc visit, void* arg) {
  auto* s = reinterpret_cast<StepsIterObject*>(self);
  Py_VISIT(s->it);
  Py_VISIT(s->samples);
  Py_VISIT(s->tokens);
  Py_VISIT(s->loop_frame);  // the frame may hold the iterator: a cycle the GC must see
  Py_VISIT(s->loop_code);
  Py_VISIT(s->loop_generator);
  return 0;
}

int StepsIterClear(PyObject* self) {
  auto* s = reinterpret_cast<StepsIterObject*>(self);
  Py_CLEAR(s->it);
  Py_CLEAR(s->samples);
  Py_CLEAR(s->tokens);
  Py_CLEAR(s->loop_frame);
  Py_CLEAR(s->loop_code);
  Py_CLEAR(s->loop_generator);
  return 0;
}

void StepsIterDealloc(PyObject* self) {
  auto* s = reinterpret_cast<StepsIterObject*>(self);
  PyObject_GC_UnTrack(self);
  // A frame still held cannot hold us (we are being freed): let it go with
  // the rest.
  StepsIterFinish(s);
  StepsIterClear(self);
  Py_XDECREF(s->core);
  PyObject_GC_Del(self);
}

#if PY_VERSION_HEX >= 0x030B0000
// Notes the loop calling next() on `s` (see StepsIterObject). False with a
// Python error set only for an error that must propagate (KeyboardInterrupt
// inside the range lookup, say); others leave the loop unknown, and the step
// then simply ends at the next next().
bool NoteLoop(StepsIterObject* s) {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (frame == nullptr || g_loop_range == nullptr) {
    s->loop_known = false;
    return true;
  }
  PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
  const int lasti = PyFrame_GetLasti(frame);
  if (reinterpret_cast<PyObject*>(code) != s->loop_code || lasti != s->loop_lasti) {
    // A new loop (or the first): ask the bytecode where it is (cached there).
    Py_XSETREF(s->loop_code, reinterpret_cast<PyObject*>(code));
    code = nullptr;
    s->loop_lasti = lasti;
    s->loop_known = false;
    s->loop_ranges = 0;
    PyObject* ranges = PyObject_CallFunction(g_loop_range, "Oi", s->loop_code, lasti);
    if (ranges != nullptr && PyTuple_Check(ranges) && PyTuple_GET_SIZE(ranges) >= 1 &&
        PyTuple_GET_SIZE(ranges) <= kMaxLoopRanges) {
      bool ok = true;
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ranges) && ok; ++i) {
        PyObject* r = PyTuple_GET_ITEM(ranges, i);
        ok = PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2;
        if (ok) {
          s->loop_begin[i] = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(r, 0)));
          s->loop_end[i] = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(r, 1)));
          ok = !PyErr_Occurred();
        }
      }
      s->loop_ranges = ok ? static_cast<int>(PyTuple_GET_SIZE(ranges)) : 0;
      s->loop_known = ok;
    }
    Py_XDECREF(ranges);
    if (PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_Exception)) return false;  // KeyboardInterrupt...
      PyErr_Clear();
    }
  }
  Py_XDECREF(code);
  if (!s->loop_known) return true;
  Py_CLEAR(s->loop_generator);
  if (PyObject* gen = PyFrame_GetGenerator(frame)) {  // the loop runs in a generator or coroutine
    s->loop_generator = PyWeakref_NewRef(gen, nullptr);
    Py_DECREF(gen);
    if (s->loop_generator == nullptr) {
      PyErr_Clear();
      s->loop_known = false;
    }
  } else {
    Py_XSETREF(s->loop_frame, Py_NewRef(reinterpret_cast<PyObject*>(frame)));
  }
  return true;
}

bool InLoop(const StepsIterObject* s, PyFrameObject* frame) {
  const int lasti = PyFrame_GetLasti(frame);
  for (int i = 0; i < s->loop_ranges; ++i) {
    if (lasti >= s->loop_begin[i] && lasti < s->loop_end[i]) return true;
  }
  return false;
}

// Whether the loop iterating `s` has certainly been left: its frame is off
// the running thread's stack (its function returned or raised), or on it but
// past the loop. Walks up from the current frame, usually one or two frames
// (a phase in a function the loop body calls).
bool LoopLeft(StepsIterObject* s) {
  if (!s->loop_known || s->step_thread != PyThread_get_thread_ident()) return false;
  if (s->loop_generator != nullptr) {
    // The loop is in a generator: suspended (off the stack) is not left.
    PyObject* gen = PyWeakref_GetObject(s->loop_generator);  // borrowed
    if (gen == nullptr) {
      PyErr_Clear();
      return false;
    }
    if (gen == Py_None) return true;  // the generator is gone
    PyObject* frame = nullptr;
    for (const char* attr : {"gi_frame", "cr_frame", "ag_frame"}) {
      frame = PyObject_GetAttrString(gen, attr);
      if (frame != nullptr) break;
      PyErr_Clear();
    }
    if (frame == nullptr) return false;
    const bool left = frame == Py_None || !InLoop(s, reinterpret_cast<PyFrameObject*>(frame));
    Py_DECREF(frame);
    return left;
  }
  if (s->loop_frame == nullptr) return false;
  auto* loop = reinterpret_cast<PyFrameObject*>(s->loop_frame);
  PyFrameObject* current = PyEval_GetFrame();  // borrowed
  if (current == loop) return !InLoop(s, loop);
  // The loop's frame is held, so no other frame can be at its address: if
  // it is up the stack it is the loop's, and alive.
  PyFrameObject* f = current != nullptr ? PyFrame_GetBack(current) : nullptr;  // new reference
  while (f != nullptr) {
    if (f == loop) {
      Py_DECREF(f);
      return !InLoop(s, loop);
    }
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  return true;
}

// Whether next() on `s` now comes from another loop than the one that
// began its open step (the same iterator taken up again after its first loop
// was left by break or return).
bool CalledFromAnotherLoop(const StepsIterObject* s) {
  if (!s->loop_known || s->loop_frame == nullptr) return false;
  PyFrameObject* frame = PyEval_GetFrame();
  if (frame == nullptr) return false;
  if (reinterpret_cast<PyObject*>(frame) != s->loop_frame) return true;
  return PyFrame_GetLasti(frame) != s->loop_lasti;
}
#else
// Python 3.9 and 3.10: no public frame API to find the loop with; a kept
// iterator's step ends at its next next(), and a step begun meanwhile is a
// nested step (GpuscopeError), as documented.
bool NoteLoop(StepsIterObject* s) {
  s->loop_known = false;
  return true;
}
bool LoopLeft(StepsIterObject*) { return false; }
bool CalledFromAnotherLoop(const StepsIterObject*) { return false; }
#endif

// A count from an int, or from calling `spec` on the batch. -1: not given.
bool CountOf(PyObject* spec, PyObject* item, int64_t* out) {
  if (spec == Py_None) {
    *out = -1;
    return true;
  }
  PyObject* value = PyLong_Check(spec) ? (Py_INCREF(spec), spec)
                                       : PyObject_CallOneArg(spec, item);
  if (value == nullptr) return false;
  const long long v = PyLong_AsLongLong(value);
  Py_DECREF(value);
  if (v == -1 && PyErr_Occurred()) return false;
  if (v < 0) {
    PyErr_Format(PyExc_ValueError, "samples and tokens must be >= 0, got %lld", v);
    return false;
  }
  *out = v;
  return true;
}

PyObject* StepsIterNext(PyObject* self) {
  auto* s = reinterpret_cast<StepsIterObject*>(self);
  if (s->it == nullptr) return nullptr;
  // Its own step: ended now, or where its loop was left if another loop
  // took the iterator up (the loop that began it ended by break or return).
  if (s->step.ok() && CalledFromAnotherLoop(s)) StepsIterAbandon(s);
  StepsIterFinish(s);
  const bool recording = s->session != nullptr && s->session->recording();
  if (recording) {
    // Another loop's step still open: its loop may have been left.
    if (s->watch != nullptr && s->watch->open != nullptr) CheckLoopLeft(s->watch);
    if (!FollowTorchStream(s->session, s->follow_torch)) return nullptr;
    const ScopeToken step = s->session->BeginStep();
    if (!step.ok() && IsMisuse(step.status)) return RaiseMisuse(step.status);
    s->step = step;
    s->step_thread = PyThread_get_thread_ident();
    if (step.ok() && s->watch != nullptr) {
      if (!NoteLoop(s)) {
        s->session->Cancel(s->step);
        s->step = ScopeToken{};
        return nullptr;
      }
      s->watch->open = s;
    }
  }
  const ScopeToken data = recording ? s->session->BeginPhase(Phase::kData) : ScopeToken{};
  PyObject* it = Py_NewRef(s->it);  // the inner iterator may close() us while it runs
  PyObject* item = Py_TYPE(it)->tp_iternext(it);
  Py_DECREF(it);
  if (data.ok()) s->session->End(data);
  if (item == nullptr) {
    // Exhausted or failed: the step begun for this item does not exist.
    if (s->watch != nullptr && s->watch->open == s) s->watch->open = nullptr;
    if (s->step.ok()) s->session->Cancel(s->step);
    s->step = ScopeToken{};
    Py_CLEAR(s->loop_frame);  // `self` is held by our caller
    Py_CLEAR(s->it);
    if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_StopIteration)) PyErr_Clear();
    return nullptr;
  }
  if (s->step.ok() && (s->samples != Py_None || s->tokens != Py_None)) {
    int64_t samples = -1, tokens = -1;
    if (!CountOf(s->samples, item, &samples) || !CountOf(s->tokens, item, &tokens)) {
      Py_DECREF(item);
      return nullptr;
    }
    s->session->SetStepCounts(samples, tokens);
  }
  return item;
}

PyObject* StepsIterClose(PyObject* self, PyObject*) {
  auto* s = reinterpret_cast<StepsIterObject*>(self);
  StepsIterFinish(s);
  Py_CLEAR(s->it);
  Py_RETURN_NONE;
}

PyMethodDef kStepsIterMethods[] = {
    {"close", StepsIterClose, METH_NOARGS, "Ends the open step and stops iterating."},
    {nullptr, nullptr, 0, nullptr},
};

PyTypeObject StepsIterType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "gpuscope._gpuscope._StepsIter";
  t.tp_basicsize = sizeof(StepsIterObject);
  t.tp_dealloc = StepsIterDealloc;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_traverse = StepsIterTraverse;
  t.tp_clear = StepsIterClear;
  t.tp_doc = "Iterates over an iterable, one training step per item.";
  t.tp_iter = PyObject_SelfIter;
  t.tp_iternext = StepsIterNext;
  t.tp_methods = kStepsIterMethods;
  return t;
}();

void CheckLoopLeft(LoopWatch* watch) {
  StepsIterObject* open = watch->open;
  // The loop was left some time ago, after its last recorded scope: the
  // step ends there, not now.
  if (open != nullptr && LoopLeft(open)) StepsIterAbandon(open);
}

// ---------------------------------------------------------------------------
// _Session

struct SessionObject {
  PyObject_HEAD
  Session* session;     // borrowed from core
  PyObject* core;       // capsule owning the Session
  PyObject* phases;     // dict: name -> _PhaseScope
  PyObject* weakrefs;
  PyObject* simulated;  // the SimulatedDevice it runs on, or nullptr
  bool follow_torch;    // stream=None: follow torch's current CUDA stream
};

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
  static const char* kKeywords[] = {"window",         "enabled",           "max_phases",
                                    "queue_capacity", "flush_interval_ms", "clock",
                                    "stream",         "simulated_device",  "cupti",
                                    "telemetry_interval_ms", "trace_steps", nullptr};
  Options options;
  int enabled = 1;
  PyObject* clock = Py_None;
  PyObject* stream = Py_None;
  PyObject* simulated = Py_None;
  PyObject* cupti = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|i$piiiOOOOii:Session", const_cast<char**>(kKeywords),
                                   &options.window, &enabled, &options.max_phases,
                                   &options.queue_capacity, &options.flush_interval_ms, &clock,
                                   &stream, &simulated, &cupti, &options.telemetry_interval_ms,
                                   &options.trace_steps)) {
    return -1;
  }
  options.enabled = enabled != 0;
  if (cupti == Py_True) {
    options.cupti = Cupti::kOn;
  } else if (cupti == Py_False) {
    options.cupti = Cupti::kOff;
  } else if (cupti != Py_None) {
    PyErr_SetString(PyExc_TypeError,
                    "cupti must be None (use CUPTI when it can be shared), True (also older CUPTI, "
                    "which then blocks torch.profiler until release_cupti()) or False");
    return -1;
  }
  if (stream != Py_None) {
    uint64_t handle = 0;
    if (!StreamHandleOf(stream, &handle)) return -1;
    options.stream = handle;
  }
  s->follow_torch = stream == Py_None;
  const bool simulating = (simulated != Py_None && simulated != Py_False) ||
                          (options.enabled && SimulationRequested());
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
      options.simulated_device = pybind11::cast<std::shared_ptr<SimulatedDevice>>(pybind11::handle(simulated));
    } catch (const pybind11::cast_error&) {
      Py_DECREF(simulated);
      PyErr_SetString(PyExc_TypeError,
                      "simulated_device must be a gpuscope.testing.SimulatedDevice, True or None");
      return -1;
    }
    Py_XSETREF(s->simulated, simulated);
  }
  if (clock != Py_None) {
    try {
      options.clock = pybind11::cast<std::shared_ptr<ManualClock>>(pybind11::handle(clock));
    } catch (const pybind11::cast_error&) {
      PyErr_SetString(PyExc_TypeError, "clock must be a gpuscope.testing.ManualClock or None");
      return -1;
    }
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
  Py_XDECREF(s->core);  // deletes the Session unless a scope still holds it
  Py_TYPE(self)->tp_free(self);
}

Session* Checked(SessionObject* s) {
  if (s->session == nullptr) {
    PyErr_SetString(GpuscopeError(), "Session.__init__ was not called");
  }
  return s->session;
}

// A stream argument as a handle: an int >= 0, or an object with an int
// `cuda_stream` (torch.cuda.Stream, ExternalStream). False with a TypeError.
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

PyObject* SessionPhaseNamed(PyObject* self, PyObject* name);

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
      PyErr_Format(PyExc_TypeError, "phase() got an unexpected or repeated keyword argument %R", key);
      return nullptr;
    }
    *slot = args[nargs + i];
  }
  if (name == nullptr || nargs > 2) {
    PyErr_SetString(PyExc_TypeError, "phase() takes a name and an optional stream: phase(name, stream=None)");
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
  absl::StatusOr<PhaseId> id = session->RegisterPhase(std::string_view(utf8, static_cast<size_t>(size)));
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

// Parses (samples=None, tokens=None), positional or keyword, without the
// generic keyword machinery.
bool ParseStepCounts(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
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

// s.step(samples=None, tokens=None) -> a step scope.
PyObject* SessionStep(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  auto* s = reinterpret_cast<SessionObject*>(self);
  Session* session = Checked(s);
  if (session == nullptr) return nullptr;
  PyObject *samples = nullptr, *tokens = nullptr;
  if (!ParseStepCounts(args, nargs, kwnames, &samples, &tokens, 0)) return nullptr;
  StepOptions counts;
  if (!ParseCount(samples, "samples", &counts.samples) || !ParseCount(tokens, "tokens", &counts.tokens)) {
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

// s.steps(iterable, samples=None, tokens=None) -> iterator.
PyObject* SessionSteps(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  auto* s = reinterpret_cast<SessionObject*>(self);
  Session* session = Checked(s);
  if (session == nullptr) return nullptr;
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "steps() needs an iterable");
    return nullptr;
  }
  PyObject *samples = nullptr, *tokens = nullptr;
  if (!ParseStepCounts(args, nargs, kwnames, &samples, &tokens, 1)) return nullptr;
  for (PyObject* spec : {samples, tokens}) {
    if (spec != Py_None && !PyLong_Check(spec) && !PyCallable_Check(spec)) {
      PyErr_SetString(PyExc_TypeError,
                      "samples and tokens must be an int, a callable(batch) -> int, or None");
      return nullptr;
    }
    if (PyLong_Check(spec) && PyLong_AsLongLong(spec) < 0) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "samples and tokens must be >= 0");
      return nullptr;
    }
  }
  PyObject* it = PyObject_GetIter(args[0]);
  if (it == nullptr) return nullptr;
  auto* iter = PyObject_GC_New(StepsIterObject, &StepsIterType);
  if (iter == nullptr) {
    Py_DECREF(it);
    return nullptr;
  }
  Py_INCREF(s->core);
  iter->core = s->core;
  iter->session = session;
  iter->it = it;
  Py_INCREF(samples);
  iter->samples = samples;
  Py_INCREF(tokens);
  iter->tokens = tokens;
  iter->step = ScopeToken{};
  iter->follow_torch = s->follow_torch;
  iter->watch = WatchOf(s->core);
  iter->step_thread = 0;
  iter->loop_known = false;
  iter->loop_frame = nullptr;
  iter->loop_code = nullptr;
  iter->loop_generator = nullptr;
  iter->loop_lasti = -1;
  iter->loop_ranges = 0;
  PyObject_GC_Track(iter);
  return reinterpret_cast<PyObject*>(iter);
}

PyObject* SessionSummaryJson(PyObject* self, PyObject*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  std::string json;
  Py_BEGIN_ALLOW_THREADS
  json = ToJson(session->Summarize());
  Py_END_ALLOW_THREADS
  return PyUnicode_FromStringAndSize(json.data(), static_cast<Py_ssize_t>(json.size()));
}

PyObject* SessionStepSeriesJson(PyObject* self, PyObject*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  std::string json;
  Py_BEGIN_ALLOW_THREADS
  json = StepSeriesToJson(session->StepSeries());
  Py_END_ALLOW_THREADS
  return PyUnicode_FromStringAndSize(json.data(), static_cast<Py_ssize_t>(json.size()));
}

PyObject* SessionTraceJson(PyObject* self, PyObject*) {
  Session* session = Checked(reinterpret_cast<SessionObject*>(self));
  if (session == nullptr) return nullptr;
  std::string json;
  Py_BEGIN_ALLOW_THREADS
  json = session->TraceJson();
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
  Py_BEGIN_ALLOW_THREADS session->ReleaseCupti();
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
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
    {"_summary_json", SessionSummaryJson, METH_NOARGS, "The summary as JSON (C++ ToJson)."},
    {"_step_series_json", SessionStepSeriesJson, METH_NOARGS,
     "The window's steps as JSON (C++ StepSeriesToJson)."},
    {"trace_json", SessionTraceJson, METH_NOARGS,
     "trace_json() -> the last trace_steps steps as a Chrome trace (JSON text): host phases, "
     "device activity, idle gaps. Open in chrome://tracing or ui.perfetto.dev."},
    {"close", SessionClose, METH_NOARGS, "Stops recording and flushes. Idempotent."},
    {"flush", SessionFlush, METH_NOARGS, "Drains queued records into the aggregator."},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef kSessionGetSet[] = {
    {"recording", SessionRecording, nullptr, "Whether scopes record.", nullptr},
    {"window", SessionWindow, nullptr, "Steps kept for exact quantiles.", nullptr},
    {"status", SessionStatus, nullptr, "None, or why the session records nothing.", nullptr},
    {"source", SessionSource, nullptr, "'cupti', 'events' or 'host', right now.", nullptr},
    {"simulated_device", SessionSimulated, nullptr, "The SimulatedDevice it runs on, or None.",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

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

}  // namespace

Session* SessionOf(PyObject* obj) {
  if (!PyObject_TypeCheck(obj, &SessionType)) {
    PyErr_SetString(PyExc_TypeError, "expected a gpuscope.Session");
    return nullptr;
  }
  return Checked(reinterpret_cast<SessionObject*>(obj));
}

void SetDecorator(PyObject* fn) {
  Py_XINCREF(fn);
  Py_XSETREF(g_decorate, fn);
}

void SetStreamGetter(PyObject* fn) {
  Py_XINCREF(fn);
  Py_XSETREF(g_stream_getter, fn);
}

void SetLoopRange(PyObject* fn) {
  Py_XINCREF(fn);
  Py_XSETREF(g_loop_range, fn);
}

bool AddHotTypes(PyObject* module) {
  if (PyType_Ready(&SlotDescrType) < 0 || PyType_Ready(&BoundSlotType) < 0) return false;
  for (auto [type, name] : {std::pair{&SessionType, "_Session"}, std::pair{&PhaseScopeType, "_PhaseScope"},
                            std::pair{&StepScopeType, "_StepScope"}, std::pair{&StepsIterType, "_StepsIter"}}) {
    if (PyType_Ready(type) < 0) return false;
    Py_INCREF(type);
    if (PyModule_AddObject(module, name, reinterpret_cast<PyObject*>(type)) < 0) {
      Py_DECREF(type);
      return false;
    }
  }
  return InstallFastSlots(&PhaseScopeType, PhaseScopeEnter, PhaseScopeExit) &&
         InstallFastSlots(&StepScopeType, StepScopeEnter, StepScopeExit);
}

}  // namespace gpuscope::python
