// absl::Status to a raised Python exception, for code bound with pybind11:
// the exception types are status_to_python.h's (ValueError for a bad
// argument, gpuscope.GpuscopeError otherwise).

#ifndef GPUSCOPE_BINDINGS_VALUE_OR_THROW_H_
#define GPUSCOPE_BINDINGS_VALUE_OR_THROW_H_

#include <pybind11/pybind11.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "status_to_python.h"

namespace gpuscope::python {

// Raises the Python exception for a non-ok `status`.
inline void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  SetError(status);
  throw pybind11::error_already_set();
}

// The value of `result`, or raises the Python exception for its status.
template <typename T>
T ValueOrThrow(absl::StatusOr<T> result) {
  ThrowIfError(result.status());
  return *std::move(result);
}

}  // namespace gpuscope::python

#endif  // GPUSCOPE_BINDINGS_VALUE_OR_THROW_H_
