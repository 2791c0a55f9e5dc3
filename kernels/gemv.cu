// Small-batch GEMV of a decode step, plain and with the gated MLP's silu·mul (fused_layer_ops.h has the math).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/fused_layer_ops.h"
#include "kernels/gated_delta_common.cuh"
#include "kernels/pdl.cuh"

namespace statecut::cuda {
namespace {

using detail::from_f;
using detail::to_f;

// A warp per output column reads its weight row once (16-byte loads, 8 in flight per lane) against the M <= 8 rows
// of x, fp32 sums in k order reduced over the warp, one rounding. At M = 1 cuBLAS's kernels reached 1.4-3.4 TB/s on
// the 1.3B layers' 8-46 MB matrices (62% of the step's copy bandwidth over a layer, H200 profile 2026-12-02).
// SiluMul: column n reads the gate row n and the up row N + n of a packed [gate; up] (the same sums per row) and
// writes round(round(silu(round(g))) · round(u)) — silu_mul's arithmetic on the GEMV's rounded outputs.
// Eight warps a block. Measured at batch 1 on the 1.3B shapes (bench/README.md, 24th wave): four or sixteen warps a
// block within 0.1% of eight, two columns a warp 11% slower (half the blocks in flight).
constexpr int kGemvWarps = 8;
template <typename T, int M, bool SiluMul>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                               T* __restrict__ y, int N, int K) {
  constexpr int R = SiluMul ? 2 : 1;  // weight rows a warp reads
  pdl::wait();                        // before reading what the previous kernel wrote (kernels/pdl.cuh)
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int n = static_cast<int>(blockIdx.x) * kGemvWarps + static_cast<int>(threadIdx.x >> 5);
  if (n >= N) return;
  const T* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = w + static_cast<int64_t>(n + r * N) * K;
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.f;
#pragma unroll(8 / R)
  for (int k = lane * 8; k < K; k += 32 * 8) {
    float wv[R][8];
#pragma unroll
    for (int r = 0; r < R; ++r) detail::load8(wr[r] + k, wv[r]);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float xv[8];
      detail::load8(x + static_cast<int64_t>(m) * K + k, xv);
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[r][m] += wv[r][i] * xv[i];
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], off);
  if (lane != 0) return;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    if constexpr (SiluMul) {
      const float g = to_f<T>(from_f<T>(acc[0][m])), u = to_f<T>(from_f<T>(acc[1][m]));
      y[static_cast<int64_t>(m) * N + n] = from_f<T>(detail::silu_times<T>(g, u));
    } else {
      y[static_cast<int64_t>(m) * N + n] = from_f<T>(acc[0][m]);
    }
  }
}

template <typename T, int M, bool SiluMul>
cudaError_t launch_m(const void* x, const void* w, void* y, int N, int K, cudaStream_t s) {
  return pdl::launch(gemv_kernel<T, M, SiluMul>, dim3(static_cast<unsigned>((N + kGemvWarps - 1) / kGemvWarps)),
                     dim3(kGemvWarps * 32), 0, s, static_cast<const T*>(x), static_cast<const T*>(w),
                     static_cast<T*>(y), N, K);
}

template <typename T, bool SiluMul>
cudaError_t launch(const void* x, const void* w, void* y, int M, int N, int K, cudaStream_t s) {
  switch (M) {
    case 1: return launch_m<T, 1, SiluMul>(x, w, y, N, K, s);
    case 2: return launch_m<T, 2, SiluMul>(x, w, y, N, K, s);
    case 3: return launch_m<T, 3, SiluMul>(x, w, y, N, K, s);
    case 4: return launch_m<T, 4, SiluMul>(x, w, y, N, K, s);
    case 5: return launch_m<T, 5, SiluMul>(x, w, y, N, K, s);
    case 6: return launch_m<T, 6, SiluMul>(x, w, y, N, K, s);
    case 7: return launch_m<T, 7, SiluMul>(x, w, y, N, K, s);
    default: return launch_m<T, 8, SiluMul>(x, w, y, N, K, s);
  }
}

template <bool SiluMul>
cudaError_t checked_launch(ElemType t, const void* x, const void* w, void* y, int M, int N, int K, cudaStream_t s) {
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!x || !w || !y || M < 1 || M > kGemvMaxRows || N < 1 || K < 8 || K % 8 != 0 || !al(x) || !al(w))
    return cudaErrorInvalidValue;
  if (SiluMul && N > 0x3fffffff) return cudaErrorInvalidValue;  // row N + n must fit an int
  return t == ElemType::kBF16 ? launch<__nv_bfloat16, SiluMul>(x, w, y, M, N, K, s)
                              : launch<__half, SiluMul>(x, w, y, M, N, K, s);
}

}  // namespace

cudaError_t gemv(ElemType t, const void* x, const void* w, void* y, int M, int N, int K, cudaStream_t s) {
  return checked_launch<false>(t, x, w, y, M, N, K, s);
}

cudaError_t gemv_silu_mul(ElemType t, const void* x, const void* w, void* y, int M, int N, int K, cudaStream_t s) {
  return checked_launch<true>(t, x, w, y, M, N, K, s);
}

}  // namespace statecut::cuda
