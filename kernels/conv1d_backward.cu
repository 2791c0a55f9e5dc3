// Backward of the causal depthwise conv (conv1d_backward.h has the math).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/conv1d_backward.h"
#include "kernels/gated_delta_common.cuh"

namespace statecut::cuda {
namespace {

using detail::from_f;
using detail::load_vec;
using detail::store_vec;
using detail::to_f;

constexpr int kBwdThreads = 128;  // channel groups per block

// LibTorch's silu_backward: σ(s) (1 + s (1 − σ(s))), σ with the accurate expf as the forward's SiLU.
__device__ __forceinline__ float silu_grad(float s) {
  const float sig = 1.f / (1.f + expf(-s));
  return sig * (1.f + s * (1.f - sig));
}

// Grid (B · chunks, ceil(C / (V · kBwdThreads))): as conv1d_seq_kernel, a thread owns V channels of one sequence over
// the kConvBwdChunk tokens [t0, t1) and keeps the last W inputs in registers. It walks t' from t0 to t1 + W − 2:
// s[t'] (the forward's sum, same order: j = 0 first, then the bias), ds[t'], and the last W values of ds;
// dx[t' − W + 1] needs ds up to t', so the W − 1 tokens after the chunk are recomputed (not summed into dw, db: the
// next chunk owns them). The partial dw, db of its own tokens go to part[blockIdx.x, c, 0..W].
template <typename T, int W, int V>
__global__ void __launch_bounds__(kBwdThreads) conv1d_bwd_kernel(RowsArg x, const T* __restrict__ w,
                                                                 const T* __restrict__ bias, const T* __restrict__ dy,
                                                                 T* __restrict__ dx, float* __restrict__ part, int Tn,
                                                                 int C, int chunks, bool flat, bool silu) {
  const int c0 = (static_cast<int>(blockIdx.y) * kBwdThreads + static_cast<int>(threadIdx.x)) * V;
  if (c0 >= C) return;
  const int b = static_cast<int>(blockIdx.x) / chunks, chunk = static_cast<int>(blockIdx.x) % chunks;
  const int t0 = chunk * kConvBwdChunk, t1 = min(Tn, t0 + kConvBwdChunk);
  const T* xp = static_cast<const T*>(x.p);
  const int64_t row0 = static_cast<int64_t>(b) * Tn;
  auto load_x = [&](int pos, float (&out)[V]) {  // x at position pos of sequence b; zeros before the sequence
    if (pos >= 0) {
      load_vec<T, V>(xp + (flat ? (row0 + pos) * x.row_stride : x.offset(row0 + pos)) + c0, out);
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) out[v] = 0.f;
    }
  };
  float wc[W][V], bc[V];
#pragma unroll
  for (int j = 0; j < W; ++j)
#pragma unroll
    for (int v = 0; v < V; ++v) wc[j][v] = to_f<T>(w[static_cast<int64_t>(c0 + v) * W + j]);
#pragma unroll
  for (int v = 0; v < V; ++v) bc[v] = bias ? to_f<T>(bias[c0 + v]) : 0.f;

  float win[W][V];  // win[j] = x at t' − W + 1 + j
  float dsw[W][V];  // dsw[k] = ds at t' − W + 1 + k (positions before t0 are never read: zeros)
  float dwp[W][V], dbp[V];
#pragma unroll
  for (int j = 0; j < W; ++j)
#pragma unroll
    for (int v = 0; v < V; ++v) win[j][v] = 0.f, dsw[j][v] = 0.f, dwp[j][v] = 0.f;
#pragma unroll
  for (int v = 0; v < V; ++v) dbp[v] = 0.f;
#pragma unroll
  for (int j = 0; j + 1 < W; ++j) load_x(t0 - W + 1 + j, win[j]);

  for (int tp = t0; tp < t1 + W - 1; ++tp) {
    float ds[V];
    if (tp < Tn) {
      load_x(tp, win[W - 1]);
      float g[V];
      load_vec<T, V>(dy + (row0 + tp) * C + c0, g);
#pragma unroll
      for (int v = 0; v < V; ++v) {
        float s = 0.f;
#pragma unroll
        for (int j = 0; j < W; ++j) s += win[j][v] * wc[j][v];
        s += bc[v];
        ds[v] = silu ? g[v] * silu_grad(s) : g[v];
      }
      if (tp < t1) {
#pragma unroll
        for (int v = 0; v < V; ++v) {
#pragma unroll
          for (int j = 0; j < W; ++j) dwp[j][v] += ds[v] * win[j][v];
          dbp[v] += ds[v];
        }
      }
#pragma unroll
      for (int j = 0; j + 1 < W; ++j)
#pragma unroll
        for (int v = 0; v < V; ++v) win[j][v] = win[j + 1][v];
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) ds[v] = 0.f;  // past the sequence's end: no term
    }
#pragma unroll
    for (int k = 0; k + 1 < W; ++k)
#pragma unroll
      for (int v = 0; v < V; ++v) dsw[k][v] = dsw[k + 1][v];
#pragma unroll
    for (int v = 0; v < V; ++v) dsw[W - 1][v] = ds[v];
    const int t = tp - (W - 1);  // dx[t] = sum_j w[j] ds[t + W − 1 − j] = sum_j w[j] dsw[W − 1 − j]
    if (t >= t0) {
      float o[V];
#pragma unroll
      for (int v = 0; v < V; ++v) {
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < W; ++j) acc += wc[j][v] * dsw[W - 1 - j][v];
        o[v] = acc;
      }
      store_vec<T, V>(dx + (row0 + t) * C + c0, o);
    }
  }
  float* p = part + (static_cast<int64_t>(blockIdx.x) * C + c0) * (W + 1);
#pragma unroll
  for (int v = 0; v < V; ++v) {
#pragma unroll
    for (int j = 0; j < W; ++j) p[v * (W + 1) + j] = dwp[j][v];
    p[v * (W + 1) + W] = dbp[v];
  }
}

// The P partials of each (c, k) of [C, W+1], summed in a fixed order: a block covers kReduceCols consecutive (c, k)
// (a warp reads 128 contiguous bytes of one partial), its kReduceRows warps take partials p ≡ r (mod kReduceRows)
// in increasing p, then warp 0 adds the kReduceRows sums in increasing r. No atomics: deterministic. (One thread per
// (c, k) walking all P left a 1.3B conv's 10 240 columns on 40 blocks, latency-bound.) P = 0 writes zeros.
constexpr int kReduceCols = 32, kReduceRows = 8;
__global__ void __launch_bounds__(kReduceCols* kReduceRows) conv1d_bwd_reduce_kernel(const float* __restrict__ part,
                                                                                     float* __restrict__ dw,
                                                                                     float* __restrict__ db, int P,
                                                                                     int C, int W) {
  __shared__ float sums[kReduceRows][kReduceCols];
  const int64_t n = static_cast<int64_t>(C) * (W + 1);
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kReduceCols + threadIdx.x;
  float acc = 0.f;
  if (i < n) {
#pragma unroll 4
    for (int p = static_cast<int>(threadIdx.y); p < P; p += kReduceRows) acc += part[static_cast<int64_t>(p) * n + i];
  }
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || i >= n) return;
  float tot = 0.f;
#pragma unroll
  for (int r = 0; r < kReduceRows; ++r) tot += sums[r][threadIdx.x];
  const int c = static_cast<int>(i / (W + 1)), k = static_cast<int>(i % (W + 1));
  if (k < W)
    dw[static_cast<int64_t>(c) * W + k] = tot;
  else if (db)
    db[c] = tot;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T, int W, int V>
void launch_bwd(RowsArg x, const void* w, const void* bias, const void* dy, void* dx, float* part, int B, int Tn,
                int C, bool silu, cudaStream_t s) {
  const int chunks = (Tn + kConvBwdChunk - 1) / kConvBwdChunk;
  const dim3 grid(static_cast<unsigned>(static_cast<int64_t>(B) * chunks),
                  static_cast<unsigned>((C + V * kBwdThreads - 1) / (V * kBwdThreads)));
  const bool flat = x.group >= static_cast<int64_t>(B) * Tn;
  conv1d_bwd_kernel<T, W, V><<<grid, kBwdThreads, 0, s>>>(x, static_cast<const T*>(w), static_cast<const T*>(bias),
                                                          static_cast<const T*>(dy), static_cast<T*>(dx), part, Tn, C,
                                                          chunks, flat, silu);
}

template <typename T, int W>
void launch_bwd_v(bool vec, RowsArg x, const void* w, const void* bias, const void* dy, void* dx, float* part, int B,
                  int Tn, int C, bool silu, cudaStream_t s) {
  if (vec)
    launch_bwd<T, W, 8>(x, w, bias, dy, dx, part, B, Tn, C, silu, s);
  else
    launch_bwd<T, W, 1>(x, w, bias, dy, dx, part, B, Tn, C, silu, s);
}

template <typename T>
void launch_bwd_w(RowsArg x, const void* w, const void* bias, const void* dy, void* dx, float* part, int B, int Tn,
                  int C, int W, bool silu, cudaStream_t s) {
  // 8 channels per thread when every row of x, dy and dx allows 16-byte accesses (the rule of conv1d_seq).
  const bool vec = rows_aligned16(x, static_cast<int64_t>(B) * Tn, C) && aligned16(dy) && aligned16(dx);
  switch (W) {
    case 1: launch_bwd_v<T, 1>(vec, x, w, bias, dy, dx, part, B, Tn, C, silu, s); break;
    case 2: launch_bwd_v<T, 2>(vec, x, w, bias, dy, dx, part, B, Tn, C, silu, s); break;
    case 3: launch_bwd_v<T, 3>(vec, x, w, bias, dy, dx, part, B, Tn, C, silu, s); break;
    case 4: launch_bwd_v<T, 4>(vec, x, w, bias, dy, dx, part, B, Tn, C, silu, s); break;
    case 5: launch_bwd_v<T, 5>(vec, x, w, bias, dy, dx, part, B, Tn, C, silu, s); break;
    case 6: launch_bwd_v<T, 6>(vec, x, w, bias, dy, dx, part, B, Tn, C, silu, s); break;
    case 7: launch_bwd_v<T, 7>(vec, x, w, bias, dy, dx, part, B, Tn, C, silu, s); break;
    default: launch_bwd_v<T, 8>(vec, x, w, bias, dy, dx, part, B, Tn, C, silu, s); break;  // W checked by the caller
  }
}

}  // namespace

cudaError_t conv1d_backward(ElemType t, RowsArg x, const void* w, const void* bias, const void* dy, void* dx,
                            float* dw, float* db, float* workspace, int B, int T, int C, int W, bool silu,
                            cudaStream_t s) {
  if (!w || !dw || B < 0 || T < 0 || C < 1 || W < 1 || W > kConvSeqMaxWidth) return cudaErrorInvalidValue;
  const int64_t rows = static_cast<int64_t>(B) * T;
  if (rows > 0x7fffffff || (rows > 0 && (!x.p || !dy || !dx || !workspace))) return cudaErrorInvalidValue;
  const int P = B * ((T + kConvBwdChunk - 1) / kConvBwdChunk);  // <= B · T: fits an int
  if (P > 0) {
    if (t == ElemType::kBF16)
      launch_bwd_w<__nv_bfloat16>(x, w, bias, dy, dx, workspace, B, T, C, W, silu, s);
    else
      launch_bwd_w<__half>(x, w, bias, dy, dx, workspace, B, T, C, W, silu, s);
  }
  const int64_t n = static_cast<int64_t>(C) * (W + 1);
  conv1d_bwd_reduce_kernel<<<static_cast<unsigned>((n + kReduceCols - 1) / kReduceCols), dim3(kReduceCols, kReduceRows),
                             0, s>>>(workspace, dw, db, P, C, W);
  return cudaGetLastError();
}

}  // namespace statecut::cuda
