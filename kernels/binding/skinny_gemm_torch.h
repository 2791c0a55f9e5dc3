/// LibTorch binding of the skinny GEMM (kernels/skinny_gemm.h): x [..., K] · wᵀ for w [N, K], bf16, at the few rows
/// of a batched decode step.
#pragma once
#include <ATen/ATen.h>

namespace statecut::cuda {

/// The most rows of x statecut::linear gives the skinny GEMM. Measured on an H100 (bench/README.md, 43rd wave, whole
/// 1.3B decode steps under graphs, same call, kernels/pdl.cuh's early trigger on both sides): against cuBLAS at
/// batch 8, DeltaNet 1.726 -> 1.575 ms, its 50% prune 1.623 -> 1.437, Gated DeltaNet 2.188 -> 2.083, its prune
/// 1.903 -> 1.670; at 64, 2.995 -> 2.905, 2.319 -> 2.257, 5.189 -> 5.189, 3.348 -> 3.267. From 128 rows on the
/// projections alone ran 1.3-1.5x slower than cuBLAS (its 128 x rows tiles reach a fraction of the tensor peak that
/// cuBLAS's larger ones do).
inline constexpr int64_t kSkinnyGemmPaysRows = 64;

/// True when skinny_gemm serves x · wᵀ: both bf16 on one CUDA device of compute capability 9.0, x contiguous with
/// 1..256 rows, w contiguous [N, K] with K % 8 == 0, both 16-byte aligned.
bool skinny_gemm_apply(const at::Tensor& x, const at::Tensor& w);
/// skinny_gemm_apply, 2..kSkinnyGemmPaysRows rows (one row: the GEMV, fused_layer_ops_torch.h), and the environment
/// does not say STATECUT_SKINNY_GEMM=0 (the switch that lets one benchmark call time both).
bool skinny_gemm_pays(const at::Tensor& x, const at::Tensor& w);
/// x · wᵀ [..., N], one launch (a programmatic dependent of the previous kernel when kernels/pdl.cuh's PDL is on).
at::Tensor skinny_gemm(const at::Tensor& x, const at::Tensor& w);
/// skinny_gemm_pays(x, gate_up), gate_up's row count even, and the environment does not say
/// STATECUT_SKINNY_SILU_MUL=0: where the gated MLP's gate|up projection and its silu·mul take one launch.
bool skinny_silu_mul_pays(const at::Tensor& x, const at::Tensor& gate_up);
/// silu_mul of the two row halves of x · gate_upᵀ (gate_up [2I, K]: gate rows, then up rows) -> [..., I], one launch,
/// the bits of skinny_gemm(x, gate_up) followed by fused_silu_mul of its halves (kernels/skinny_gemm.h).
at::Tensor skinny_gemm_silu_mul(const at::Tensor& x, const at::Tensor& gate_up);

}  // namespace statecut::cuda
