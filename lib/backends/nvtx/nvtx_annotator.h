// What a session needs to know about its annotator on the hot path.

#ifndef GPUSCOPE_LIB_BACKENDS_NVTX_NVTX_ANNOTATOR_H_
#define GPUSCOPE_LIB_BACKENDS_NVTX_NVTX_ANNOTATOR_H_

#include "backends/annotator.h"

namespace gpuscope::internal {

// Whether `annotator`'s PushStep(), PushPhase() and Pop() do nothing: the
// null annotator, or the NVTX annotator when no NVTX tool takes ranges (NVTX,
// initialized when the annotator was made, left its range functions null).
// A session then skips those calls altogether: one predictable branch per
// scope end instead of a virtual call that builds an attribute structure.
// Fixed for the annotator's life: NVTX loads a tool only at initialization.
bool AnnotatorIsInert(const Annotator& annotator);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_NVTX_NVTX_ANNOTATOR_H_
