// Mamba-2's decode-step row kernels (mamba2_step.h has the math).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/gated_delta_common.cuh"
#include "kernels/mamba2_step.h"
#include "kernels/pdl.cuh"

namespace statecut::cuda {
namespace {

using detail::from_f;
using detail::load_vec;
using detail::silu_f;
using detail::store_vec;
using detail::to_f;

constexpr int kThreads = 256;  // the residual norm: one block a row (a decode step has B rows of 2048-2560)

template <typename T>
__device__ __forceinline__ float round_to(float x) {
  return to_f<T>(from_f<T>(x));
}

/// V elements of the residual stream (fp32 or T) as floats, and back (V = 8: 16-byte accesses).
template <typename R, int V>
__device__ __forceinline__ void load_res(const R* p, float (&o)[V]) {
  if constexpr (std::is_same_v<R, float>) {
    if constexpr (V == 8) {
      const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
      o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w, o[4] = b.x, o[5] = b.y, o[6] = b.z, o[7] = b.w;
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) o[i] = p[i];
    }
  } else {
    load_vec<R, V>(p, o);
  }
}
template <typename R, int V>
__device__ __forceinline__ void store_res(R* p, const float (&v)[V]) {
  if constexpr (std::is_same_v<R, float>) {
    if constexpr (V == 8) {
      reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) p[i] = v[i];
    }
  } else {
    store_vec<R, V>(p, v);
  }
}

/// x summed over a block of N threads; every thread gets the total (one call per kernel: the shared array is not
/// reused).
template <int N>
__device__ __forceinline__ float block_sum(float x) {
  __shared__ float part[N / 32];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = x;
  __syncthreads();
  float t = 0.f;
#pragma unroll
  for (int i = 0; i < N / 32; ++i) t += part[i];
  return t;
}

template <typename T, typename R, int V>
__global__ void __launch_bounds__(kThreads) residual_norm_kernel(const R* __restrict__ res, const T* __restrict__ delta,
                                                                 const T* __restrict__ w, R* __restrict__ sum,
                                                                 T* __restrict__ y, int D, float eps, bool trigger) {
  pdl::trigger_then_wait(trigger);  // before reading what the previous kernel wrote (kernels/pdl.cuh)
  const int64_t r = blockIdx.x;
  const R* rr = res + r * D;
  const T* dr = delta ? delta + r * D : nullptr;
  R* sr = delta ? sum + r * D : nullptr;
  float ss = 0.f;
  for (int d = static_cast<int>(threadIdx.x) * V; d < D; d += kThreads * V) {
    float s[V];
    load_res<R, V>(rr + d, s);
    if (dr) {
      float dv[V];
      load_vec<T, V>(dr + d, dv);
#pragma unroll
      for (int i = 0; i < V; ++i) s[i] = std::is_same_v<R, float> ? s[i] + dv[i] : round_to<T>(s[i] + dv[i]);
      store_res<R, V>(sr + d, s);
    }
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float x = round_to<T>(s[i]);
      ss += x * x;
    }
  }
  const float inv = rsqrtf(block_sum<kThreads>(ss) / static_cast<float>(D) + eps);
  const R* src = dr ? sr : rr;  // this thread's own elements of the sum (written above by the same thread)
  for (int d = static_cast<int>(threadIdx.x) * V; d < D; d += kThreads * V) {
    float s[V], wv[V], o[V];
    load_res<R, V>(src + d, s);
    load_vec<T, V>(w + d, wv);
#pragma unroll
    for (int i = 0; i < V; ++i) o[i] = wv[i] * round_to<T>(round_to<T>(s[i]) * inv);
    store_vec<T, V>(y + r * D + d, o);
  }
}

/// h = (o + x · Dskip[head]) · silu(z) of V channels from d (the D product rounded on its own, as LibTorch's
/// separate multiply and add: no contraction into an FMA).
template <typename T, int V>
__device__ __forceinline__ void gated_input(const T* orow, const T* xr, const T* zr, const float* Dk, int P, int d,
                                            float (&h)[V]) {
  float ov[V], xv[V], zv[V];
  load_vec<T, V>(orow + d, ov);
  load_vec<T, V>(xr + d, xv);
  load_vec<T, V>(zr + d, zv);
#pragma unroll
  for (int i = 0; i < V; ++i) h[i] = __fadd_rn(ov[i], __fmul_rn(xv[i], Dk[(d + i) / P])) * silu_f(zv[i]);
}

// A block of 512 threads a row: I = 4096 (Mamba-2 1.3B, 64 heads of 64) is one 16-byte vector a thread, its h kept
// in registers between the sum of squares and the write (longer rows recompute later vectors from L2). 256 threads
// recomputing every vector took 8.1 µs a layer at batch 1 on the H200 (bench/README.md, 32nd wave).
constexpr int kGatedThreads = 512;
template <typename T, int V>
__global__ void __launch_bounds__(kGatedThreads) gated_norm_kernel(const T* __restrict__ o, RowsArg x,
                                                                   const float* __restrict__ Dk, int P, RowsArg z,
                                                                   const T* __restrict__ w, T* __restrict__ y, int I,
                                                                   float eps, bool trigger) {
  pdl::trigger_then_wait(trigger);  // before reading what the previous kernel wrote (kernels/pdl.cuh)
  const int64_t r = blockIdx.x;
  const T* orow = o + r * I;
  const T* xr = static_cast<const T*>(x.p) + x.offset(r);
  const T* zr = static_cast<const T*>(z.p) + z.offset(r);
  const int d0 = static_cast<int>(threadIdx.x) * V;
  float h0[V];  // the first vector's h
  float ss = 0.f;
  for (int d = d0; d < I; d += kGatedThreads * V) {
    float h[V];
    gated_input<T, V>(orow, xr, zr, Dk, P, d, h);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      ss += h[i] * h[i];
      if (d == d0) h0[i] = h[i];
    }
  }
  const float inv = rsqrtf(block_sum<kGatedThreads>(ss) / static_cast<float>(I) + eps);
  for (int d = d0; d < I; d += kGatedThreads * V) {
    float h[V], wv[V], out[V];
    if (d == d0) {
#pragma unroll
      for (int i = 0; i < V; ++i) h[i] = h0[i];
    } else {
      gated_input<T, V>(orow, xr, zr, Dk, P, d, h);
    }
    load_vec<T, V>(w + d, wv);
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = wv[i] * (h[i] * inv);
    store_vec<T, V>(y + r * I + d, out);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T, typename R>
cudaError_t launch_residual(const void* res, const void* delta, const void* w, void* sum, void* y, int64_t rows, int D,
                            float eps, cudaStream_t s) {
  const bool vec = D % 8 == 0 && aligned16(res) && (!delta || (aligned16(delta) && aligned16(sum))) && aligned16(w) &&
                   aligned16(y);
  const auto go = [&](auto kernel) {
    return pdl::launch(kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, s, static_cast<const R*>(res),
                       static_cast<const T*>(delta), static_cast<const T*>(w), static_cast<R*>(sum),
                       static_cast<T*>(y), D, eps, pdl::trigger_for(rows));
  };
  return vec ? go(residual_norm_kernel<T, R, 8>) : go(residual_norm_kernel<T, R, 1>);
}

template <typename T>
cudaError_t launch_gated(const void* o, RowsArg x, const float* Dk, int P, RowsArg z, const void* w, void* y,
                         int64_t rows, int I, float eps, cudaStream_t s) {
  const bool vec = rows_aligned16(x, rows, I) && rows_aligned16(z, rows, I) && aligned16(o) && aligned16(w) &&
                   aligned16(y);
  const auto go = [&](auto kernel) {
    return pdl::launch(kernel, dim3(static_cast<unsigned>(rows)), dim3(kGatedThreads), 0, s,
                       static_cast<const T*>(o), x, Dk, P, z, static_cast<const T*>(w), static_cast<T*>(y), I, eps,
                       pdl::trigger_for(rows));
  };
  return vec ? go(gated_norm_kernel<T, 8>) : go(gated_norm_kernel<T, 1>);
}

}  // namespace

cudaError_t mamba2_residual_norm(ElemType t, bool res_f32, const void* res, const void* delta, const void* w,
                                 void* sum, void* y, int64_t rows, int D, float eps, cudaStream_t s) {
  if (!res || !w || !y || (delta && !sum) || D < 1 || rows < 0 || rows > 0x7fffffff) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (t == ElemType::kBF16)
    return res_f32 ? launch_residual<__nv_bfloat16, float>(res, delta, w, sum, y, rows, D, eps, s)
                   : launch_residual<__nv_bfloat16, __nv_bfloat16>(res, delta, w, sum, y, rows, D, eps, s);
  return res_f32 ? launch_residual<__half, float>(res, delta, w, sum, y, rows, D, eps, s)
                 : launch_residual<__half, __half>(res, delta, w, sum, y, rows, D, eps, s);
}

cudaError_t mamba2_gated_norm(ElemType t, const void* o, RowsArg x, const float* Dskip, int P, RowsArg z,
                              const void* w, void* y, int64_t rows, int I, float eps, cudaStream_t s) {
  if (!o || !x.p || !z.p || !Dskip || !w || !y || P < 1 || I < 1 || I % P != 0 || rows < 0 || rows > 0x7fffffff)
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  return t == ElemType::kBF16 ? launch_gated<__nv_bfloat16>(o, x, Dskip, P, z, w, y, rows, I, eps, s)
                              : launch_gated<__half>(o, x, Dskip, P, z, w, y, rows, I, eps, s);
}

}  // namespace statecut::cuda
