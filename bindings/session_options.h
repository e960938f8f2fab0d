// The table of gpuscope.Session's options: every keyword Session(...) takes,
// once. The binding parses Session(...)'s arguments with it (ParseSessionOptions),
// reads a session's options back with it (OptionsToPython), and exposes it to
// Python as _gpuscope._SESSION_OPTIONS, from which _session.py builds the
// Python signature and the docstring's argument list and _runner.py the
// flags of `gpuscope run`.

#ifndef GPUSCOPE_BINDINGS_SESSION_OPTIONS_H_
#define GPUSCOPE_BINDINGS_SESSION_OPTIONS_H_

#include <Python.h>

#include "gpuscope/options.h"

namespace gpuscope::python::hot {

// What a keyword's converter cannot put into Options alone: SessionInit
// decides with the other options what these mean. Borrowed references.
struct HeldOptions {
  PyObject* stream = Py_None;     // None: follow torch's current stream
  PyObject* simulated = Py_None;  // None, False, True or a SimulatedDevice
  PyObject* on_stall = Py_None;   // None or a callable (the session keeps it)
};

// Session(window=512, *, ...): parses the arguments into *options and *held
// (one positional argument, window; every other keyword-only). False with a
// Python exception (TypeError for a wrong type or an unknown keyword,
// ValueError for a value the converter refuses; the ranges Options::Validate()
// checks are left to it).
bool ParseSessionOptions(PyObject* args, PyObject* kwargs, Options* options, HeldOptions* held);

// A dict of keyword -> the value `options` holds, as Session(...) takes it
// (None where the option is not set), in the table's order.
PyObject* OptionsToPython(const Options& options);

// The table as Python sees it: a tuple of dicts, one per keyword in the
// signature's order, with "name", "type" (the annotation), "default", "range"
// ((lo, hi) or None), "values" (a tuple or None), "doc", "flag" (the metavar of
// `gpuscope run`'s --flag, or None), "flag_help", "unit" and "options_default"
// (what Options{} holds, as Python sees it).
PyObject* SessionOptionsTable();

}  // namespace gpuscope::python::hot

#endif  // GPUSCOPE_BINDINGS_SESSION_OPTIONS_H_
