// Type hints for pybind11 signatures where pybind11 cannot know the type.
//
// pybind11 writes each bound function's signature into its docstring, and
// scripts/gen_stubs.py generates the package's type stubs from those. An
// argument taken as a plain py::object or py::handle reads `typing.Any`
// there. Hinted<"Name"> is such an argument, any object at run time (no
// check, no conversion: the function checks it as before), written `Name` in
// the signature: a C-API type pybind11 does not know (_Session), or a
// callable's full type.

#ifndef GPUSCOPE_BINDINGS_TYPE_HINTS_H_
#define GPUSCOPE_BINDINGS_TYPE_HINTS_H_

#include <pybind11/pybind11.h>
#include <pybind11/typing.h>

namespace gpuscope::python {

// Every object is one (pybind11's typing types check with PyObject_Type,
// which returns a new reference that is never released).
inline bool AnyObject(PyObject*) { return true; }

template <pybind11::typing::StringLiteral Name>
class Hinted : public pybind11::object {
  PYBIND11_OBJECT_DEFAULT(Hinted, object, AnyObject)
  using object::object;
};

}  // namespace gpuscope::python

namespace pybind11::detail {

template <typing::StringLiteral Name>
struct handle_type_name<gpuscope::python::Hinted<Name>> {
  static constexpr auto name = const_name(sanitize_string_literal<Name>().name);
};

}  // namespace pybind11::detail

#endif  // GPUSCOPE_BINDINGS_TYPE_HINTS_H_
