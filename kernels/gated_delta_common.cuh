/// Device helpers shared by the recurrent and the chunked kernels: element conversion, the per-token gate and beta
/// transforms (fla's use_gate_in_kernel / use_beta_sigmoid_in_kernel) and sequence bounds.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/gated_delta.h"

namespace statecut::cuda::detail {

template <typename T>
__device__ __forceinline__ float to_f(T x);
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <>
__device__ __forceinline__ float to_f<__half>(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

/// Load 8 consecutive elements (16 bytes, aligned) as floats.
template <typename T>
__device__ __forceinline__ void load8(const T* p, float* out) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = to_f<T>(e[i]);
}

/// torch's softplus (beta 1, threshold 20), as fla's gate uses it.
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(__expf(x)); }

/// Log decay g_t of token tok for value head hv (0 without a gate).
__device__ __forceinline__ float token_log_gate(const GatedDeltaArgs& a, long tok, int hv) {
  if (a.g == nullptr) return 0.f;
  float g = a.g[tok * a.HV + hv];
  if (a.gate_in_kernel) {
    const float bias = a.dt_bias ? a.dt_bias[hv] : 0.f;
    g = -__expf(a.A_log[hv]) * softplus(g + bias);
  }
  return g;
}

__device__ __forceinline__ float token_beta(const GatedDeltaArgs& a, long tok, int hv) {
  if (a.beta == nullptr) return 1.f;
  const float b = a.beta[tok * a.HV + hv];
  return a.beta_sigmoid ? 1.f / (1.f + __expf(-b)) : b;
}

/// Token range [bos, eos) of sequence n.
__device__ __forceinline__ void seq_bounds(const GatedDeltaArgs& a, int n, long& bos, long& eos) {
  if (a.cu_seqlens) {
    bos = a.cu_seqlens[n];
    eos = a.cu_seqlens[n + 1];
  } else {
    bos = static_cast<long>(n) * a.seq_len;
    eos = bos + a.seq_len;
  }
}

constexpr float kL2Eps = 1e-6f;  // fla's l2norm: x * rsqrt(sum x^2 + 1e-6)

}  // namespace statecut::cuda::detail
