/// Device helpers shared by the recurrent and the chunked kernels: element conversion, the per-token gate and beta
/// transforms (fla's use_gate_in_kernel / use_beta_sigmoid_in_kernel) and sequence bounds.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

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

/// V consecutive elements as floats (V = 8: one aligned 16-byte load) and back (V = 8: one 16-byte store).
template <typename T, int V>
__device__ __forceinline__ void load_vec(const T* p, float (&out)[V]) {
  if constexpr (V == 8) {
    load8(p, out);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = to_f<T>(p[i]);
  }
}
template <typename T, int V>
__device__ __forceinline__ void store_vec(T* p, const float (&v)[V]) {
  if constexpr (V == 8) {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i) e[i] = from_f<T>(v[i]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = from_f<T>(v[i]);
  }
}

/// LibTorch's float SiLU and sigmoid (x / (1 + exp(-x)), 1 / (1 + exp(-x))) with the accurate expf.
__device__ __forceinline__ float silu_f(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.f / (1.f + expf(-x)); }

/// LibTorch's silu(a) * b in the activation type T before the product's own rounding: silu(a) is rounded to T first
/// (a and b are values of T). The gated MLP's silu·mul kernel and the gate|up GEMV's epilogue both take it.
template <typename T>
__device__ __forceinline__ float silu_times(float a, float b) {
  return to_f<T>(from_f<T>(silu_f(a))) * b;
}

/// torch's softplus (beta 1, threshold 20), as fla's gate uses it.
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(__expf(x)); }

/// Log decay g_t of token tok for value head hv (0 without a gate).
/// g as given, or from the gate input a_t when gate_in_kernel.
__device__ __forceinline__ float log_gate_of(const GatedDeltaArgs& a, float g, int hv) {
  if (a.gate_in_kernel) {
    const float bias = a.dt_bias ? a.dt_bias[hv] : 0.f;
    g = -__expf(a.A_log[hv]) * softplus(g + bias);
  }
  return g;
}

__device__ __forceinline__ float token_log_gate(const GatedDeltaArgs& a, long tok, int hv) {
  if (a.g == nullptr) return 0.f;
  return log_gate_of(a, a.g[tok * a.HV + hv], hv);
}

/// beta of token tok from the fp32 array; with use_beta_sigmoid_in_kernel sigmoid_f (expf), as the input-type path of
/// the decode kernels forms it. (This path had __expf until the 48th wave, so Gated DeltaNet's batch-1 step, whose
/// logits were converted to fp32, and its batched steps, which read them in bf16, formed beta differently: an ulp of
/// the state here and there.)
__device__ __forceinline__ float token_beta(const GatedDeltaArgs& a, long tok, int hv) {
  if (a.beta == nullptr) return 1.f;
  const float b = a.beta[tok * a.HV + hv];
  return a.beta_sigmoid ? sigmoid_f(b) : b;
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

/// N consecutive state elements (fp32 or bf16 storage, N in {1, 2, 4}, aligned to N elements) to/from floats.
template <typename SS, int N>
__device__ __forceinline__ void load_state(const SS* p, float* out) {
  if constexpr (std::is_same<SS, float>::value) {
    if constexpr (N == 4) {
      const float4 x = *reinterpret_cast<const float4*>(p);
      out[0] = x.x, out[1] = x.y, out[2] = x.z, out[3] = x.w;
    } else if constexpr (N == 2) {
      const float2 x = *reinterpret_cast<const float2*>(p);
      out[0] = x.x, out[1] = x.y;
    } else {
      out[0] = *p;
    }
  } else {
    if constexpr (N == 4) {
      const uint2 raw = *reinterpret_cast<const uint2*>(p);
      const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&raw);
#pragma unroll
      for (int i = 0; i < 4; ++i) out[i] = __bfloat162float(e[i]);
    } else if constexpr (N == 2) {
      const __nv_bfloat162 x = *reinterpret_cast<const __nv_bfloat162*>(p);
      out[0] = __low2float(x), out[1] = __high2float(x);
    } else {
      out[0] = __bfloat162float(*p);
    }
  }
}

template <typename SS, int N>
__device__ __forceinline__ void store_state(SS* p, const float* in) {
  if constexpr (std::is_same<SS, float>::value) {
    if constexpr (N == 4) *reinterpret_cast<float4*>(p) = make_float4(in[0], in[1], in[2], in[3]);
    else if constexpr (N == 2) *reinterpret_cast<float2*>(p) = make_float2(in[0], in[1]);
    else *p = in[0];
  } else {
    if constexpr (N == 4) {
      __nv_bfloat16 e[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) e[i] = __float2bfloat16_rn(in[i]);
      *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(e);
    } else if constexpr (N == 2) {
      *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(in[0], in[1]);
    } else {
      *p = __float2bfloat16_rn(in[0]);
    }
  }
}

constexpr float kL2Eps = 1e-6f;  // fla's l2norm: x * rsqrt(sum x^2 + 1e-6)

}  // namespace statecut::cuda::detail
