// The one place an absl::Status becomes a Python exception.
//
//   InvalidArgument, OutOfRange -> ValueError (a bad argument: fix the call)
//   everything else             -> gpuscope.GpuscopeError
//
// Messages are passed through unchanged: they already say what to do.

#ifndef GPUSCOPE_BINDINGS_STATUS_TO_PYTHON_H_
#define GPUSCOPE_BINDINGS_STATUS_TO_PYTHON_H_

#include <Python.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace gpuscope::python {

// gpuscope.GpuscopeError (a RuntimeError), created by the module.
PyObject* GpuscopeError();

// Sets the Python error for a non-ok `status` and returns nullptr, so callers
// can `return SetError(status);`.
inline PyObject* SetError(const absl::Status& status) {
  PyObject* type = status.code() == absl::StatusCode::kInvalidArgument ||
                           status.code() == absl::StatusCode::kOutOfRange
                       ? PyExc_ValueError
                       : GpuscopeError();
  const std::string message(status.message().data(), status.message().size());
  PyErr_SetString(type, message.c_str());
  return nullptr;
}

inline PyObject* SetGpuscopeError(std::string_view message) {
  const std::string m(message);
  PyErr_SetString(GpuscopeError(), m.c_str());
  return nullptr;
}

}  // namespace gpuscope::python

#endif  // GPUSCOPE_BINDINGS_STATUS_TO_PYTHON_H_
