// The CUPTI activity source: device activity records from the CUPTI library,
// loaded with dlopen, never linked (docs/architecture.md).
//
// Which library: $GPUSCOPE_LIBCUPTI if set; else a libcupti already loaded in
// the process (torch's), never a second copy beside it; else the CUDA
// toolkit's ($CUDA_HOME, /usr/local/cuda); else the directories in
// $GPUSCOPE_CUPTI_PATH (the Python package puts the PyPI nvidia-cuda-cupti
// package's there).
//
// Ownership policy: step aside when a tool injected itself
// (CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH: Nsight Systems); subscribe
// with cuptiSubscribe_v2 and the name "gpuscope" where the library has it;
// with older CUPTI only when asked (Cupti::kOn); one gpuscope session at a
// time; never cuptiFinalize. Stop() disables the activity kinds, flushes,
// and unsubscribes, after which another profiler can subscribe.

#ifndef GPUSCOPE_LIB_BACKENDS_CUPTI_CUPTI_ACTIVITY_H_
#define GPUSCOPE_LIB_BACKENDS_CUPTI_CUPTI_ACTIVITY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "backends/activity_source.h"
#include "gpuscope/options.h"

namespace gpuscope::internal {

std::unique_ptr<ActivitySource> MakeCuptiActivitySource(Cupti mode);

// The mode after GPUSCOPE_CUPTI (on|off|auto) overrides Cupti::kAuto.
Cupti EffectiveCuptiMode(Cupti requested);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_CUPTI_CUPTI_ACTIVITY_H_
