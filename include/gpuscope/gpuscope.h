// File: gpuscope/gpuscope.h
// -----------------------------------------------------------------------------
//
// The one header a trainer includes. gpuscope is an always-on flight recorder
// for training loops: it says, every step and at negligible cost, where the
// step time goes and why the GPU is idle.
//
// Example:
//
//   #include <gpuscope/gpuscope.h>
//
//   gpuscope::Session session(gpuscope::Options{.window = 512});
//   for (int i = 0; i < steps; ++i) {
//     gpuscope::StepScope step(session, {.samples = batch_size});
//     { gpuscope::PhaseScope p(session, gpuscope::Phase::kData); NextBatch(); }
//     { gpuscope::PhaseScope p(session, gpuscope::Phase::kForward); Forward(); }
//   }
//   std::cout << gpuscope::FormatReport(session.Summarize());
//
// examples/cpp_training_loop.cc is this example as a complete program;
// `make test` compiles and runs it, and tests/install/main.cc builds the same
// against the installed package.

#ifndef GPUSCOPE_GPUSCOPE_H_
#define GPUSCOPE_GPUSCOPE_H_

#include "gpuscope/analyze.h"
#include "gpuscope/clock.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/doctor.h"
#include "gpuscope/log.h"
#include "gpuscope/options.h"
#include "gpuscope/phase.h"
#include "gpuscope/ranks.h"
#include "gpuscope/report.h"
#include "gpuscope/scopes.h"
#include "gpuscope/session.h"
#include "gpuscope/summary.h"
#include "gpuscope/timeline.h"
#include "gpuscope/version.h"

#endif  // GPUSCOPE_GPUSCOPE_H_
