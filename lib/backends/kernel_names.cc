#include "backends/kernel_names.h"

#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/strings/ascii.h"

namespace gpuscope::internal {
namespace {

bool ContainsAny(std::string_view haystack, std::initializer_list<std::string_view> needles) {
  for (std::string_view n : needles) {
    if (haystack.find(n) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

KernelClass ClassifyKernel(std::string_view name) {
  // Long template names: the library's marker sits near the front; 512
  // bytes cover it without scanning kilobytes of template arguments.
  const std::string lower = absl::AsciiStrToLower(std::string(name.substr(0, 512)));
  // NCCL: ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_Generic, ...
  if (ContainsAny(lower, {"nccl"})) return KernelClass::kCollective;
  // cuBLAS 12.8+ names its Hopper/Blackwell GEMMs nvjet_<types>_...; the
  // type letters are not decoded here (unverified), so their precision is
  // unknown: counted as GEMM time, never as FP32.
  if (lower.rfind("nvjet", 0) == 0 || lower.find(" nvjet") != std::string::npos)
    return KernelClass::kGemmUnknown;
  const bool gemm = ContainsAny(lower, {"gemm", "matmul", "xmma"});
  if (!gemm) return KernelClass::kOther;
  // FP64 (dgemm, d884 tensor cores) is the user's choice of precision, not
  // an oversight: left out.
  if (ContainsAny(lower, {"dgemm", "d884", "f64", "double"})) return KernelClass::kOther;
  // Reduced precision: explicit type names, and the tensor-core instruction
  // shapes cuBLAS names its kernels by (s1688/s16816: TF32; h884, h1688,
  // h16816: FP16; bf16 variants; i8816, i16832: INT8; e4m3/e5m2: FP8).
  if (ContainsAny(lower,
                  {"tf32", "bf16",  "bfloat16", "float16", "f16",      "fp16",  "half",   "hgemm",
                   "h884", "h1688", "h16816",   "s1688",   "s16816",   "i8816", "i16832", "int8",
                   "i8i8", "e4m3",  "e5m2",     "fp8",     "tensorop", "hmma",  "bgemm"})) {
    return KernelClass::kGemmReduced;
  }
  // What is left is FP32 on CUDA cores: sgemm, simt, f32 xmma.
  return KernelClass::kGemmFp32;
}

}  // namespace gpuscope::internal

namespace gpuscope::internal {
namespace {

// Names live in a deque (stable addresses, never erased); the map's keys
// view them.
struct NameTable {
  std::mutex mu;
  std::deque<std::string> names{"", "(other kernels: gpuscope's name table is full)"};
  std::unordered_map<std::string_view, uint32_t> ids;
};

NameTable& Table() {
  static NameTable* table = new NameTable();  // never destroyed: used at exit
  return *table;
}

}  // namespace

std::string_view KernelClassName(KernelClass k) {
  switch (k) {
    case KernelClass::kGemmFp32: return "gemm_fp32";
    case KernelClass::kGemmReduced: return "gemm_reduced";
    case KernelClass::kGemmUnknown: return "gemm";
    case KernelClass::kCollective: return "collective";
    case KernelClass::kOther: return "other";
  }
  return "other";
}

uint32_t InternKernelName(std::string_view name) {
  if (name.empty()) return kNoKernelName;
  name = name.substr(0, kMaxKernelNameBytes);
  NameTable& t = Table();
  std::lock_guard<std::mutex> lock(t.mu);
  if (const auto it = t.ids.find(name); it != t.ids.end()) return it->second;
  if (t.names.size() >= kMaxKernelNames) return kOverflowKernelName;
  const auto id = static_cast<uint32_t>(t.names.size());
  t.ids.emplace(t.names.emplace_back(name), id);
  return id;
}

std::string KernelName(uint32_t id) {
  NameTable& t = Table();
  std::lock_guard<std::mutex> lock(t.mu);
  return id < t.names.size() ? t.names[id] : std::string();
}

}  // namespace gpuscope::internal
