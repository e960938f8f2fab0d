// Kernel names as cuBLAS, cuBLASLt, CUTLASS, NCCL and PyTorch give them,
// and what the precision and communication rules take them for.

#include "backends/kernel_names.h"

#include <string_view>

#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

struct Case {
  std::string_view name;
  KernelClass want;
};

TEST(KernelNamesTest, RealKernelNamesAreClassified) {
  const Case cases[] = {
      // FP32 GEMMs on CUDA cores.
      {"ampere_sgemm_128x64_nn", KernelClass::kGemmFp32},
      {"volta_sgemm_64x64_nt", KernelClass::kGemmFp32},
      {"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_"
       "alignc4_execute_kernel__5x_cublas",
       KernelClass::kGemmFp32},
      {"void cutlass::Kernel<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(Params)",
       KernelClass::kGemmFp32},
      // Reduced precision on tensor cores.
      {"sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4_warpsize2x2x1_"
       "tensor16x8x8_"
       "execute_kernel__5x_cublas",
       KernelClass::kGemmReduced},
      {"ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", KernelClass::kGemmReduced},
      {"ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn",
       KernelClass::kGemmReduced},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
       "segment_k_off_kernel__5x_cublas",
       KernelClass::kGemmReduced},
      {"cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4", KernelClass::kGemmReduced},
      {"sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize64x128x128", KernelClass::kGemmReduced},
      {"turing_h1688gemm_128x128_ldg8_nn", KernelClass::kGemmReduced},
      {"void cutlass::Kernel2<cutlass::gemm::kernel::GemmUniversal<cutlass::bfloat16_t, "
       "cutlass::layout::RowMajor>>(Params)",
       KernelClass::kGemmReduced},
      {"void gemm_kernel<c10::BFloat16, float>(GemmParams)", KernelClass::kGemmReduced},
      // cuBLAS's nvjet GEMMs: precision not decoded, never taken for FP32.
      {"nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NNT", KernelClass::kGemmUnknown},
      {"nvjet_sss_64x8_64x8_2x1_v_bz_NNN", KernelClass::kGemmUnknown},
      // Collectives.
      {"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
       KernelClass::kCollective},
      {"ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", KernelClass::kCollective},
      // Everything else, FP64 included (a deliberate precision).
      {"ampere_dgemm_64x64_nn", KernelClass::kOther},
      {"void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>",
       KernelClass::kOther},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
       "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
       "at::detail::Array<char*, 1>)",
       KernelClass::kOther},
      {"flash_fwd_kernel", KernelClass::kOther},
      {"", KernelClass::kOther},
  };
  for (const Case& c : cases) EXPECT_EQ(ClassifyKernel(c.name), c.want) << c.name;
}

}  // namespace
}  // namespace gpuscope::internal
