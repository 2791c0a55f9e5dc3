// Fused row / elementwise kernels of a model step (fused_layer_ops.h has the math).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/fused_layer_ops.h"
#include "kernels/gated_delta_common.cuh"

namespace statecut::cuda {
namespace {

using detail::from_f;
using detail::to_f;

// LibTorch's float SiLU and sigmoid (x / (1 + exp(-x)), 1 / (1 + exp(-x))) with the accurate expf.
__device__ __forceinline__ float silu_f(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.f / (1.f + expf(-x)); }

constexpr int kNormThreads = 256;

// One block per row: sum of squares (warp shuffles, then one value per warp in shared memory), then the outputs.
template <typename T, bool Gated>
__global__ void __launch_bounds__(kNormThreads) rms_norm_kernel(RowsArg x, const T* __restrict__ w, RowsArg z,
                                                                T* __restrict__ y, int D, float eps) {
  __shared__ float part[kNormThreads / 32];
  const int64_t r = blockIdx.x;
  const T* xr = static_cast<const T*>(x.p) + x.offset(r);
  float ss = 0.f;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    const float v = to_f<T>(xr[d]);
    ss += v * v;
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
  __syncthreads();
  float tot = 0.f;
  for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) tot += part[i];
  const float inv = rsqrtf(tot / static_cast<float>(D) + eps);
  T* yr = y + r * D;
  const T* zr = Gated ? static_cast<const T*>(z.p) + z.offset(r) : nullptr;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float o = (to_f<T>(xr[d]) * inv) * to_f<T>(w[d]);
    if constexpr (Gated) {
      const float g = to_f<T>(zr[d]);
      o = (o * g) * sigmoid_f(g);
    }
    yr[d] = from_f<T>(o);
  }
}

// One thread per (b, c).
template <typename T>
__global__ void conv1d_step_kernel(RowsArg x, T* __restrict__ state, const T* __restrict__ w,
                                   const T* __restrict__ bias, T* __restrict__ y, int B, int C, int W, bool silu) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(B) * C) return;
  const int b = static_cast<int>(i / C), c = static_cast<int>(i % C);
  T* st = state + static_cast<int64_t>(b) * (W - 1) * C + c;  // st[j * C] = win[j], j < W - 1
  const T xin = static_cast<const T*>(x.p)[x.offset(b) + c];
  const T* wc = w + static_cast<int64_t>(c) * W;
  // Sum in the window order (j = 0 first), as the LibTorch step reduces over the window dimension.
  float acc = 0.f;
  for (int j = 0; j < W; ++j) {
    const T cur = j == W - 1 ? xin : st[static_cast<int64_t>(j) * C];
    acc += to_f<T>(cur) * to_f<T>(wc[j]);
  }
  for (int j = 0; j + 1 < W - 1; ++j) st[static_cast<int64_t>(j) * C] = st[static_cast<int64_t>(j + 1) * C];
  if (W > 1) st[static_cast<int64_t>(W - 2) * C] = xin;
  if (bias) acc += to_f<T>(bias[c]);
  if (silu) acc = silu_f(acc);
  y[i] = from_f<T>(acc);
}

// One thread per (b, t, c), c fastest; t runs to max(T, W−1) so that every final-state row has a thread.
template <typename T>
__global__ void conv1d_seq_kernel(RowsArg x, const T* __restrict__ init, const T* __restrict__ w,
                                  const T* __restrict__ bias, T* __restrict__ y, T* __restrict__ fin, int B, int Tn,
                                  int C, int W, bool silu) {
  const int Tm = Tn > W - 1 ? Tn : W - 1;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(B) * Tm * C) return;
  const int c = static_cast<int>(i % C);
  const int64_t bt = i / C;
  const int t = static_cast<int>(bt % Tm), b = static_cast<int>(bt / Tm);
  const T* xp = static_cast<const T*>(x.p);
  auto in = [&](int pos) -> T {  // input at position pos of sequence b; pos < 0 reads the initial window
    if (pos >= 0) return xp[x.offset(static_cast<int64_t>(b) * Tn + pos) + c];
    if (init == nullptr) return from_f<T>(0.f);
    return init[(static_cast<int64_t>(b) * (W - 1) + (W - 1 + pos)) * C + c];
  };
  if (t < Tn) {
    float acc = 0.f;
    for (int j = 0; j < W; ++j) acc += to_f<T>(in(t - W + 1 + j)) * to_f<T>(w[static_cast<int64_t>(c) * W + j]);
    if (bias) acc += to_f<T>(bias[c]);
    if (silu) acc = silu_f(acc);
    y[(static_cast<int64_t>(b) * Tn + t) * C + c] = from_f<T>(acc);
  }
  if (fin && t < W - 1) fin[(static_cast<int64_t>(b) * (W - 1) + t) * C + c] = in(Tn - (W - 1) + t);
}

template <typename T>
__global__ void silu_mul_kernel(RowsArg a, RowsArg b, T* __restrict__ y, int64_t rows, int D) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * D) return;
  const int64_t r = i / D;
  const int d = static_cast<int>(i % D);
  const float av = to_f<T>(static_cast<const T*>(a.p)[a.offset(r) + d]);
  const float bv = to_f<T>(static_cast<const T*>(b.p)[b.offset(r) + d]);
  const float s = to_f<T>(from_f<T>(silu_f(av)));  // silu(a) is a tensor of the activation type first
  y[i] = from_f<T>(s * bv);
}

template <typename T>
cudaError_t launch_norm(RowsArg x, const void* w, RowsArg z, void* y, int64_t rows, int D, float eps, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  const int threads = D >= kNormThreads ? kNormThreads : ((D + 31) / 32) * 32;
  if (z.p)
    rms_norm_kernel<T, true><<<static_cast<unsigned>(rows), threads, 0, s>>>(x, static_cast<const T*>(w), z,
                                                                             static_cast<T*>(y), D, eps);
  else
    rms_norm_kernel<T, false><<<static_cast<unsigned>(rows), threads, 0, s>>>(x, static_cast<const T*>(w), z,
                                                                              static_cast<T*>(y), D, eps);
  return cudaGetLastError();
}

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

cudaError_t rms_norm_rows(ElemType t, RowsArg x, const void* w, RowsArg z, void* y, int64_t rows, int D, float eps,
                          cudaStream_t s) {
  if (!x.p || !w || !y || D < 1 || rows < 0 || rows > 0x7fffffff) return cudaErrorInvalidValue;
  return t == ElemType::kBF16 ? launch_norm<__nv_bfloat16>(x, w, z, y, rows, D, eps, s)
                              : launch_norm<__half>(x, w, z, y, rows, D, eps, s);
}

cudaError_t conv1d_step(ElemType t, RowsArg x, void* state, const void* w, const void* bias, void* y, int B, int C,
                        int W, bool silu, cudaStream_t s) {
  if (!x.p || !w || !y || (W > 1 && !state) || B < 0 || C < 1 || W < 1) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(B) * C;
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  if (t == ElemType::kBF16)
    conv1d_step_kernel<__nv_bfloat16><<<blocks_for(n, kThreads), kThreads, 0, s>>>(
        x, static_cast<__nv_bfloat16*>(state), static_cast<const __nv_bfloat16*>(w),
        static_cast<const __nv_bfloat16*>(bias), static_cast<__nv_bfloat16*>(y), B, C, W, silu);
  else
    conv1d_step_kernel<__half><<<blocks_for(n, kThreads), kThreads, 0, s>>>(
        x, static_cast<__half*>(state), static_cast<const __half*>(w), static_cast<const __half*>(bias),
        static_cast<__half*>(y), B, C, W, silu);
  return cudaGetLastError();
}

cudaError_t conv1d_seq(ElemType t, RowsArg x, const void* init, const void* w, const void* bias, void* y,
                       void* final_state, int B, int T, int C, int W, bool silu, cudaStream_t s) {
  if (!x.p || !w || !y || B < 0 || T < 0 || C < 1 || W < 1) return cudaErrorInvalidValue;
  if (final_state && final_state == init && W > 1) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(B) * (T > W - 1 ? T : W - 1) * C;
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  if (t == ElemType::kBF16)
    conv1d_seq_kernel<__nv_bfloat16><<<blocks_for(n, kThreads), kThreads, 0, s>>>(
        x, static_cast<const __nv_bfloat16*>(init), static_cast<const __nv_bfloat16*>(w),
        static_cast<const __nv_bfloat16*>(bias), static_cast<__nv_bfloat16*>(y),
        static_cast<__nv_bfloat16*>(final_state), B, T, C, W, silu);
  else
    conv1d_seq_kernel<__half><<<blocks_for(n, kThreads), kThreads, 0, s>>>(
        x, static_cast<const __half*>(init), static_cast<const __half*>(w), static_cast<const __half*>(bias),
        static_cast<__half*>(y), static_cast<__half*>(final_state), B, T, C, W, silu);
  return cudaGetLastError();
}

cudaError_t silu_mul(ElemType t, RowsArg a, RowsArg b, void* y, int64_t rows, int D, cudaStream_t s) {
  if (!a.p || !b.p || !y || rows < 0 || D < 1) return cudaErrorInvalidValue;
  const int64_t n = rows * D;
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  if (t == ElemType::kBF16)
    silu_mul_kernel<__nv_bfloat16><<<blocks_for(n, kThreads), kThreads, 0, s>>>(a, b, static_cast<__nv_bfloat16*>(y),
                                                                                 rows, D);
  else
    silu_mul_kernel<__half><<<blocks_for(n, kThreads), kThreads, 0, s>>>(a, b, static_cast<__half*>(y), rows, D);
  return cudaGetLastError();
}

}  // namespace statecut::cuda
