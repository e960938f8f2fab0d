// Compiled, never run, by tests/compile/CMakeLists.txt, with -Werror. With no
// GPUSCOPE_MISUSE_* macro, each scope constructor is used as it should be (a
// named scope) and the file must compile. With one, that constructor is used
// as an unnamed temporary, a scope that ends at its semicolon and records
// nothing useful, and the file must not compile: scopes.h marks every
// constructor [[nodiscard]].

#include <string_view>

#include "gpuscope/options.h"
#include "gpuscope/phase.h"
#include "gpuscope/scopes.h"
#include "gpuscope/session.h"

namespace gpuscope_compile_check {

// One use of each constructor. The parameters stand in for a loop's session,
// a registered phase, a phase name and a copy stream.
void Loop([[maybe_unused]] gpuscope::Session& session, [[maybe_unused]] gpuscope::PhaseId id,
          [[maybe_unused]] std::string_view name, [[maybe_unused]] gpuscope::Stream stream) {
#if defined(GPUSCOPE_MISUSE_STEP)
  gpuscope::StepScope(session, {.samples = 8});
#elif defined(GPUSCOPE_MISUSE_PHASE_ID)
  gpuscope::PhaseScope{session, id};  // braces make a temporary too
#elif defined(GPUSCOPE_MISUSE_PHASE_BUILTIN)
  gpuscope::PhaseScope(session, gpuscope::Phase::kData);
#elif defined(GPUSCOPE_MISUSE_PHASE_NAME)
  gpuscope::PhaseScope(session, name);
#elif defined(GPUSCOPE_MISUSE_PHASE_LITERAL)
  gpuscope::PhaseScope(session, "attention");
#elif defined(GPUSCOPE_MISUSE_PHASE_ID_STREAM)
  gpuscope::PhaseScope(session, id, stream);
#elif defined(GPUSCOPE_MISUSE_PHASE_BUILTIN_STREAM)
  gpuscope::PhaseScope(session, gpuscope::Phase::kH2D, stream);
#elif defined(GPUSCOPE_MISUSE_PHASE_NAME_STREAM)
  gpuscope::PhaseScope(session, name, stream);
#elif defined(GPUSCOPE_MISUSE_PHASE_LITERAL_STREAM)
  gpuscope::PhaseScope(session, "copy", stream);
#else
  gpuscope::StepScope step(session, {.samples = 8});
  gpuscope::PhaseScope by_id{session, id};
  gpuscope::PhaseScope builtin(session, gpuscope::Phase::kData);
  gpuscope::PhaseScope by_name(session, name);
  gpuscope::PhaseScope literal(session, "attention");
  gpuscope::PhaseScope by_id_on(session, id, stream);
  gpuscope::PhaseScope builtin_on(session, gpuscope::Phase::kH2D, stream);
  gpuscope::PhaseScope by_name_on(session, name, stream);
  gpuscope::PhaseScope literal_on(session, "copy", stream);
#endif
}

}  // namespace gpuscope_compile_check
