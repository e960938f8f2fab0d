// The Python types on the training loop's hot path, written against the
// CPython C API rather than through pybind11: a `with s.phase("forward")`
// must cost little more than CPython's own `with` on a C object, so every
// call here is a direct C slot or METH_O/METH_FASTCALL method with no
// argument-conversion layer (see benchmarks/python_overhead.py).
//
//   _Session      owns a gpuscope::Session; phase(), step(), steps()
//   _PhaseScope   one per phase name per session, cached; re-entrant
//   _StepScope    one per s.step(...) call
//   _StepsIter    s.steps(iterable): one step per item, next() is "data"
//
// Scopes keep the C++ session alive through a capsule they share with the
// _Session, so no reference cycle exists and a session is closed as soon as
// its last reference goes.
//
// One file per type (hot_session.cc, hot_phase_scope.cc, hot_step_scope.cc,
// hot_steps_iter.cc), with the fast __enter__/__exit__ in hot_fast_slots.cc,
// this header's functions in hot_module.cc, and what they share in
// hot_internal.h.

#ifndef GPUSCOPE_BINDINGS_HOT_TYPES_H_
#define GPUSCOPE_BINDINGS_HOT_TYPES_H_

#include <Python.h>

#include <memory>

#include "gpuscope/session.h"

namespace gpuscope::python {

// Readies the types and adds them to `module`. False with a Python error set
// on failure.
bool AddHotTypes(PyObject* module);

// The session behind a _Session instance (or subclass), or nullptr with a
// TypeError set.
Session* SessionOf(PyObject* obj);

// Installs the Python function that turns (context_manager, fn) into a
// decorated function: gpuscope._session._decorate.
void SetDecorator(PyObject* fn);

// Installs the Python function that returns torch's current CUDA stream
// handle (or None): gpuscope._session._torch_stream.
void SetStreamGetter(PyObject* fn);

// Installs the Python function that gives the bytecode range of the `for`
// loop whose FOR_ITER is at (code, offset), or None: gpuscope._loopwatch._loop_range.
void SetLoopRange(PyObject* fn);

// Installs the Python function that s.steps(iterable) calls with (iterable,
// iterator) once the iterator exists (its errors are dropped):
// gpuscope._loader.note_loader, which names a DataLoader's workers.
void SetLoaderNote(PyObject* fn);

// Installs the Python function a scope ending by an exception calls with
// it: None unless a CUDA out-of-memory error, else (device, requested,
// allocated, reserved, total, message, snapshot): gpuscope._memory.oom_details.
void SetOomDetails(PyObject* fn);

}  // namespace gpuscope::python

#endif  // GPUSCOPE_BINDINGS_HOT_TYPES_H_
