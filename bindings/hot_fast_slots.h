// Fast __enter__/__exit__ for the scope types.
//
// CPython 3.11's `with` looks both methods up on the type and binds each to
// the object: with ordinary methods that allocates and frees two GC-tracked
// bound-method objects per block, a third of the block's cost. Here the
// type's __enter__/__exit__ are descriptors of our own whose binding comes
// from a small free list of untracked callables that call the C function
// directly (vectorcall). Behaviour is that of ordinary methods.

#ifndef GPUSCOPE_BINDINGS_HOT_FAST_SLOTS_H_
#define GPUSCOPE_BINDINGS_HOT_FAST_SLOTS_H_

#include <Python.h>

namespace gpuscope::python::hot {

using EnterFn = PyObject* (*)(PyObject * self, PyObject*);
using ExitFn = PyObject* (*)(PyObject * self, PyObject* const* args, Py_ssize_t nargs);

// Readies the descriptor and bound-slot types. False with a Python error set.
bool ReadyFastSlotTypes();

// Installs `enter` and `exit` as type's __enter__ and __exit__ (after
// ReadyFastSlotTypes() and PyType_Ready(type)). False with a Python error set.
bool InstallFastSlots(PyTypeObject* type, EnterFn enter, ExitFn exit);

}  // namespace gpuscope::python::hot

#endif  // GPUSCOPE_BINDINGS_HOT_FAST_SLOTS_H_
