// The test controls of the fake CUDA driver (tests/cpp/fakes/fake_libcuda.cc,
// built as the fake_libcuda library): a test links fake_libcuda, points
// GPUSCOPE_LIBCUDA at it, and drives the driver's state through these. The
// fake's model (contexts, streams, events, injected errors) is described in
// fake_libcuda.cc.

#ifndef GPUSCOPE_TESTS_CPP_FAKES_FAKE_CUDA_H_
#define GPUSCOPE_TESTS_CPP_FAKES_FAKE_CUDA_H_

#include <cstdint>

extern "C" {

// ---- Contexts and devices.
// Makes device 0's context (CUDA initialized) current on the calling thread.
void fake_cuda_create_context();
// Makes `device`'s context current on the calling thread (created if need be).
void fake_cuda_set_device(int device);
// Back to "CUDA not initialized, no context" (the calling thread's current
// context; other threads' are the test's to reset).
void fake_cuda_reset();
void fake_cuda_set_bus_id(int device, const char* bus_id);
void fake_cuda_set_name(int device, const char* name);

// ---- Work: streams of a device's context, kernels launched on them.
uintptr_t fake_cuda_create_stream(int device);
void fake_cuda_launch(uintptr_t stream, int64_t duration_ns);

// ---- Injected failures (CUresult codes; 0 clears).
void fake_cuda_fail_version(int result);
void fake_cuda_fail_records(int result);
void fake_cuda_set_sticky_error(int result);

// ---- Counters.
int fake_cuda_init_calls();                 // cuInit calls
int fake_cuda_push_balance();               // cuCtxPushCurrent calls not yet popped
int64_t fake_cuda_live_events();            // events created and not destroyed
int64_t fake_cuda_records();                // cuEventRecord calls that succeeded
int64_t fake_cuda_wrong_context_records();  // records on another context's stream

}  // extern "C"

#endif  // GPUSCOPE_TESTS_CPP_FAKES_FAKE_CUDA_H_
