// Python attributes from the one declaration of a summary's fields.
//
// lib/export/summary_fields.h lists each struct's fields once, in a
// *Fields() function that a visitor walks (the JSON writer and reader are
// two such visitors). FieldProperties is a third: walked over a prototype
// object, it defines one read-only Python property per field on a pybind11
// class, named as the field is in JSON and converted as the JSON encoding
// does (optional or NaN: None, a list, a dict of numbers, a nested bound
// object). Where the Python API differs from the JSON, the caller names the
// field as an exception and defines that property itself. Each getter
// returns a typed handle (pybind11/typing.h), so that its signature, and the
// type stubs generated from it (scripts/gen_stubs.py), give the attribute's
// type: `float | None`, `list[str]`, `dict[str, float]`, a bound class.
//
// Value semantics of the bound views (AddValueMethods): two objects are
// equal when every attribute is, as the dataclasses they replace compared
// (NaN, shown as None, equals NaN; a value hidden behind None is ignored);
// the repr is the dataclass's "Type(name=value, ...)"; copy and deepcopy
// copy the C++ object.

#ifndef GPUSCOPE_BINDINGS_FIELD_PROPERTIES_H_
#define GPUSCOPE_BINDINGS_FIELD_PROPERTIES_H_

#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/typing.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "export/summary_fields.h"
#include "gpuscope/summary.h"

namespace gpuscope::python {

// Text from C++ as a Python str. Invalid UTF-8 (which no session writes, and
// which a summary read from JSON cannot hold) becomes U+FFFD, as JsonWriter
// writes it, rather than raising inside an attribute read.
inline pybind11::str Str(std::string_view text) {
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (s == nullptr) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::str>(s);
}

// `value` as the typed handle `T` (a pybind11::typing type: an annotation
// only), without the check their converting constructors make, which
// accepts anything and costs a reference to the value's type.
template <typename T>
T Typed(pybind11::object value) {
  return pybind11::reinterpret_steal<T>(value.release());
}

// FieldProperties
//
// A summary_fields.h visitor that defines a read-only property per field:
//
//   pybind11::class_<Quantiles> cls(m, "Quantiles");
//   FieldProperties<Quantiles> fields(cls, /*exceptions=*/{});
//   internal::QuantilesFields(fields, fields.prototype());
//   std::vector<std::string> names = fields.Finish();
//
// A property reads its field from `self` at the offset the field has in the
// prototype: Fields() names fields by reference, and a member's offset is
// the same in every object of a (non-virtual) struct.
template <typename T>
class FieldProperties {
  using OptionalFloat = pybind11::typing::Optional<pybind11::float_>;

 public:
  // `exceptions`: fields whose Python attribute the caller defines itself;
  // they are recorded in order (for Finish()) but not defined here.
  FieldProperties(pybind11::class_<T>& cls, std::initializer_list<std::string_view> exceptions)
      : cls_(cls), exceptions_(exceptions.begin(), exceptions.end()) {}

  // The object to walk.
  const T& prototype() const { return prototype_; }

  // The Python attribute names of the fields walked, in declaration order,
  // exceptions included. Throws std::logic_error (an ImportError for the
  // module) if an exception names no field: a renamed field must not
  // silently lose the Python API its exception gave it.
  std::vector<std::string> Finish() {
    for (const std::string& e : exceptions_) {
      if (std::find(names_.begin(), names_.end(), e) == names_.end()) {
        throw std::logic_error("gpuscope bindings: no field '" + e + "' to define by hand");
      }
    }
    return names_;
  }

  // The visitor's methods (summary_fields.h lists them).
  void Int(std::string_view key, const int64_t& field, internal::Range range, bool = true) {
    DefineInt(key, field, range);
  }
  void Int(std::string_view key, const int& field, internal::Range range, bool = true) {
    DefineInt(key, field, range);
  }
  void Number(std::string_view key, const double& field, internal::Range, bool = true) {
    Define(key, field, [](double v) { return pybind11::float_(v); });
  }
  void Bool(std::string_view key, const bool& field, bool = true) {
    Define(key, field, [](bool v) { return pybind11::bool_(v); });
  }
  void String(std::string_view key, const std::string& field) {
    Define(key, field, [](const std::string& v) { return Str(v); });
  }
  void PhaseName(std::string_view key, const std::string& field) { String(key, field); }
  void Source(std::string_view key, const gpuscope::Source& field) {
    Define(key, field, [](gpuscope::Source v) { return Str(SourceName(v)); });
  }
  void Optional(std::string_view key, const std::optional<double>& field, internal::Range,
                bool = true) {
    Define(key, field, [](const std::optional<double>& v) -> OptionalFloat {
      return Typed<OptionalFloat>(v.has_value() ? pybind11::object(pybind11::float_(*v))
                                                : pybind11::object(pybind11::none()));
    });
  }
  void NanNumber(std::string_view key, const double& field, internal::Range, bool = true) {
    Define(key, field, [](double v) -> OptionalFloat {
      return Typed<OptionalFloat>(std::isnan(v) ? pybind11::object(pybind11::none())
                                                : pybind11::object(pybind11::float_(v)));
    });
  }
  void Strings(std::string_view key, const std::vector<std::string>& field) {
    Define(key, field, [](const std::vector<std::string>& v) {
      pybind11::typing::List<pybind11::str> out;
      for (const std::string& s : v) out.append(Str(s));
      return out;
    });
  }
  void Ints(std::string_view key, const std::vector<int>& field, internal::Range) {
    Define(key, field, [](const std::vector<int>& v) {
      pybind11::typing::List<pybind11::int_> out;
      for (int x : v) out.append(pybind11::int_(x));
      return out;
    });
  }
  void NumberMap(std::string_view key, const std::map<std::string, double>& field,
                 internal::Range) {
    Define(key, field, [](const std::map<std::string, double>& v) {
      pybind11::typing::Dict<pybind11::str, pybind11::float_> out;
      for (const auto& [k, x] : v) out[Str(k)] = pybind11::float_(x);
      return out;
    });
  }
  // Nested structs are their own bound classes; an attribute returns a copy.
  template <typename F, typename Fn>
  void Object(std::string_view key, const F& field, Fn, bool = true) {
    Define(key, field, [](const F& v) -> F { return v; });
  }
  template <typename F, typename Fn>
  void OptionalObject(std::string_view key, const std::optional<F>& field, Fn) {
    Define(key, field, [](const std::optional<F>& v) -> pybind11::typing::Optional<F> {
      return Typed<pybind11::typing::Optional<F>>(v.has_value() ? pybind11::cast(*v)
                                                                : pybind11::none());
    });
  }
  template <typename F, typename Fn>
  void Array(std::string_view key, const std::vector<F>& field, Fn, bool = true) {
    Define(key, field, [](const std::vector<F>& v) {
      pybind11::typing::List<F> out;
      for (const F& x : v) out.append(pybind11::cast(x));
      return out;
    });
  }

 private:
  // A state (kState) is -1 when not available: None in Python.
  template <typename I>
  void DefineInt(std::string_view key, const I& field, internal::Range range) {
    if (range == internal::kState) {
      Define(key, field, [](I v) -> pybind11::typing::Optional<pybind11::int_> {
        return Typed<pybind11::typing::Optional<pybind11::int_>>(
            v < 0 ? pybind11::object(pybind11::none()) : pybind11::object(pybind11::int_(v)));
      });
    } else {
      Define(key, field, [](I v) { return pybind11::int_(v); });
    }
  }

  template <typename F, typename Convert>
  void Define(std::string_view key, const F& field, Convert convert) {
    std::string name(key);
    names_.push_back(name);
    if (std::find(exceptions_.begin(), exceptions_.end(), name) != exceptions_.end()) return;
    const ptrdiff_t offset =
        reinterpret_cast<const char*>(&field) - reinterpret_cast<const char*>(&prototype_);
    if (offset < 0 || static_cast<size_t>(offset) + sizeof(F) > sizeof(T)) {
      throw std::logic_error("gpuscope bindings: field '" + name +
                             "' is not a member of the struct walked");
    }
    cls_.def_property_readonly(name.c_str(), [offset, convert](const T& self) {
      return convert(*reinterpret_cast<const F*>(reinterpret_cast<const char*>(&self) + offset));
    });
  }

  pybind11::class_<T>& cls_;
  const T prototype_{};
  std::vector<std::string> exceptions_;
  std::vector<std::string> names_;
};

// The tuple of `self`'s attributes named `names`.
inline pybind11::tuple Attributes(pybind11::handle self, const std::vector<std::string>& names) {
  pybind11::tuple out(names.size());
  for (size_t i = 0; i < names.size(); ++i) out[i] = self.attr(names[i].c_str());
  return out;
}

// __eq__ (and __hash__ when `hashable`), __repr__ unless `repr` is false,
// __copy__ and __deepcopy__, over the attributes `names`.
template <typename T>
void AddValueMethods(pybind11::class_<T>& cls, std::vector<std::string> names, bool hashable,
                     bool repr = true) {
  namespace py = pybind11;
  cls.def("__eq__", [names](py::object self, py::object other) -> py::object {
    if (!py::isinstance<T>(other)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    if (self.cast<const T&>() == other.cast<const T&>()) return py::bool_(true);  // the common case
    return py::bool_(Attributes(self, names).equal(Attributes(other, names)));
  });
  // Defining __eq__ set __hash__ to None (unhashable), as for a dataclass
  // with a mutable field; a value hash replaces it where the old type had one.
  if (hashable) {
    // A list attribute (a phase's top kernels) hashes as the tuple of its
    // items, which are values too.
    cls.def("__hash__", [names](py::object self) {
      py::list items;
      for (py::handle a : Attributes(self, names)) {
        items.append(py::isinstance<py::list>(a)
                         ? py::object(py::tuple(py::reinterpret_borrow<py::list>(a)))
                         : py::reinterpret_borrow<py::object>(a));
      }
      return py::hash(py::tuple(items));
    });
  }
  if (repr) {
    cls.def("__repr__", [names](py::object self) {
      py::list parts;
      for (const std::string& name : names) {
        parts.append(py::str("{}={!r}").format(name, self.attr(name.c_str())));
      }
      return py::str("{}({})").format(py::type::of(self).attr("__qualname__"),
                                      py::str(", ").attr("join")(parts));
    });
  }
  cls.def("__copy__", [](const T& self) { return T(self); });
  cls.def(
      "__deepcopy__", [](const T& self, py::handle /*memo*/) { return T(self); }, py::arg("memo"));
}

}  // namespace gpuscope::python

#endif  // GPUSCOPE_BINDINGS_FIELD_PROPERTIES_H_
