// What a kernel's name says about the work it does, for the precision and
// communication rules (issue 7): a matrix multiply in FP32, one in a reduced
// precision (TF32, FP16, BF16, FP8, INT8, on tensor cores), a collective
// (NCCL), or anything else.
//
// A heuristic over the names cuBLAS, cuBLASLt, CUTLASS, cuDNN and NCCL give
// their kernels (docs/diagnosis.md lists the patterns). Names are matched
// case-insensitively; a name matching nothing is kOther.
//
// And the process's kernel-name table: activity records carry a kernel's
// name as a small id (DeviceInterval::name), so that a step's records stay
// fixed-size and the name is stored once however often the kernel runs.

#ifndef GPUSCOPE_LIB_BACKENDS_KERNEL_NAMES_H_
#define GPUSCOPE_LIB_BACKENDS_KERNEL_NAMES_H_

#include <cstddef>
#include <cstdint>
#include <string>
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

// KernelClassName()
//
// "gemm_fp32", "gemm_reduced", "gemm", "collective", "other": the class as
// the summary, JSON and Prometheus name it.
std::string_view KernelClassName(KernelClass k);

// The table's bounds: names past kMaxKernelNames distinct ones share
// kOverflowKernelName; a name is kept to its first kMaxKernelNameBytes.
inline constexpr size_t kMaxKernelNames = 1 << 16;
inline constexpr size_t kMaxKernelNameBytes = 1024;
inline constexpr uint32_t kNoKernelName = 0;
inline constexpr uint32_t kOverflowKernelName = 1;

// InternKernelName()
//
// The id of `name` in the process's table, adding it if new: kNoKernelName
// for an empty name, kOverflowKernelName once the table is full. Thread-safe
// (a mutex: called from the worker and readers, never the training thread's
// scopes); ids are stable for the life of the process.
uint32_t InternKernelName(std::string_view name);

// KernelName()
//
// The name interned as `id`: "" for kNoKernelName or an unknown id,
// "(other kernels: gpuscope's name table is full)" for kOverflowKernelName.
std::string KernelName(uint32_t id);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_KERNEL_NAMES_H_
