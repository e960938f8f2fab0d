// One convention for a vendor call that fails (CUDA driver, CUPTI, NVML),
// so that a reason reads the same whichever library said no:
//
//   <call> failed: <the vendor's name for the code>[ (<hint>)] at <file>:<line>
//
//   "cuEventQuery(ev) failed: CUDA_ERROR_ILLEGAL_ADDRESS at cuda_driver_timer.cc:231"
//   "nvmlInit() failed: NVML_ERROR_DRIVER_NOT_LOADED (no NVIDIA driver is loaded) at nvml.cc:140"
//
// Each backend names its vendor's codes with the vendor's own words
// (cuGetErrorName, cuptiGetResultString, NVML's enumerators from nvml.h),
// "<vendor> error <number>" where the library cannot name one, and wraps its
// calls in one macro over VendorCallError (GPUSCOPE_CU_CALL,
// GPUSCOPE_CUPTI_CALL, GPUSCOPE_NVML_CALL) that captures the call as written
// and where it is. This header includes no vendor header: it is the
// interface every backend shares.

#ifndef GPUSCOPE_LIB_BACKENDS_VENDOR_STATUS_H_
#define GPUSCOPE_LIB_BACKENDS_VENDOR_STATUS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuscope::internal {

// VendorCallError()
//
// The Status for `call` failing with the error the vendor names `error`:
// code `code` (Internal unless the failure means something to the caller,
// as NVML failing to initialize does), `hint` (may be empty) in parentheses
// after the name, and the file's name (not its path: messages reach users)
// with `line`.
absl::Status VendorCallError(absl::StatusCode code, absl::string_view call, absl::string_view error,
                             absl::string_view hint, absl::string_view file, int line);

// UnnamedVendorError()
//
// "CUDA error 999": how a code is named when its library cannot name it
// (not loaded, or a code newer than the library's names).
std::string UnnamedVendorError(absl::string_view vendor, int64_t code);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_VENDOR_STATUS_H_
