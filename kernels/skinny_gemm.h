// A weight-streaming GEMM for the few rows of a batched decode step (issue 14: at 16-256 rows the projections of a
// 1.3B step ran under cuBLAS at 0.44-0.61 of the copy bandwidth, bench/README.md's 19th wave):
//
//   y[m, n] = round_bf16( sum_k x[m, k] w[n, k] )      x M x K, w N x K, y M x N, all row-major and contiguous
//
// with the sum in fp32, for 1 <= M <= kSkinnyGemmMaxRows. How (kernels/skinny_gemm.cu): each block owns 128 rows of
// w and a contiguous range of k; a producer warp streams w's and x's 64-wide k slices into shared memory with the
// tensor copy engine (TMA, 128-byte swizzle) through a ring of stages, and two consumer warpgroups multiply them with
// wgmma (sm_90a), w's rows as the 64-row A operand and x's rows as B (N = x's rows rounded up to 8..256). K is split
// over the blocks of a thread-block cluster (1..8, chosen per shape to fill the SMs); they add their fp32 partial
// tiles through distributed shared memory in rank order, so a result is the same on every run and in a graph replay.
// Launched as a programmatic dependent (kernels/pdl.cuh), a block loads its first weight slices before waiting on the
// kernel before it: weights never depend on it, so their first bytes arrive while that kernel finishes.
//
// Rounding: each block sums its k range in k order, 16-wide groups at a time (wgmma adds each group to its fp32
// accumulators after aligning the terms to the largest, keeping fewer bits than an fp32 add: ~2^-20 Σ|x w| a group
// seen on an H100), the cluster adds the partials in rank order, then one rounding to bf16 (u = 2^-8). The tests hold
// every element to |y - x·wᵀ| <= 2^-8 |x·wᵀ| + (⌈K/16⌉ + 1) · 2^-19 Σ_k |x w| (tests/gpu/skinny_gemm_cuda.cpp).
#pragma once
#include <cuda_runtime_api.h>

namespace statecut::cuda {

/// The most rows of x one call takes (wgmma's largest N).
inline constexpr int kSkinnyGemmMaxRows = 256;

/// True when the current device runs skinny_gemm: compute capability 9.0 exactly (the kernel is sm_90a machine code,
/// which no other chip runs).
bool skinny_gemm_device_ok();

/// y = x · wᵀ in bf16 as above. Conditions (else cudaErrorInvalidValue, nothing launched): 1 <= M <= 256, N >= 1,
/// K >= 8 with K % 8 == 0, x, w and y 16-byte aligned, skinny_gemm_device_ok(). `dependent`: launched as a
/// programmatic dependent of the stream's previous kernel (unless STATECUT_PDL=0: kernels/pdl.cuh). `cluster` > 0
/// forces the k split (benchmarks), 0 picks it.
cudaError_t skinny_gemm_bf16(const void* x, const void* w, void* y, int M, int N, int K, bool dependent,
                             cudaStream_t s, int cluster = 0);

/// The gated MLP's gate|up projection and its silu·mul in one launch: for gate_up [2N, K] (N gate rows, then N up
/// rows), y [M, N] = round(round(silu(round(g))) · round(u)) with g = x · gateᵀ and u = x · upᵀ as skinny_gemm_bf16
/// forms them: silu_mul's arithmetic (kernels/fused_layer_ops.h) on the rounded sums, so the result is that of
/// skinny_gemm_bf16 of gate_up followed by silu_mul. A block owns 64 gate rows and the 64 up rows N below them; the
/// conditions are skinny_gemm_bf16's, with N <= 2^30.
cudaError_t skinny_gemm_silu_mul_bf16(const void* x, const void* gate_up, void* y, int M, int N, int K,
                                      bool dependent, cudaStream_t s, int cluster = 0);

/// The cluster size (k split) skinny_gemm_bf16 picks for the shape on the current device, for tests and benchmarks.
int skinny_gemm_cluster(int M, int N, int K);

/// Which epilogue a cluster of blocks ends with at up to 64 rows (skinny_gemm.cu: pulled through two cluster
/// barriers, or pushed to each row's rank with st.async and no barrier; the same sums in the same order, so the same
/// bits): mode 1 pushed, 0 pulled, -1 (the start) as the environment says, pushed only with STATECUT_SKINNY_PUSH=1.
/// For tests and benchmarks; process-wide. Pulled is the default: measured (45th wave, H100), pushed saved 3-4% of a
/// DeltaNet 1.3B step's GEMMs at 8 rows and cost 2% at 64, and whole steps were 0.8-1.8% slower but for one case.
void skinny_gemm_push_epilogue(int mode);

}  // namespace statecut::cuda
