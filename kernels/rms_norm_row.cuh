/// One row of an RMS norm, by a warp or by a whole block: the device code shared by the norm kernels
/// (kernels/fused_layer_ops.cu) and the GEMV that forms its own normalised input (kernels/gemv.cu, gemv_norm), so the
/// two produce the same bits (fused_layer_ops.h has the math). A row's sum of squares: each thread sums its V-element
/// vectors (thread t of `lanes` reads d = tV, tV + lanes·V, ...) in order, the warp reduces by xor shuffles
/// (16, 8, 4, 2, 1), and a block adds its warps' partials in warp order.
#pragma once
#include "kernels/gated_delta_common.cuh"

namespace statecut::cuda::detail {

constexpr int kNormThreads = 256;

/// One row's sum of squares is done; write y = (x · inv) · (w_offset + w), then the gate: G = 1 (fla) · z · sigmoid(z)
/// before the one rounding; G = 2 (Qwen) round(round(round(x · inv) · w) · silu(z)), the roundings of transformers'
/// Qwen3_5RMSNormGated. `lane`/`lanes`: this thread's place among the threads sharing the row.
template <typename T, int G, int V>
__device__ __forceinline__ void norm_write(const T* xr, const T* __restrict__ w, const T* zr, T* yr, int D, float inv,
                                           float w_offset, int lane, int lanes) {
  for (int d = lane * V; d < D; d += lanes * V) {
    float xv[V], wv[V], o[V];
    load_vec<T, V>(xr + d, xv);
    load_vec<T, V>(w + d, wv);
    if constexpr (G == 2) {
#pragma unroll
      for (int i = 0; i < V; ++i) o[i] = to_f<T>(from_f<T>((w_offset + wv[i]) * to_f<T>(from_f<T>(xv[i] * inv))));
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) o[i] = (xv[i] * inv) * (w_offset + wv[i]);
    }
    if constexpr (G != 0) {
      float g[V];
      load_vec<T, V>(zr + d, g);
#pragma unroll
      for (int i = 0; i < V; ++i) o[i] = G == 1 ? (o[i] * g[i]) * sigmoid_f(g[i]) : o[i] * silu_f(g[i]);
    }
    store_vec<T, V>(yr + d, o);
  }
}

/// s summed over the warp's 32 lanes by xor shuffles (16, 8, 4, 2, 1); every lane gets the same sum.
__device__ __forceinline__ float warp_sum(float s) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  return s;
}

/// rsqrt(mean square + eps) of a row of D shared by the whole block, from each warp's sum of squares `ss` (every
/// lane holding it): lane 0 of each warp writes it to `part` (blockDim.x / 32 floats of shared memory), one barrier,
/// then every thread adds the partials in warp order.
__device__ __forceinline__ float block_inv_rms(float ss, float* part, int D, float eps) {
  const int tid = static_cast<int>(threadIdx.x), lanes = static_cast<int>(blockDim.x);
  if ((tid & 31) == 0) part[tid >> 5] = ss;
  __syncthreads();
  float tot = 0.f;
  for (int i = 0; i < (lanes >> 5); ++i) tot += part[i];
  return rsqrtf(tot / static_cast<float>(D) + eps);
}

/// This thread's share of a row's sum of squares, reduced over its warp. Add: the row is x + delta, rounded to T as
/// LibTorch's `x + delta` rounds it, and written to sr (the residual stream's next value); norm_write then reads sr —
/// the same thread wrote those elements (same lane / lanes walk), so no synchronisation is needed.
template <typename T, int V, bool Add>
__device__ __forceinline__ float sum_squares(const T* xr, const T* dr, T* sr, int D, int lane, int lanes) {
  float ss = 0.f;
  for (int d = lane * V; d < D; d += lanes * V) {
    float v[V];
    load_vec<T, V>(xr + d, v);
    if constexpr (Add) {
      float dv[V];
      load_vec<T, V>(dr + d, dv);
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = to_f<T>(from_f<T>(v[i] + dv[i]));
      store_vec<T, V>(sr + d, v);
    }
#pragma unroll
    for (int i = 0; i < V; ++i) ss += v[i] * v[i];
  }
  return warp_sum(ss);
}

// Rows of D <= kWarpRowMax are normalised by one warp each (the norm kernels put 8 rows in a block: a row of 128 left
// 7/8 of a block-per-row idle); longer rows by a block of kNormThreads.
constexpr int kWarpRowMax = 1024;

/// Row xr (+ dr when Add, the sum written to sr) normalised into yr by one warp.
template <typename T, int G, int V, bool Add>
__device__ __forceinline__ void warp_norm_row(const T* xr, const T* dr, T* sr, const T* __restrict__ w, const T* zr,
                                              T* yr, int D, float eps, float w_offset) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const float inv = rsqrtf(sum_squares<T, V, Add>(xr, dr, sr, D, lane, 32) / static_cast<float>(D) + eps);
  norm_write<T, G, V>(Add ? sr : xr, w, zr, yr, D, inv, w_offset, lane, 32);
}

/// The same row by the whole block (every thread must call it); `part` holds blockDim.x / 32 floats of shared memory,
/// free again when it returns only after a __syncthreads() (a caller normalising another row first synchronises).
template <typename T, int G, int V, bool Add>
__device__ __forceinline__ void block_norm_row(const T* xr, const T* dr, T* sr, const T* __restrict__ w, const T* zr,
                                               T* yr, int D, float eps, float w_offset, float* part) {
  const int tid = static_cast<int>(threadIdx.x), lanes = static_cast<int>(blockDim.x);
  const float inv = block_inv_rms(sum_squares<T, V, Add>(xr, dr, sr, D, tid, lanes), part, D, eps);
  norm_write<T, G, V>(Add ? sr : xr, w, zr, yr, D, inv, w_offset, tid, lanes);
}

/// block_norm_row without a gate when each thread holds at most one 8-element vector of the row (D <= 8 ·
/// blockDim.x, D % 8 == 0, 16-byte aligned rows): the same sums and roundings in the same order, but the thread's
/// norm weight is loaded together with x and delta, before the barrier — one wait on memory a row instead of two
/// (block_norm_row's weight load sits after the barrier, which the compiler cannot move loads across). The GEMV that
/// forms its own input (gemv_norm) pays this wait in every block before its weight stream starts.
template <typename T, bool Add>
__device__ __forceinline__ void block_norm_row_one_vec(const T* xr, const T* dr, T* sr, const T* __restrict__ w,
                                                       T* yr, int D, float eps, float w_offset, float* part) {
  const int d = static_cast<int>(threadIdx.x) * 8;
  float v[8], wv[8], ss = 0.f;
  if (d < D) {
    load_vec<T, 8>(xr + d, v);
    load_vec<T, 8>(w + d, wv);
    if constexpr (Add) {
      float dv[8];
      load_vec<T, 8>(dr + d, dv);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = to_f<T>(from_f<T>(v[i] + dv[i]));
      store_vec<T, 8>(sr + d, v);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
  }
  const float inv = block_inv_rms(warp_sum(ss), part, D, eps);
  if (d < D) {
    float o[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = (v[i] * inv) * (w_offset + wv[i]);
    store_vec<T, 8>(yr + d, o);
  }
}

}  // namespace statecut::cuda::detail
