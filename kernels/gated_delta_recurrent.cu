// Recurrent (token-loop) gated delta rule: decode, few-step verify and any-T reference on the device.
// The state is read once and written once per call; per token, with a = S^T k and b = S^T q read from the
// state before the step (h0), the update is done in one pass over the state held in registers:
//   v' = beta (v - alpha a),  o = alpha b + (k.q) v',  S = alpha S + k v'^T.
// Layout [V,K] ("v-first"): lane groups run along K (contiguous), one row v per group, reductions by shuffles.
// Layout [K,V]: lanes run along V (contiguous), warps split K, the K reduction goes through shared memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/gated_delta.h"
#include "kernels/gated_delta_common.cuh"
#include "kernels/pdl.cuh"

namespace statecut::cuda {
namespace {

using detail::to_f;

// Load VEC consecutive input elements (VEC in {1, 4}; 4 needs 8-byte alignment).
template <typename T, int VEC>
__device__ __forceinline__ void load_vec(const T* p, float* out) {
  if constexpr (VEC == 4) {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = to_f<T>(e[i]);
  } else {
    out[0] = to_f<T>(*p);
  }
}

/// Token tok's first element of q, k or v: packed rows unless the caller gave a token stride.
__device__ __forceinline__ size_t token_offset(int64_t stride, long tok, int64_t packed) {
  return static_cast<size_t>(tok) * static_cast<size_t>(stride ? stride : packed);
}

/// The g input of token tok, value head hv (g_t, or the gate input a_t): g_typed when given, else the fp32 g.
template <typename T>
__device__ __forceinline__ float token_g_input(const GatedDeltaArgs& a, long tok, int hv) {
  return a.g_typed ? to_f<T>(static_cast<const T*>(a.g_typed)[tok * a.g_stride + hv]) : a.g[tok * a.HV + hv];
}

/// g_t and beta_t of token tok, value head hv, from the fp32 arrays or the input-type ones (g_typed, beta_typed).
template <typename T>
__device__ __forceinline__ float token_gate(const GatedDeltaArgs& a, long tok, int hv) {
  if (a.g_typed == nullptr && a.g == nullptr) return 0.f;  // no decay
  return detail::log_gate_of(a, token_g_input<T>(a, tok, hv), hv);
}
template <typename T>
__device__ __forceinline__ float token_beta(const GatedDeltaArgs& a, long tok, int hv) {
  if (a.beta_dt)  // Mamba-2's dt = softplus(a + dt_bias), the factor log_gate_of multiplies by −exp(A_log)
    return detail::softplus(token_g_input<T>(a, tok, hv) + (a.dt_bias ? a.dt_bias[hv] : 0.f));
  if (a.beta_typed == nullptr && !a.beta_round) return detail::token_beta(a, tok, hv);
  if (a.beta_typed == nullptr && a.beta == nullptr) return 1.f;
  float b = a.beta_typed ? to_f<T>(static_cast<const T*>(a.beta_typed)[tok * a.beta_stride + hv])
                         : a.beta[tok * a.HV + hv];
  if (a.beta_sigmoid) b = detail::sigmoid_f(b);
  return a.beta_round ? to_f<T>(detail::from_f<T>(b)) : b;
}

template <int LG>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
  for (int off = LG / 2; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// ---- layout [V, K] -------------------------------------------------------------------------------------------
// Block: 4 warps; a warp holds 32/LG groups of LG lanes; a group owns RPT consecutive rows v and, per lane, KPL
// elements of K at k = (e/VEC)*LG*VEC + lane*VEC + e%VEC (coalesced along K).
template <typename T, typename SS, int VEC, int KPL, int LG, int RPT, bool Packed>
__global__ void __launch_bounds__(128) recurrent_vk_kernel(const GatedDeltaArgs a, bool trigger) {
  pdl::trigger_then_wait(trigger);  // before reading what the previous kernel wrote (kernels/pdl.cuh)
  constexpr int kGroups = 32 / LG;
  constexpr int kRowsPerBlock = 4 * kGroups * RPT;
  const int n = blockIdx.z, hv = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int grp = lane / LG, gl = lane % LG;
  const int h = hv / (a.HV / a.H);
  const int K = a.K, V = a.V;
  const int row0 = blockIdx.x * kRowsPerBlock + (warp * kGroups + grp) * RPT;

  int kidx[KPL];
#pragma unroll
  for (int e = 0; e < KPL; ++e) kidx[e] = (e / VEC) * LG * VEC + gl * VEC + e % VEC;

  const size_t head = static_cast<size_t>(n) * a.HV + hv;
  const SS* s0 = static_cast<const SS*>(a.initial_state);
  float S[RPT][KPL];
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int j = row0 + r;
#pragma unroll
    for (int e = 0; e < KPL; e += VEC) {
      if (j < V && kidx[e] < K && s0) {
        detail::load_state<SS, VEC>(s0 + (head * V + j) * K + kidx[e], &S[r][e]);
      } else {
#pragma unroll
        for (int u = 0; u < VEC; ++u) S[r][e + u] = 0.f;
      }
    }
  }

  long bos, eos;
  detail::seq_bounds(a, n, bos, eos);
  // Packed q, k, v (no token strides): one offset for q and k, as before the strides existed. Walking pointers or
  // per-token strided offsets in every call made this kernel 8-9% slower at dk 128 on the H200 (29th and 30th waves:
  // 150-153 against 139-140 us at B = 256); strided reads (slices of a packed projection) take the other instance.
  const int64_t qs = a.q_stride ? a.q_stride : static_cast<int64_t>(a.H) * K;
  const int64_t ks = a.k_stride ? a.k_stride : static_cast<int64_t>(a.H) * K;
  const int64_t vs = a.v_stride ? a.v_stride : static_cast<int64_t>(a.HV) * V;
  const T* qp = static_cast<const T*>(a.q);
  const T* kp = static_cast<const T*>(a.k);
  const T* vp = static_cast<const T*>(a.v);
  T* op = static_cast<T*>(a.o);
  for (long tok = bos; tok < eos; ++tok) {
    float kv[KPL], qv[KPL];
    const size_t qk_off = Packed ? (static_cast<size_t>(tok) * a.H + h) * K : 0;
    const T* kt = Packed ? kp + qk_off : kp + tok * ks + static_cast<int64_t>(h) * K;
    const T* qt = Packed ? qp + qk_off : qp + tok * qs + static_cast<int64_t>(h) * K;
    const T* vt =
        Packed ? vp + (static_cast<size_t>(tok) * a.HV + hv) * V : vp + tok * vs + static_cast<int64_t>(hv) * V;
#pragma unroll
    for (int e = 0; e < KPL; e += VEC) {
      if (kidx[e] < K) {
        load_vec<T, VEC>(kt + kidx[e], kv + e);
        load_vec<T, VEC>(qt + kidx[e], qv + e);
      } else {
#pragma unroll
        for (int u = 0; u < VEC; ++u) kv[e + u] = qv[e + u] = 0.f;
      }
    }
    float vv[RPT];
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
      const int j = row0 + r;
      vv[r] = j < V ? to_f<T>(vt[j]) : 0.f;
    }
    float kscale = 1.f, qscale = a.scale;
    if (a.l2norm_qk) {
      float sk = 0.f, sq = 0.f;
#pragma unroll
      for (int e = 0; e < KPL; ++e) sk += kv[e] * kv[e], sq += qv[e] * qv[e];
      sk = group_sum<LG>(sk);
      sq = group_sum<LG>(sq);
      kscale = rsqrtf(sk + detail::kL2Eps);
      qscale *= rsqrtf(sq + detail::kL2Eps);
    }
#pragma unroll
    for (int e = 0; e < KPL; ++e) kv[e] *= kscale, qv[e] *= qscale;
    float kq = 0.f;
#pragma unroll
    for (int e = 0; e < KPL; ++e) kq += kv[e] * qv[e];
    kq = group_sum<LG>(kq);
    const float alpha = expf(token_gate<T>(a, tok, hv));  // exact-ish: S is scaled by it every step
    const float beta = token_beta<T>(a, tok, hv);
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
      float sa = 0.f, sb = 0.f;
#pragma unroll
      for (int e = 0; e < KPL; ++e) sa += S[r][e] * kv[e], sb += S[r][e] * qv[e];
      sa = group_sum<LG>(sa);
      sb = group_sum<LG>(sb);
      const float vn = beta * (a.delta ? vv[r] - alpha * sa : vv[r]);
      const float o = alpha * sb + kq * vn;
      const int j = row0 + r;
      if (gl == 0 && j < V) op[(static_cast<size_t>(tok) * a.HV + hv) * V + j] = detail::from_f<T>(o);
#pragma unroll
      for (int e = 0; e < KPL; ++e) S[r][e] = alpha * S[r][e] + kv[e] * vn;
    }
  }

  if (a.final_state == nullptr) return;
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int j = row0 + r;
    if (j >= V) continue;
#pragma unroll
    for (int e = 0; e < KPL; e += VEC) {
      if (kidx[e] >= K) continue;
      detail::store_state<SS, VEC>(static_cast<SS*>(a.final_state) + (head * V + j) * K + kidx[e], &S[r][e]);
    }
  }
}

// ---- the decode fold's conv step and output norm (GatedDeltaArgs::fold) -----------------------------------------

/// The fold's conv step (width 4, SiLU) over all 2K + V channels of a head — k, then q, then v — spread over the
/// block's threads, kPer channels a thread: every load of a thread's channels is issued before any is used (one wait
/// on memory for the block, as the unfolded kernel waits once for its inputs), then each channel is summed as
/// conv1d_step_kernel sums it (the window in order, the input last, then the bias; the output rounded to T) into
/// ks / qs / vs, and its window shifted in place. kt, qt, vt: the head's raw inputs of this token.
template <typename T, int kPer>
__device__ __forceinline__ void fold_conv_head(const GatedDeltaArgs& a, int n, int h, int hv, const T* kt, const T* qt,
                                               const T* vt, float* ks, float* qs, float* vs) {
  constexpr int W = kFoldConvWidth;
  static_assert(W == 4, "the weights of a channel are one 8-byte load");
  const int K = a.K, V = a.V, total = 2 * K + V, C = a.conv_channels;
  T* win0 = static_cast<T*>(a.conv_state) + static_cast<size_t>(n) * (W - 1) * C;
  const uint2* cw = static_cast<const uint2*>(a.conv_w);  // [C, 4] of a 16-bit T: a row is 8 bytes
  const T* cb = static_cast<const T*>(a.conv_b);
  T x[kPer], win[kPer][W - 1], b[kPer];
  uint2 w[kPer];
  int ch[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    ch[i] = -1;
    if (c >= total) continue;
    const T* src = c < K ? kt + c : c < 2 * K ? qt + (c - K) : vt + (c - 2 * K);
    ch[i] = c < K ? a.conv_k0 + h * K + c : c < 2 * K ? a.conv_q0 + h * K + (c - K) : a.conv_v0 + hv * V + (c - 2 * K);
    x[i] = *src;
#pragma unroll
    for (int j = 0; j < W - 1; ++j) win[i][j] = win0[j * C + ch[i]];
    w[i] = cw[ch[i]];
    b[i] = cb ? cb[ch[i]] : T{};
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (ch[i] < 0) continue;
    const T* wt = reinterpret_cast<const T*>(&w[i]);
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < W - 1; ++j) acc += to_f<T>(win[i][j]) * to_f<T>(wt[j]);
    acc += to_f<T>(x[i]) * to_f<T>(wt[W - 1]);
    if (cb) acc += to_f<T>(b[i]);
    const float y = to_f<T>(detail::from_f<T>(detail::silu_f(acc)));
#pragma unroll
    for (int j = 0; j + 1 < W - 1; ++j) win0[j * C + ch[i]] = win[i][j + 1];  // the shift: exact copies
    win0[(W - 2) * C + ch[i]] = x[i];
    const int c = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    (c < K ? ks[c] : c < 2 * K ? qs[c - K] : vs[c - 2 * K]) = y;
  }
}

/// The output norm of a head's row by warp 0, lane l holding columns lVEC..lVEC+VEC−1 of the rounded output in `o`
/// (zero past V): the sum of squares is formed as the norm kernel's warp forms it for 8-wide rows (lane m sums
/// columns 8m..8m+7 in order, then xor shuffles 16..1), so the result is that kernel's to the bit; then
/// y = (o · inv) · (0 + w) (· z · sigmoid(z)), rounded to T into y.
template <typename T, int VEC>
__device__ __forceinline__ void fold_norm_write(const GatedDeltaArgs& a, const float (&o)[VEC], int lane, long tok,
                                                int hv, T* y) {
  constexpr int kPer = 8 / VEC;  // lanes whose columns make one 8-column vector
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
#pragma unroll
    for (int u = 0; u < VEC; ++u) {
      const float x = __shfl_sync(0xffffffffu, o[u], (lane * kPer + j) & 31);
      ss += x * x;
    }
  }
  if (lane * 8 >= a.V) ss = 0.f;
  const float inv = rsqrtf(group_sum<32>(ss) / static_cast<float>(a.V) + a.norm_eps);
  const T* w = static_cast<const T*>(a.norm_w);
  const T* z = a.norm_z ? static_cast<const T*>(a.norm_z) + tok * a.z_stride + static_cast<int64_t>(hv) * a.V : nullptr;
#pragma unroll
  for (int u = 0; u < VEC; ++u) {
    const int c = lane * VEC + u;
    if (c >= a.V) continue;
    const float w_offset = 0.f;  // the norm kernel's (x · inv) · (w_offset + w), signed zeros included
    float r = (o[u] * inv) * (w_offset + to_f<T>(w[c]));
    if (z) {
      const float g = to_f<T>(z[c]);
      r = (r * g) * detail::sigmoid_f(g);
    }
    y[c] = detail::from_f<T>(r);
  }
}

// ---- layout [K, V] -------------------------------------------------------------------------------------------
// Block: W warps over a tile of 32*VEC columns v; lane owns VEC consecutive columns, warp w rows k = w + W i.
// Fold (GatedDeltaArgs::fold): the whole block runs the head's conv (fold_conv_head) into ks, qs and vsh, warp 0 the
// output norm; the grid has one block per head (check_args), so each channel's window has one owner.
// The fold's instances up to 16 rows a thread are held to the plain ones' 128 registers (its staging and norm code
// otherwise took ptxas to 166-174, one block an SM fewer at dk 64 and 128); the plain ones keep the bare bound (a
// minimum of 0 blocks: an explicit 1 changes ptxas's choice, to 160 registers at dk 64 and 128).
template <typename T, typename SS, int VEC, int RPT, int W, bool Fold>
__global__ void __launch_bounds__(W * 32, Fold && RPT <= 16 ? 512 / (W * 32) : 0)
    recurrent_kv_kernel(const GatedDeltaArgs a, bool trigger) {
  pdl::trigger_then_wait(trigger);  // before reading what the previous kernel wrote (kernels/pdl.cuh)
  constexpr int kCols = 32 * VEC;
  __shared__ float qs[2][256], ks[2][256];
  __shared__ float red[2][2][W][kCols];
  __shared__ float vsh[2][Fold ? kCols : 1];
  const int n = blockIdx.z, hv = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int h = hv / (a.HV / a.H);
  const int K = a.K, V = a.V;
  const int c0 = blockIdx.x * kCols + lane * VEC;
  const bool col_ok = c0 < V;  // V % VEC == 0
  const size_t head = static_cast<size_t>(n) * a.HV + hv;

  float S[RPT][VEC];
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int kk = warp + W * i;
    if (col_ok && kk < K && a.initial_state) {
      detail::load_state<SS, VEC>(static_cast<const SS*>(a.initial_state) + (head * K + kk) * V + c0, S[i]);
    } else {
#pragma unroll
      for (int u = 0; u < VEC; ++u) S[i][u] = 0.f;
    }
  }

  long bos, eos;
  detail::seq_bounds(a, n, bos, eos);
  const T* qp = static_cast<const T*>(a.q);
  const T* kp = static_cast<const T*>(a.k);
  const T* vp = static_cast<const T*>(a.v);
  T* op = static_cast<T*>(a.o);
  int p = 0;
  for (long tok = bos; tok < eos; ++tok, p ^= 1) {
    if constexpr (Fold) {  // the conv of the head's k, q and v by the whole block into ks, qs and vsh (raw)
      constexpr int kPer = (2 * W * RPT + 128 + 32 * W - 1) / (32 * W);  // K <= W·RPT, V <= 128
      fold_conv_head<T, kPer>(
          a, n, h, hv, kp + token_offset(a.k_stride, tok, static_cast<int64_t>(a.H) * K) + h * K,
          qp + token_offset(a.q_stride, tok, static_cast<int64_t>(a.H) * K) + h * K,
          vp + token_offset(a.v_stride, tok, static_cast<int64_t>(a.HV) * V) + static_cast<size_t>(hv) * V, ks[p],
          qs[p], vsh[p]);
      __syncthreads();
    }
    if (warp < 2) {  // warp 0 normalises k, warp 1 q (and applies the scale)
      const T* src = warp == 0 ? kp + token_offset(a.k_stride, tok, static_cast<int64_t>(a.H) * K) + h * K
                               : qp + token_offset(a.q_stride, tok, static_cast<int64_t>(a.H) * K) + h * K;
      float* dst = warp == 0 ? ks[p] : qs[p];
      float x[8];
      float ss = 0.f;
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int kk = lane + 32 * u;
        x[u] = kk < K ? (Fold ? dst[kk] : to_f<T>(src[kk])) : 0.f;
        ss += x[u] * x[u];
      }
      float mul = warp == 0 ? 1.f : a.scale;
      if (a.l2norm_qk) mul *= rsqrtf(group_sum<32>(ss) + detail::kL2Eps);
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (lane + 32 * u < K) dst[lane + 32 * u] = x[u] * mul;
    }
    float vv[VEC];
    if (!Fold && col_ok) {
      const T* src = vp + token_offset(a.v_stride, tok, static_cast<int64_t>(a.HV) * V) + static_cast<size_t>(hv) * V + c0;
#pragma unroll
      for (int u = 0; u < VEC; ++u) vv[u] = to_f<T>(src[u]);
    }
    const float alpha = expf(token_gate<T>(a, tok, hv));  // exact-ish: S is scaled by it every step
    const float beta = token_beta<T>(a, tok, hv);
    __syncthreads();
    if constexpr (Fold) {
      if (col_ok) {
#pragma unroll
        for (int u = 0; u < VEC; ++u) vv[u] = vsh[p][c0 + u];
      }
    }
    float kq = 0.f;
    for (int kk = lane; kk < K; kk += 32) kq += ks[p][kk] * qs[p][kk];
    kq = group_sum<32>(kq);
    float pa[VEC], pb[VEC];
#pragma unroll
    for (int u = 0; u < VEC; ++u) pa[u] = pb[u] = 0.f;
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
      const int kk = warp + W * i;
      const float kx = kk < K ? ks[p][kk] : 0.f;
      const float qx = kk < K ? qs[p][kk] : 0.f;
#pragma unroll
      for (int u = 0; u < VEC; ++u) pa[u] += S[i][u] * kx, pb[u] += S[i][u] * qx;
    }
#pragma unroll
    for (int u = 0; u < VEC; ++u) red[p][0][warp][lane * VEC + u] = pa[u], red[p][1][warp][lane * VEC + u] = pb[u];
    __syncthreads();
    float vn[VEC], out[VEC];
#pragma unroll
    for (int u = 0; u < VEC; ++u) {
      float sa = 0.f, sb = 0.f;
#pragma unroll
      for (int w = 0; w < W; ++w) sa += red[p][0][w][lane * VEC + u], sb += red[p][1][w][lane * VEC + u];
      vn[u] = col_ok ? beta * (a.delta ? vv[u] - alpha * sa : vv[u]) : 0.f;
      out[u] = col_ok ? to_f<T>(detail::from_f<T>(alpha * sb + kq * vn[u])) : 0.f;
      if (!Fold && warp == 0 && col_ok)
        op[(static_cast<size_t>(tok) * a.HV + hv) * V + c0 + u] = detail::from_f<T>(out[u]);
    }
    if (Fold && warp == 0) fold_norm_write<T, VEC>(a, out, lane, tok, hv, op + (static_cast<size_t>(tok) * a.HV + hv) * V);
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
      const int kk = warp + W * i;
      const float kx = kk < K ? ks[p][kk] : 0.f;
#pragma unroll
      for (int u = 0; u < VEC; ++u) S[i][u] = alpha * S[i][u] + kx * vn[u];
    }
  }

  if (a.final_state == nullptr || !col_ok) return;
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int kk = warp + W * i;
    if (kk >= K) continue;
    detail::store_state<SS, VEC>(static_cast<SS*>(a.final_state) + (head * K + kk) * V + c0, S[i]);
  }
}

// ---- dispatch ------------------------------------------------------------------------------------------------
template <typename T, typename SS, int VEC, int KPL, int LG, int RPT = (KPL <= 4 ? 8 : 4)>
cudaError_t launch_vk(const GatedDeltaArgs& a, cudaStream_t s) {
  constexpr int rows = 4 * (32 / LG) * RPT;
  dim3 grid((a.V + rows - 1) / rows, a.HV, a.N);
  if (a.q_stride == 0 && a.k_stride == 0 && a.v_stride == 0)
    return pdl::launch(recurrent_vk_kernel<T, SS, VEC, KPL, LG, RPT, true>, grid, dim3(128), 0, s, a,
                       pdl::trigger_for(a.N));
  return pdl::launch(recurrent_vk_kernel<T, SS, VEC, KPL, LG, RPT, false>, grid, dim3(128), 0, s, a,
                     pdl::trigger_for(a.N));
}

template <typename T, typename SS>
cudaError_t dispatch_vk(const GatedDeltaArgs& a, cudaStream_t s) {
  const int K = a.K;
  if (K % 4 == 0 && a.q_stride % 4 == 0 && a.k_stride % 4 == 0) {  // 4-element loads stay 8-byte aligned
    // Eight elements per lane where K allows: fewer shuffle levels per byte of state.
    if (K > 128) return launch_vk<T, SS, 4, 8, 32>(a, s);
    if (K > 64) return launch_vk<T, SS, 4, 8, 16, 8>(a, s);  // 32 KiB of state per block in flight
    // 33..64: eight lanes a row, two vectors each (one shuffle level less than 16 lanes x 4): 2-4% faster at
    // B*H = 1024..16384, dk 64 (H200 probe, 2026-11-30 22:40 UTC: 22.7 / 72.7 / 274.7 us vs 23.8 / 75.1 / 280.8).
    if (K > 32) return launch_vk<T, SS, 4, 8, 8, 8>(a, s);
    if (K > 16) return launch_vk<T, SS, 4, 8, 4>(a, s);
    return launch_vk<T, SS, 4, 4, 4>(a, s);
  }
  const int kpl = (K + 31) / 32;
  if (kpl <= 1) return launch_vk<T, SS, 1, 1, 32>(a, s);
  if (kpl <= 2) return launch_vk<T, SS, 1, 2, 32>(a, s);
  if (kpl <= 4) return launch_vk<T, SS, 1, 4, 32>(a, s);
  if (kpl <= 6) return launch_vk<T, SS, 1, 6, 32>(a, s);
  return launch_vk<T, SS, 1, 8, 32>(a, s);
}

template <typename T, typename SS, int VEC, int RPT, int W>
cudaError_t launch_kv(const GatedDeltaArgs& a, cudaStream_t s) {
  constexpr int cols = 32 * VEC;
  dim3 grid((a.V + cols - 1) / cols, a.HV, a.N);
  if constexpr (std::is_same<SS, float>::value)  // the fold takes fp32 states only (check_fold): half the instances
    if (a.fold)
      return pdl::launch(recurrent_kv_kernel<T, SS, VEC, RPT, W, true>, grid, dim3(W * 32), 0, s, a,
                         pdl::trigger_for(a.N));
  return pdl::launch(recurrent_kv_kernel<T, SS, VEC, RPT, W, false>, grid, dim3(W * 32), 0, s, a,
                     pdl::trigger_for(a.N));
}

// Up to K = 64 four warps (16 rows per thread at K = 64, as 8 warps hold at K = 128): the per-step block
// reduction costs the same per byte of state at every K.
template <typename T, typename SS, int VEC>
cudaError_t dispatch_kv_rows(const GatedDeltaArgs& a, cudaStream_t s) {
  const int K = a.K;
  if (K <= 16) return launch_kv<T, SS, VEC, 4, 4>(a, s);
  if (K <= 32) return launch_kv<T, SS, VEC, 8, 4>(a, s);
  if (K <= 64) return launch_kv<T, SS, VEC, 16, 4>(a, s);
  const int rpt = (K + 7) / 8;
  if (rpt <= 12) return launch_kv<T, SS, VEC, 12, 8>(a, s);
  if (rpt <= 16) return launch_kv<T, SS, VEC, 16, 8>(a, s);
  if (rpt <= 24) return launch_kv<T, SS, VEC, 24, 8>(a, s);
  return launch_kv<T, SS, VEC, 32, 8>(a, s);
}

/// A [K,V] grid of 4-column lanes that fills at most half the SMs (a decode step at batch 1: Gated DeltaNet 1.3B's
/// 4 x 6 blocks of 128 KiB of state each, the Qwen3.5 hybrid's 32): its time is each SM's own stream of state, so
/// lanes of 2 columns — twice the blocks, half the state each — spread it over twice the SMs. The sums are the same
/// (a column's arithmetic does not depend on its neighbours). Not for the fold (one block owns a head);
/// STATECUT_DECODE_SPLIT=0 keeps 4 columns.
bool split_small_grid(const GatedDeltaArgs& a) {
  static const int sms = current_sm_count(0);
  static const bool on = env_switch_on("STATECUT_DECODE_SPLIT");
  const int64_t blocks = static_cast<int64_t>((a.V + 127) / 128) * a.HV * a.N;
  return on && !a.fold && sms > 0 && 2 * blocks <= sms;
}

template <typename T, typename SS>
cudaError_t dispatch(const GatedDeltaArgs& a, cudaStream_t s) {
  if (a.layout == StateLayout::kVK) return dispatch_vk<T, SS>(a, s);
  return a.V <= 64 || split_small_grid(a) ? dispatch_kv_rows<T, SS, 2>(a, s) : dispatch_kv_rows<T, SS, 4>(a, s);
}

template <typename T>
cudaError_t dispatch_state(const GatedDeltaArgs& a, cudaStream_t s) {
  return a.state_bf16 ? dispatch<T, __nv_bfloat16>(a, s) : dispatch<T, float>(a, s);
}

/// The fold's own conditions (gated_delta.h): one token per sequence, one block per head.
const char* check_fold(const GatedDeltaArgs& a) {
  if (a.layout != StateLayout::kKV) return "the decode fold needs the [K,V] state layout";
  if (a.state_bf16) return "the decode fold takes an fp32 state";
  if (a.cu_seqlens != nullptr || a.seq_len != 1) return "the decode fold takes one token per sequence";
  if (a.HV != a.H) return "the decode fold needs as many value heads as key heads (one block owns a head's channels)";
  if (a.V > 128 || a.V % 8 != 0) return "the decode fold needs a value dim of at most 128 and a multiple of 8";
  if (a.conv_width != kFoldConvWidth) return "the decode fold takes a conv width of 4";
  if (!a.conv_w || !a.norm_w || !a.conv_state)
    return "the decode fold needs the conv weights, its window and the norm weight";
  if (reinterpret_cast<uintptr_t>(a.conv_w) % 8 != 0) return "the decode fold's conv weights must be 8-byte aligned";
  const int64_t C = a.conv_channels, qk = static_cast<int64_t>(a.H) * a.K, vw = static_cast<int64_t>(a.HV) * a.V;
  if (a.conv_q0 < 0 || a.conv_k0 < 0 || a.conv_v0 < 0 || a.conv_q0 + qk > C || a.conv_k0 + qk > C ||
      a.conv_v0 + vw > C)
    return "the decode fold's q, k and v channels must lie in the conv window";
  if (a.z_stride < 0) return "token strides must be >= 0";
  return nullptr;
}

}  // namespace

const char* check_args(const GatedDeltaArgs& a) {
  if (!a.q || !a.k || !a.v || !a.o) return "q, k, v and o must be given";
  if (a.K < 1 || a.K > 256) return "key dim K must be in 1..256";
  if (a.V < 1 || a.V > 1024) return "value dim V must be in 1..1024";
  if (a.V % 4 != 0) return "value dim V must be a multiple of 4";
  if (a.H < 1 || a.HV < a.H || a.HV % a.H != 0) return "value heads HV must be a positive multiple of key heads H";
  if (a.N < 1) return "need at least one sequence";
  if (a.cu_seqlens == nullptr && a.seq_len < 0) return "seq_len must be >= 0";
  if (a.cu_seqlens != nullptr && a.max_seq_len < 0) return "max_seq_len must be >= 0 with cu_seqlens";
  if (a.gate_in_kernel && (a.A_log == nullptr || (a.g == nullptr && a.g_typed == nullptr)))
    return "gate_in_kernel needs g and A_log";
  if (a.beta_dt && !a.gate_in_kernel) return "beta_dt needs gate_in_kernel (beta is formed from the gate input)";
  if (a.q_stride < 0 || a.k_stride < 0 || a.v_stride < 0 || a.g_stride < 0 || a.beta_stride < 0)
    return "token strides must be >= 0";
  if (a.fold) return check_fold(a);
  return nullptr;
}

cudaError_t gated_delta_recurrent(const GatedDeltaArgs& a, cudaStream_t stream) {
  if (check_args(a) != nullptr) return cudaErrorInvalidValue;
  return a.in_type == ElemType::kBF16 ? dispatch_state<__nv_bfloat16>(a, stream)
                                       : dispatch_state<__half>(a, stream);
}

}  // namespace statecut::cuda
