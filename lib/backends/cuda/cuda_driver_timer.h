// DeviceTimer over the CUDA driver API, loaded with dlopen("libcuda.so.1")
// (never linked, so one build runs with or without a GPU, beside whatever
// CUDA runtime the framework ships). Markers are CUDA events.
//
// Context: the session's markers live in the context that is current on the
// recording thread when it first records a scope (torch's primary context, a
// C++ trainer's own). Until a context is current there, scopes carry no
// markers; the background side then creates the event pool in that context.
//
// Host time of a completed event: a calibration event recorded on a private
// non-blocking stream and polled to completion gives a (device, host) pair
// (error: half the polling bracket plus cuEventElapsedTime's ~0.5 us);
// cuEventElapsedTime from it to any marker gives the marker's host time. The
// pair is refreshed every 10 s against drift. Nothing ever synchronizes a
// stream of the user's.

#ifndef GPUSCOPE_LIB_BACKENDS_CUDA_CUDA_DRIVER_TIMER_H_
#define GPUSCOPE_LIB_BACKENDS_CUDA_CUDA_DRIVER_TIMER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/device_timer.h"

namespace gpuscope::internal {

// The library to load: GPUSCOPE_LIBCUDA if set (tests point it at a fake
// driver), else "libcuda.so.1".
std::string CudaDriverLibraryName();

// A timer over the CUDA driver. Start() fails (lowering the session to host)
// when the library cannot be loaded, lacks an entry point, or cuInit fails.
std::unique_ptr<DeviceTimer> MakeCudaDriverTimer();

// OkStatus() when the CUDA driver loads and CUDA has been initialized in
// this process (by the framework: gpuscope never calls cuInit); else why not.
absl::Status CudaInitializedInProcess();

// ProcessCudaDeviceBusIds()
//
// The PCI bus ids ("0000:17:00.0") of the CUDA devices whose primary context
// is active in this process: the GPUs the job uses (the framework's, as
// PyTorch's; a context made with cuCtxCreate is not seen). Never initializes
// CUDA: FailedPrecondition until the framework has. Cheap (a few driver
// calls per device); any thread.
absl::StatusOr<std::vector<std::string>> ProcessCudaDeviceBusIds();

// ProcessCudaDeviceName()
//
// The model name ("NVIDIA H100 80GB HBM3") of the device of this thread's
// current CUDA context, else of the first device whose primary context is
// active in this process. Never initializes CUDA: FailedPrecondition until
// the framework has, NotFound while no device is in use.
absl::StatusOr<std::string> ProcessCudaDeviceName();

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_CUDA_CUDA_DRIVER_TIMER_H_
