#include "py_json.h"

#include <Python.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace gpuscope::python {
namespace {

using internal::JsonValue;

absl::Status Convert(PyObject* o, int depth, JsonValue* out) {
  if (o == Py_None) {
    *out = nullptr;
  } else if (PyBool_Check(o)) {  // before int: bool is an int in Python
    *out = o == Py_True;
  } else if (PyLong_Check(o)) {
    int overflow = 0;
    const long long exact = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (exact == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return absl::InvalidArgumentError("an integer could not be read");
    }
    if (overflow == 0) {
      *out = static_cast<int64_t>(exact);
    } else {
      // As the JSON reader takes an integer beyond int64: a double.
      const double value = PyLong_AsDouble(o);
      if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return absl::InvalidArgumentError("an integer is too large for a double");
      }
      *out = value;
    }
  } else if (PyFloat_Check(o)) {
    const double value = PyFloat_AsDouble(o);
    if (!std::isfinite(value)) return absl::InvalidArgumentError("a number is NaN or infinite");
    *out = value;
  } else if (PyUnicode_Check(o)) {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(o, &size);
    if (utf8 == nullptr) {
      PyErr_Clear();
      return absl::InvalidArgumentError("a string is not valid Unicode (a lone surrogate)");
    }
    *out = std::string(utf8, static_cast<size_t>(size));
  } else if (PyList_Check(o) || PyTuple_Check(o)) {
    if (depth >= internal::kMaxJsonDepth) return absl::InvalidArgumentError("nested too deeply");
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    PyObject** items = PySequence_Fast_ITEMS(o);
    JsonValue::array_t elements(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (absl::Status s = Convert(items[i], depth + 1, &elements[static_cast<size_t>(i)]); !s.ok())
        return s;
    }
    *out = std::move(elements);
  } else if (PyDict_Check(o)) {
    if (depth >= internal::kMaxJsonDepth) return absl::InvalidArgumentError("nested too deeply");
    // Appended directly: a dict's keys are distinct, and nlohmann's emplace()
    // would search the members linearly for each.
    JsonValue::object_t members;
    members.reserve(static_cast<size_t>(PyDict_Size(o)));
    Py_ssize_t pos = 0;
    PyObject* key = nullptr;
    PyObject* value = nullptr;
    while (PyDict_Next(o, &pos, &key, &value)) {
      if (!PyUnicode_Check(key)) return absl::InvalidArgumentError("an object key is not a string");
      JsonValue name;
      if (absl::Status s = Convert(key, depth, &name); !s.ok()) return s;
      members.emplace_back(std::move(name.get_ref<std::string&>()), JsonValue());
      if (absl::Status s = Convert(value, depth + 1, &members.back().second); !s.ok()) return s;
    }
    *out = std::move(members);
  } else {
    return absl::InvalidArgumentError(std::string("holds a ") + Py_TYPE(o)->tp_name +
                                      ", which JSON cannot");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JsonValue> JsonValueFromPython(pybind11::handle value) {
  JsonValue out;
  if (absl::Status s = Convert(value.ptr(), 0, &out); !s.ok()) return s;
  return out;
}

}  // namespace gpuscope::python
