// Python data to a JSON tree, for the C++ readers that take a parsed
// document: a run file is parsed once, by Python's json module (which
// carries the loader's protections and messages), and its summary is read
// from that parse without being written out and parsed again.

#ifndef GPUSCOPE_BINDINGS_PY_JSON_H_
#define GPUSCOPE_BINDINGS_PY_JSON_H_

#include <pybind11/pybind11.h>

#include "absl/status/statusor.h"
#include "base/json.h"

namespace gpuscope::python {

// JsonValueFromPython()
//
// Data as json.loads returns it (a dict with str keys, a list or tuple, str,
// int, float, bool, None) as a JsonValue, members in the dict's order.
// InvalidArgumentError naming the problem for what JSON text could not
// hold, as ParseJson would have refused it: a NaN or infinite float, an
// integer too large for a double, a string with a lone surrogate, a key that
// is not a str, another type, or nesting deeper than kMaxJsonDepth. Needs
// the GIL.
absl::StatusOr<internal::JsonValue> JsonValueFromPython(pybind11::handle value);

}  // namespace gpuscope::python

#endif  // GPUSCOPE_BINDINGS_PY_JSON_H_
