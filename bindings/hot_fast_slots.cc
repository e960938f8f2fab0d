// The __enter__/__exit__ descriptors of the scope types (see hot_fast_slots.h):
// a type's descriptor binds to a scope by taking a callable from a free list,
// and that callable calls the scope's C enter or exit function directly.

#include "hot_fast_slots.h"

#include <cstddef>

namespace gpuscope::python::hot {
namespace {

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

// Bound callables are reused from a free list: binding one per `with` would
// otherwise allocate and free every time. The list is a plain global that
// the GIL guards; a free-threaded CPython (Py_GIL_DISABLED) has no GIL to
// guard it, so there every bound callable is allocated and freed
// (docs/benchmarks.md measures what that costs). GPUSCOPE_NO_SLOT_FREE_LIST
// builds the same on a CPython with a GIL, to measure it.
#if !defined(Py_GIL_DISABLED) && !defined(GPUSCOPE_NO_SLOT_FREE_LIST)
#define GPUSCOPE_SLOT_FREE_LIST 1
constexpr int kBoundSlotFreeListSize = 64;
BoundSlotObject* g_bound_free[kBoundSlotFreeListSize];
int g_bound_free_count = 0;
#endif

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

PyObject* BoundSlotVectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                              PyObject* kwnames) {
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
#ifdef GPUSCOPE_SLOT_FREE_LIST
  if (g_bound_free_count < kBoundSlotFreeListSize) {
    g_bound_free[g_bound_free_count++] = b;
    return;
  }
#endif
  PyObject_Free(self);
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
  BoundSlotObject* b = nullptr;
#ifdef GPUSCOPE_SLOT_FREE_LIST
  if (g_bound_free_count > 0) b = g_bound_free[--g_bound_free_count];
#endif
  if (b == nullptr) {
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

}  // namespace

bool ReadyFastSlotTypes() {
  return PyType_Ready(&SlotDescrType) >= 0 && PyType_Ready(&BoundSlotType) >= 0;
}

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

}  // namespace gpuscope::python::hot
