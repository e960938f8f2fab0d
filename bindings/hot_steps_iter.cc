// _StepsIter, the iterator `s.steps(iterable)` returns, and s.steps() itself:
// for item in s.steps(iterable, samples=..., tokens=...)
//
// Step k begins when the loop asks for item k and ends when it asks for item
// k + 1 (or the loop ends); the wait inside next() is phase "data". The step
// begun to ask for an item that never comes is cancelled, not recorded.
//
// Also the loop watch (see LoopWatch in hot_internal.h): where the loop
// iterating a _StepsIter is, and whether it has been left.

#include <cstdint>

#include "gpuscope/phase.h"
#include "gpuscope/session.h"
#include "hot_internal.h"

namespace gpuscope::python::hot {

constexpr int kMaxLoopRanges = 32;  // as _loopwatch._MAX_LOOP_RANGES

// Not in the anonymous namespace: LoopWatch, shared by every file, points to it.
struct StepsIterObject {
  PyObject_HEAD
  PyObject* core;
  Session* session;
  LoopWatch* watch;   // borrowed from `core`
  PyObject* it;       // the inner iterator; nullptr once exhausted
  PyObject* sized;    // the iterable when its type has a length (len() asks it), or nullptr
  PyObject* samples;  // None, an int, or a callable(item) -> int
  PyObject* tokens;
  ScopeToken step;            // the open step
  unsigned long step_thread;  // the thread that began it (and iterates the loop)
  bool follow_torch;
  // Where the loop iterating this object is, noted at each next() called by
  // a `for` loop's FOR_ITER (not by a bare next(it)). While the step is open
  // the loop's frame is held (so that no other frame can take its place and
  // be mistaken for it); a generator's frame is reached through a weak
  // reference to the generator instead.
  bool loop_known;
  PyObject* loop_frame;      // strong while the step is open; nullptr otherwise
  PyObject* loop_code;       // strong: the frame's code object
  PyObject* loop_generator;  // weakref to the generator running the loop, or nullptr
  int loop_lasti;            // the FOR_ITER offset the ranges were computed for
  int loop_ranges;           // bytecode offsets [begin, end) inside the loop
  int loop_begin[kMaxLoopRanges];
  int loop_end[kMaxLoopRanges];
};

namespace {

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
  Py_VISIT(s->sized);
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
  Py_CLEAR(s->sized);
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
  PyObject* value = PyLong_Check(spec) ? (Py_INCREF(spec), spec) : PyObject_CallOneArg(spec, item);
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
    // Where the loop is, before the step's clock starts: a loop's first
    // next() analyses its bytecode (milliseconds in a big module), which is
    // gpuscope's set-up, not the step's.
    LoopWatch* const watch = s->watch;
    if (watch != nullptr && !NoteLoop(s)) [[unlikely]]
      return nullptr;
    const ScopeToken step = s->session->BeginStep();
    if (!step.ok()) [[unlikely]] {
      Py_CLEAR(s->loop_frame);  // held only while a step is open; `self` is held by our caller
      if (IsMisuse(step.status)) return RaiseMisuse(step.status);
    } else if (watch != nullptr) {
      watch->open = s;
    }
    s->step = step;
    s->step_thread = PyThread_get_thread_ident();
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

// len(s.steps(loader)) is len(loader), asked each time (so that tqdm shows
// a total); only the iterator over an iterable that has a length has one.
Py_ssize_t StepsIterLength(PyObject* self) {
  auto* s = reinterpret_cast<StepsIterObject*>(self);
  if (s->sized == nullptr) {
    PyErr_SetString(PyExc_TypeError, "this steps() iterator no longer knows its iterable's length");
    return -1;
  }
  return PyObject_Size(s->sized);
}

PySequenceMethods kSizedStepsIterSequence = [] {
  PySequenceMethods m{};
  m.sq_length = StepsIterLength;
  return m;
}();

bool HasLength(PyObject* obj) {
  const PyTypeObject* type = Py_TYPE(obj);
  return (type->tp_as_sequence != nullptr && type->tp_as_sequence->sq_length != nullptr) ||
         (type->tp_as_mapping != nullptr && type->tp_as_mapping->mp_length != nullptr);
}

}  // namespace

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

// The same iterator over an iterable that has a length: it has one too.
PyTypeObject SizedStepsIterType = [] {
  PyTypeObject t = StepsIterType;  // the slots above; PyType_Ready() fills in the rest
  t.tp_name = "gpuscope._gpuscope._SizedStepsIter";
  t.tp_doc =
      "Iterates over an iterable that has a length, one training step per item; "
      "len() is the iterable's.";
  t.tp_as_sequence = &kSizedStepsIterSequence;
  t.tp_base = &StepsIterType;
  return t;
}();

void CheckLoopLeft(LoopWatch* watch) {
  StepsIterObject* open = watch->open;
  // The loop was left some time ago, after its last recorded scope: the
  // step ends there, not now.
  if (open != nullptr && LoopLeft(open)) StepsIterAbandon(open);
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
  if (g_loader_note != nullptr) {  // once per loop: a DataLoader names its workers
    PyObject* noted = PyObject_CallFunctionObjArgs(g_loader_note, args[0], it, nullptr);
    if (noted == nullptr) {
      if (!PyErr_ExceptionMatches(PyExc_Exception)) {  // KeyboardInterrupt goes on up
        Py_DECREF(it);
        return nullptr;
      }
      PyErr_Clear();
    } else {
      Py_DECREF(noted);
    }
  }
  const bool sized = HasLength(args[0]);
  auto* iter = PyObject_GC_New(StepsIterObject, sized ? &SizedStepsIterType : &StepsIterType);
  if (iter == nullptr) {
    Py_DECREF(it);
    return nullptr;
  }
  iter->sized = sized ? Py_NewRef(args[0]) : nullptr;
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

}  // namespace gpuscope::python::hot
