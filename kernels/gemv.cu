// Small-batch GEMV of a decode step: plain, with the gated MLP's silu·mul, and forming its normalised input itself
// (fused_layer_ops.h has the math).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/fused_layer_ops.h"
#include "kernels/gated_delta_common.cuh"
#include "kernels/pdl.cuh"
#include "kernels/rms_norm_row.cuh"

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
// The one-row GEMV that forms its input (the model's use): six blocks an SM, at most 40 registers a thread, so that
// 792 block slots over the H200's 132 SMs hold a 1.3B layer's widest GEMV (DeltaNet's q|k|v|β, 770 blocks) in one
// wave; forming the row took the gate|up kernel to 44 registers (five blocks an SM: 660 slots for its 704 blocks).
// The plain kernels take the bound of one block an SM: ptxas then gives their one-row forms 80 and 70 registers where
// the bare __launch_bounds__(256) gave 34 and 38 (three blocks an SM instead of six, each warp with more loads in
// flight). Measured in one call (36th wave, both forms built, batch-1 step under graphs): DeltaNet 1.3B 1.157 ms bare
// -> 1.124 bounded, its prune 1.152 -> 1.115, Gated DeltaNet 1.308 -> 1.274, its prune 1.284 -> 1.256: the bound is
// ~3% faster; batch 8 unchanged (1.620 / 1.943 both). Bounding them to six blocks made the gate|up one spill.
constexpr int kGemvNormMinBlocks = 6;
static_assert(kGemvWarps * 32 == detail::kNormThreads, "gemv_norm forms its rows as the norm kernels' blocks do");

/// The norm a GEMV forms before it (gemv_norm; Norm = 0: none, 1: rms_norm(x), 2: add_rms_norm(x, delta)).
template <typename T>
struct NormIn {
  const T* delta;
  const T* w;
  T* sum;
  float eps, w_offset;
};

/// The short conv (width CW, SiLU or not) the columns n < C of a gemv_norm pass through before they are written: the
/// conv1d_step of the same channels after the GEMV (state [1, CW − 1, C] shifted in place, w [C, CW], bias [C] or
/// null), summed in its order (the window in order, the input last, then the bias).
template <typename T>
struct ConvIn {
  T* state;
  const T* w;
  const T* bias;
  int C;
  bool silu;
};

/// Norm != 0: the block writes x's M rows normalised (after the residual add when Norm = 2) into `xs` (shared
/// memory, M x K), each row by the code and the thread layout of the norm kernels (a warp per row for K <=
/// kWarpRowMax, the whole block above: rms_norm_row.cuh), so the input is bit for bit the norm kernels' output. The
/// sums go to n.sum from block 0 and to `ss` (shared, M x K) in the others. Rows of at most one vector a thread (the
/// 1.3B models' hidden 2048) load their norm weight with x and delta (block_norm_row_one_vec).
template <typename T, int M, int Norm>
__device__ __forceinline__ void norm_rows(const T* x, const NormIn<T>& n, T* xs, T* ss, int K) {
  constexpr bool Add = Norm == 2;
  __shared__ float part[kGemvWarps];
  auto sum_row = [&](int m) { return Add ? (blockIdx.x == 0 ? n.sum : ss) + static_cast<int64_t>(m) * K : nullptr; };
  auto delta_row = [&](int m) { return Add ? n.delta + static_cast<int64_t>(m) * K : nullptr; };
  if (K <= detail::kWarpRowMax) {
    const int m = static_cast<int>(threadIdx.x >> 5);
    if (m < M)
      detail::warp_norm_row<T, 0, 8, Add>(x + static_cast<int64_t>(m) * K, delta_row(m), sum_row(m), n.w, nullptr,
                                          xs + m * K, K, n.eps, n.w_offset);
  } else {
#pragma unroll 1
    for (int m = 0; m < M; ++m) {
      if (K <= 8 * detail::kNormThreads)
        detail::block_norm_row_one_vec<T, Add>(x + static_cast<int64_t>(m) * K, delta_row(m), sum_row(m), n.w,
                                               xs + m * K, K, n.eps, n.w_offset, part);
      else
        detail::block_norm_row<T, 0, 8, Add>(x + static_cast<int64_t>(m) * K, delta_row(m), sum_row(m), n.w, nullptr,
                                             xs + m * K, K, n.eps, n.w_offset, part);
      __syncthreads();  // part is read by every thread before the next row writes it
    }
  }
  __syncthreads();
}

// A warp per output column reads its weight row once (16-byte loads, 8 in flight per lane) against the M <= 8 rows
// of x, fp32 sums in k order reduced over the warp, one rounding. At M = 1 cuBLAS's kernels reached 1.4-3.4 TB/s on
// the 1.3B layers' 8-46 MB matrices (62% of the step's copy bandwidth over a layer, H200 profile 2026-12-02).
// SiluMul: column n reads the gate row n and the up row N + n of a packed [gate; up] (the same sums per row) and
// writes round(round(silu(round(g))) · round(u)) — silu_mul's arithmetic on the GEMV's rounded outputs.
// Norm: x is first normalised by the block into shared memory (norm_rows). CW > 0 (one row, no silu·mul): the columns
// n < conv.C leave through the conv step of their channel (ConvIn), the conv-step launch of a decode step's layer
// gone; its operands are loaded before the sums (lanes j < CW − 1 window entry j, lane CW − 1 the bias, lanes j < CW
// tap j), gathered by shuffles after them, so the sum is conv1d_step_kernel's fma chain on the same rounded input.
// (Prefetching the warp's weight rows into L2 meanwhile, prefetch.global.L2, made the step slower: bench/README.md,
// 35th wave.)
// Eight warps a block. Measured at batch 1 on the 1.3B shapes (bench/README.md, 24th wave): four or sixteen warps a
// block within 0.1% of eight, two columns a warp 11% slower (half the blocks in flight).
template <typename T, int M, bool SiluMul, int Norm, int CW = 0>
__global__ void __launch_bounds__(kGemvWarps * 32, M == 1 && Norm != 0 ? kGemvNormMinBlocks : 1)
    gemv_kernel(const T* __restrict__ x_in, const T* __restrict__ w, T* __restrict__ y, int N, int K, NormIn<T> nin,
                ConvIn<T> conv) {
  static_assert(CW == 0 || (M == 1 && !SiluMul && CW <= 32), "the conv epilogue serves one row of a plain GEMV");
  constexpr int R = SiluMul ? 2 : 1;  // weight rows a warp reads
  pdl::wait();                        // before reading what the previous kernel wrote (kernels/pdl.cuh)
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int n = static_cast<int>(blockIdx.x) * kGemvWarps + static_cast<int>(threadIdx.x >> 5);
  const T* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = w + static_cast<int64_t>(min(n, N - 1) + r * N) * K;  // warps past N: row N-1
  const T* x = x_in;
  if constexpr (Norm != 0) {  // every thread takes part (barriers), the warps past N too
    extern __shared__ __align__(16) unsigned char smem[];
    T* xs = reinterpret_cast<T*>(smem);
    norm_rows<T, M, Norm>(x_in, nin, xs, xs + M * K, K);
    x = xs;
  }
  if (n >= N) return;
  const bool convolved = CW > 0 && n < conv.C;  // warp-uniform
  float cv = 0.f, ct = 0.f;                     // this lane's conv operands (CW > 0)
  if constexpr (CW > 0) {
    if (convolved) {
      if (lane < CW - 1)
        cv = to_f<T>(conv.state[static_cast<int64_t>(lane) * conv.C + n]);
      else if (lane == CW - 1 && conv.bias)
        cv = to_f<T>(conv.bias[n]);
      if (lane < CW) ct = to_f<T>(conv.w[static_cast<int64_t>(n) * CW + lane]);
    }
  }
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
  if constexpr (CW > 0) {
    if (convolved) {  // every lane holds the sum
      const T xr = from_f<T>(acc[0][0]);
      float a = 0.f;
#pragma unroll
      for (int j = 0; j < CW - 1; ++j) a += __shfl_sync(0xffffffffu, cv, j) * __shfl_sync(0xffffffffu, ct, j);
      a += to_f<T>(xr) * __shfl_sync(0xffffffffu, ct, CW - 1);
      const float bias = __shfl_sync(0xffffffffu, cv, CW - 1);
      const float next = __shfl_down_sync(0xffffffffu, cv, 1);  // window entry lane + 1
      if (conv.bias) a += bias;
      if (conv.silu) a = detail::silu_f(a);
      if (lane < CW - 2)  // the shift: exact copies, the input last
        conv.state[static_cast<int64_t>(lane) * conv.C + n] = from_f<T>(next);
      else if (lane == CW - 2)
        conv.state[static_cast<int64_t>(lane) * conv.C + n] = xr;
      if (lane == 0) y[n] = from_f<T>(a);
      return;
    }
  }
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

/// Shared memory of a gemv_norm block: the normalised rows, and the sums when it adds (norm_rows).
template <typename T>
size_t norm_smem_bytes(int Norm, int M, int K) {
  return Norm == 0 ? 0 : static_cast<size_t>(Norm) * M * K * sizeof(T);
}
constexpr size_t kNormSmemMax = 48 * 1024;  ///< without opting in to more: M x K <= 12,288 (adding), 24,576 (not)

template <typename T, int M, bool SiluMul, int Norm, int CW = 0>
cudaError_t launch_m(const void* x, const void* w, void* y, int N, int K, const NormIn<T>& n, cudaStream_t s,
                     const ConvIn<T>& conv = {}) {
  return pdl::launch(gemv_kernel<T, M, SiluMul, Norm, CW>,
                     dim3(static_cast<unsigned>((N + kGemvWarps - 1) / kGemvWarps)), dim3(kGemvWarps * 32),
                     norm_smem_bytes<T>(Norm, M, K), s, static_cast<const T*>(x), static_cast<const T*>(w),
                     static_cast<T*>(y), N, K, n, conv);
}

template <typename T, bool SiluMul, int Norm>
cudaError_t launch(const void* x, const void* w, void* y, int M, int N, int K, const NormIn<T>& n, cudaStream_t s) {
  switch (M) {
    case 1: return launch_m<T, 1, SiluMul, Norm>(x, w, y, N, K, n, s);
    case 2: return launch_m<T, 2, SiluMul, Norm>(x, w, y, N, K, n, s);
    case 3: return launch_m<T, 3, SiluMul, Norm>(x, w, y, N, K, n, s);
    case 4: return launch_m<T, 4, SiluMul, Norm>(x, w, y, N, K, n, s);
    case 5: return launch_m<T, 5, SiluMul, Norm>(x, w, y, N, K, n, s);
    case 6: return launch_m<T, 6, SiluMul, Norm>(x, w, y, N, K, n, s);
    case 7: return launch_m<T, 7, SiluMul, Norm>(x, w, y, N, K, n, s);
    default: return launch_m<T, 8, SiluMul, Norm>(x, w, y, N, K, n, s);
  }
}

template <typename T, bool SiluMul>
cudaError_t launch_norm(const void* x, const void* w, void* y, int M, int N, int K, const GemvNorm* g, cudaStream_t s) {
  if (!g) return launch<T, SiluMul, 0>(x, w, y, M, N, K, NormIn<T>{}, s);
  const NormIn<T> n{static_cast<const T*>(g->delta), static_cast<const T*>(g->w), static_cast<T*>(g->sum), g->eps,
                    g->w_offset};
  return g->delta ? launch<T, SiluMul, 2>(x, w, y, M, N, K, n, s) : launch<T, SiluMul, 1>(x, w, y, M, N, K, n, s);
}

/// The launchers' common conditions (fused_layer_ops.h: gemv, gemv_norm).
bool gemv_serves(bool silu_mul, const void* x, const void* w, const void* y, int M, int N, int K, const GemvNorm* g) {
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!x || !w || !y || M < 1 || M > kGemvMaxRows || N < 1 || K < 8 || K % 8 != 0 || !al(x) || !al(w)) return false;
  if (silu_mul && N > 0x3fffffff) return false;  // row N + n must fit an int
  return !g || (g->w && al(g->w) && (!g->delta || (al(g->delta) && g->sum && al(g->sum))) &&
                norm_smem_bytes<__half>(g->delta ? 2 : 1, M, K) <= kNormSmemMax);
}

template <bool SiluMul>
cudaError_t checked_launch(ElemType t, const void* x, const void* w, void* y, int M, int N, int K, const GemvNorm* g,
                           cudaStream_t s) {
  if (!gemv_serves(SiluMul, x, w, y, M, N, K, g)) return cudaErrorInvalidValue;
  return t == ElemType::kBF16 ? launch_norm<__nv_bfloat16, SiluMul>(x, w, y, M, N, K, g, s)
                              : launch_norm<__half, SiluMul>(x, w, y, M, N, K, g, s);
}

template <typename T>
cudaError_t launch_norm_conv(const void* x, const GemvNorm& g, const GemvConv& c, const void* w, void* y, int N, int K,
                             cudaStream_t s) {
  const NormIn<T> n{static_cast<const T*>(g.delta), static_cast<const T*>(g.w), static_cast<T*>(g.sum), g.eps,
                    g.w_offset};
  const ConvIn<T> conv{static_cast<T*>(c.state), static_cast<const T*>(c.w), static_cast<const T*>(c.bias), c.C,
                       c.silu};
  return g.delta ? launch_m<T, 1, false, 2, kGemvConvWidth>(x, w, y, N, K, n, s, conv)
                 : launch_m<T, 1, false, 1, kGemvConvWidth>(x, w, y, N, K, n, s, conv);
}

}  // namespace

cudaError_t gemv(ElemType t, const void* x, const void* w, void* y, int M, int N, int K, cudaStream_t s) {
  return checked_launch<false>(t, x, w, y, M, N, K, nullptr, s);
}

cudaError_t gemv_silu_mul(ElemType t, const void* x, const void* w, void* y, int M, int N, int K, cudaStream_t s) {
  return checked_launch<true>(t, x, w, y, M, N, K, nullptr, s);
}

cudaError_t gemv_norm(ElemType t, const void* x, const GemvNorm& norm, const void* w, void* y, int M, int N, int K,
                      bool silu_mul, cudaStream_t s) {
  return silu_mul ? checked_launch<true>(t, x, w, y, M, N, K, &norm, s)
                  : checked_launch<false>(t, x, w, y, M, N, K, &norm, s);
}

cudaError_t gemv_norm_conv(ElemType t, const void* x, const GemvNorm& norm, const GemvConv& conv, const void* w,
                           void* y, int N, int K, cudaStream_t s) {
  if (!gemv_serves(false, x, w, y, 1, N, K, &norm) || !conv.state || !conv.w || conv.W != kGemvConvWidth ||
      conv.C < 1 || conv.C > N)
    return cudaErrorInvalidValue;
  return t == ElemType::kBF16 ? launch_norm_conv<__nv_bfloat16>(x, norm, conv, w, y, N, K, s)
                              : launch_norm_conv<__half>(x, norm, conv, w, y, N, K, s);
}

}  // namespace statecut::cuda
