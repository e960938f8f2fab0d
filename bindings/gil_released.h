// GilReleased: the GIL released for a scope, safe in a daemon thread at exit.
//
// Use it instead of pybind11::gil_scoped_release around C++ work that other
// Python threads may overlap (a summary, the doctor's reads):
//
//   Summary summary;
//   {
//     GilReleased released;
//     summary = session->Summarize();
//   }
//
// Why not gil_scoped_release: before Python 3.14, a thread that takes the GIL
// back while the interpreter finalizes is ended by CPython with
// pthread_exit(), which unwinds the thread's stack (a "forced unwind"). A
// daemon thread that calls Session.summary() in a loop (a monitor, a metrics
// server) is in that state whenever the program ends during a summary. The
// unwind starts inside the guard's destructor; pybind11's is noexcept, so the
// C++ runtime calls std::terminate() and the whole training process aborts
// ("terminate called without an active exception") at the end of a run that
// had succeeded. This destructor lets the unwind through: the daemon thread
// ends, as CPython meant it to, and the process exits normally. pybind11's
// dispatcher rethrows the forced unwind, and the C frames above it are left
// by the unwinder.

#ifndef GPUSCOPE_BINDINGS_GIL_RELEASED_H_
#define GPUSCOPE_BINDINGS_GIL_RELEASED_H_

#include <Python.h>

namespace gpuscope::python {

class GilReleased {
 public:
  GilReleased() : state_(PyEval_SaveThread()) {}
  // noexcept(false): CPython may end this thread from inside
  // PyEval_RestoreThread(); see the file comment.
  ~GilReleased() noexcept(false) { PyEval_RestoreThread(state_); }

  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  PyThreadState* state_;
};

}  // namespace gpuscope::python

#endif  // GPUSCOPE_BINDINGS_GIL_RELEASED_H_
