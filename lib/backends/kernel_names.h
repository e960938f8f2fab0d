// What a kernel's name says about the work it does, for the precision and
// communication rules (issue 7): a matrix multiply in FP32, one in a reduced
// precision (TF32, FP16, BF16, FP8, INT8, on tensor cores), a collective
// (NCCL), or anything else.
//
// A heuristic over the names cuBLAS, cuBLASLt, CUTLASS, cuDNN and NCCL give
// their kernels (docs/diagnosis.md lists the patterns). Names are matched
// case-insensitively; a name matching nothing is kOther.

#ifndef GPUSCOPE_LIB_BACKENDS_KERNEL_NAMES_H_
#define GPUSCOPE_LIB_BACKENDS_KERNEL_NAMES_H_

#include <cstdint>
#include <string_view>

namespace gpuscope::internal {

enum class KernelClass : uint8_t {
  kOther = 0,
  kGemmFp32 = 1,     // a GEMM on FP32 CUDA cores (sgemm, f32 xmma without tf32)
  kGemmReduced = 2,  // a GEMM in TF32, FP16, BF16, FP8 or INT8 (tensor cores)
  kCollective = 3,   // an NCCL kernel (all-reduce, all-gather, send/recv, ...)
  kGemmUnknown = 4,  // a GEMM whose name does not say its precision (cuBLAS's nvjet_*)
};

// ClassifyKernel()
//
// The class of the kernel named `name` (mangled or demangled). Pure; costs a
// few passes over the name.
KernelClass ClassifyKernel(std::string_view name);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_KERNEL_NAMES_H_
