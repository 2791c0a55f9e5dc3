// Recurrent (token-loop) gated delta rule: decode, few-step verify and any-T recurrence on the device.
// Per token, with a = S^T k and b = S^T q read from the state before the step, one pass over the state:
//   v' = beta (v - alpha a),  o = alpha b + (k.q) v',  S = alpha S + k v'^T.
// One persistent kernel per state layout, used for every T and both state types (so a T-token call and T one-token
// calls run the same fp32 operations in the same order). The work is cut into items, each a tile of one (sequence,
// value head) state: [V,K] R consecutive rows v (one contiguous run of R*K elements), [K,V] all K rows of C
// consecutive columns v; about 8 KiB of fp32 state each. Every warp is its own pipeline over the items gw,
// gw + warps, ...: the states of its next kStages - 1 items are in flight (cp.async into the warp's ring of shared
// memory stages) while the current one is updated from shared memory and written to global memory with plain
// coalesced stores, and the inputs (q, k, v, g, beta) of the next step are loaded into registers one step ahead.
// No block-wide barrier anywhere. The state is read and written once per call; between the tokens of a T > 1 call
// it stays in shared memory in fp32 (the stage itself, or a scratch tile for bf16 states, rounded once at the end).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/gated_delta.h"
#include "kernels/gated_delta_common.cuh"

namespace statecut::cuda {
namespace {

using detail::to_f;

constexpr int kStages = 2;        // per warp: the item being updated + the next one in flight
constexpr int kMaxWarps = 14;     // per block (one block per SM): 14 x 16 KiB rings fill the 227 KiB

/// Launch plan shared by both layouts (filled on the host).
struct Plan {
  int items = 0;        ///< number of work items
  int tiles = 0;        ///< items per (sequence, value head)
  int total_warps = 0;  ///< warps in the grid
  int stage_bytes = 0;  ///< one ring stage (multiple of 16)
  int scratch_bytes = 0;  ///< fp32 tile for T > 1 with a bf16 state (0: none)
  int warp_bytes = 0;   ///< shared memory per warp (multiple of 16)
  int cb = 16;          ///< cp.async chunk bytes (16, or 8 for bf16 states not 16-byte aligned)
  int dt = 0, dhv = 0, dn = 0;  ///< total_warps items as (tiles, value heads, sequences): a warp's item step
  float inv_group = 1.f;        ///< 1 / (HV / H)
};

/// Position of an item: sequence n, value head hv, tile; advanced by total_warps items without dividing.
struct Pos {
  int n, hv, tile;
};
__device__ __forceinline__ Pos pos_of(const Plan& p, int HV, int item) {
  const int head = item / p.tiles;
  return {head / HV, head % HV, item % p.tiles};
}
__device__ __forceinline__ void advance(const Plan& p, int HV, Pos& x) {
  x.tile += p.dt;
  int c = x.tile >= p.tiles;
  x.tile -= c ? p.tiles : 0;
  x.hv += p.dhv + c;
  c = x.hv >= HV;
  x.hv -= c ? HV : 0;
  x.n += p.dn + c;
}
/// Key head of value head hv (hv / (HV/H), exact for hv < 2^20).
__device__ __forceinline__ int key_head(const Plan& p, int hv) { return __float2int_rz((hv + 0.5f) * p.inv_group); }

__device__ __forceinline__ void cp_async16(uint32_t s, const void* g, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(g), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async8(uint32_t s, const void* g, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(g), "r"(valid ? 8 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// One warp copies `bytes` from g into shared memory at s and zero-fills up to `cap` bytes (both multiples of cb;
/// g == nullptr: all zeros, `dummy` is a readable address that is never read).
__device__ __forceinline__ void copy_run(uint32_t s, const char* g, int bytes, int cap, int cb, int lane,
                                         const void* dummy) {
  if (g == nullptr) bytes = 0;
  if (cb == 16) {
    for (int o = lane * 16; o < cap; o += 32 * 16) cp_async16(s + o, o < bytes ? g + o : dummy, o < bytes);
  } else {
    for (int o = lane * 8; o < cap; o += 32 * 8) cp_async8(s + o, o < bytes ? g + o : dummy, o < bytes);
  }
}

template <int LG>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
  for (int off = LG / 2; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

/// N consecutive input elements, raw (N in {1, 4}; 4 needs 8-byte alignment).
template <typename T, int N>
__device__ __forceinline__ void load_raw(const T* p, T* out) {
  if constexpr (N == 4) {
    const uint2 r = *reinterpret_cast<const uint2*>(p);
    memcpy(out, &r, sizeof(r));
  } else {
    out[0] = *p;
  }
}

// Gate and beta from their raw per-token values (detail::token_log_gate / token_beta split into load and math, so
// the load can be issued a step ahead).
__device__ __forceinline__ float gate_raw(const GatedDeltaArgs& a, long tok, int hv) {
  return a.g ? a.g[tok * a.HV + hv] : 0.f;
}
__device__ __forceinline__ float log_gate(const GatedDeltaArgs& a, float g, int hv) {
  if (a.g == nullptr) return 0.f;
  if (a.gate_in_kernel) {
    const float bias = a.dt_bias ? a.dt_bias[hv] : 0.f;
    g = -__expf(a.A_log[hv]) * detail::softplus(g + bias);
  }
  return g;
}
__device__ __forceinline__ float beta_raw(const GatedDeltaArgs& a, long tok, int hv) {
  return a.beta ? a.beta[tok * a.HV + hv] : 1.f;
}
__device__ __forceinline__ float beta_of(const GatedDeltaArgs& a, float b) {
  return a.beta && a.beta_sigmoid ? 1.f / (1.f + __expf(-b)) : b;
}

/// Number of items of this warp: gw, gw + total_warps, ... < items.
__device__ __forceinline__ int my_items(const Plan& p, int gw) {
  return gw < p.items ? (p.items - 1 - gw) / p.total_warps + 1 : 0;
}

// ---- layout [V, K] -------------------------------------------------------------------------------------------
// A warp holds P = 32/LG groups of LG lanes; a group owns one row v per pass (RP passes: R = P*RP rows per item)
// and, per lane, KPL elements of K at k = (e/VEC)*LG*VEC + lane*VEC + e%VEC (coalesced along K).
template <typename T, int KPL, int RP>
struct InVK {
  T k[KPL], q[KPL], v[RP];
  float g, b;
};

template <typename T, typename SS, int VEC, int KPL, int LG, int RP>
__global__ void __launch_bounds__(kMaxWarps * 32, 1) recurrent_vk_kernel(const GatedDeltaArgs a, const Plan p) {
  constexpr int P = 32 / LG;
  constexpr int R = P * RP;
  constexpr bool kF32 = std::is_same<SS, float>::value;
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int grp = lane / LG, gl = lane % LG;
  const int K = a.K, V = a.V, HV = a.HV;
  unsigned char* wsm = smem + warp * p.warp_bytes;
  float* scratch = kF32 ? nullptr : reinterpret_cast<float*>(wsm + kStages * p.stage_bytes);
  const int gw = warp * gridDim.x + blockIdx.x;  // consecutive items on different SMs: equal shares per SM
  const int n_my = my_items(p, gw);
  const SS* s0 = static_cast<const SS*>(a.initial_state);
  SS* s1 = static_cast<SS*>(a.final_state);
  const T* qp = static_cast<const T*>(a.q);
  const T* kp = static_cast<const T*>(a.k);
  const T* vp = static_cast<const T*>(a.v);
  T* op = static_cast<T*>(a.o);

  int kidx[KPL];
#pragma unroll
  for (int e = 0; e < KPL; ++e) kidx[e] = (e / VEC) * LG * VEC + gl * VEC + e % VEC;

  Pos at_issue = pos_of(p, HV, gw < p.items ? gw : 0), at = at_issue;
  auto issue = [&](int it) {
    if (it < n_my) {
      const size_t head = static_cast<size_t>(at_issue.n) * HV + at_issue.hv;
      const int j0 = at_issue.tile * R;
      const int rows = min(R, V - j0);
      const char* g = s0 ? reinterpret_cast<const char*>(s0 + (head * V + j0) * K) : nullptr;
      const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(wsm + (it % kStages) * p.stage_bytes));
      copy_run(s, g, rows * K * int(sizeof(SS)), R * K * int(sizeof(SS)), p.cb, lane, a.q);
      advance(p, HV, at_issue);
    }
    cp_async_commit();  // every lane, every call: the group count stays uniform
  };
  auto load_in = [&](InVK<T, KPL, RP>& in, const Pos& x, long tok) {
    const int h = key_head(p, x.hv);
    const int j0 = x.tile * R;
    const size_t qk = (static_cast<size_t>(tok) * a.H + h) * K;
#pragma unroll
    for (int e = 0; e < KPL; e += VEC) {
      if (kidx[e] < K) {
        load_raw<T, VEC>(kp + qk + kidx[e], in.k + e);
        load_raw<T, VEC>(qp + qk + kidx[e], in.q + e);
      } else {
#pragma unroll
        for (int u = 0; u < VEC; ++u) in.k[e + u] = in.q[e + u] = detail::from_f<T>(0.f);
      }
    }
    const T* vrow = vp + (static_cast<size_t>(tok) * HV + x.hv) * V;
#pragma unroll
    for (int r = 0; r < RP; ++r) {
      const int j = j0 + r * P + grp;
      in.v[r] = j < V ? vrow[j] : detail::from_f<T>(0.f);
    }
    in.g = gate_raw(a, tok, x.hv);
    in.b = beta_raw(a, tok, x.hv);
  };
  // One token on the item's tile: src is the stage (SS) or the fp32 scratch; the new state goes to the final
  // state (last token) or to the fp32 tile dst.
  auto step = [&](const auto* src, float* dst, const InVK<T, KPL, RP>& in, const Pos& x, long tok, bool last) {
    using Src = std::remove_const_t<std::remove_pointer_t<decltype(src)>>;
    const size_t head = static_cast<size_t>(x.n) * HV + x.hv;
    const int j0 = x.tile * R;
    float kv[KPL], qv[KPL];
#pragma unroll
    for (int e = 0; e < KPL; ++e) kv[e] = to_f<T>(in.k[e]), qv[e] = to_f<T>(in.q[e]);
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
    const float alpha = expf(log_gate(a, in.g, x.hv));  // exact-ish: S is scaled by it every step
    const float beta = beta_of(a, in.b);
    T* orow = op + (static_cast<size_t>(tok) * HV + x.hv) * V;
#pragma unroll
    for (int r = 0; r < RP; ++r) {
      const int row = r * P + grp, j = j0 + row;
      float S[KPL];
#pragma unroll
      for (int e = 0; e < KPL; e += VEC) {
        if (kidx[e] < K) {
          detail::load_state<Src, VEC>(src + row * K + kidx[e], S + e);
        } else {
#pragma unroll
          for (int u = 0; u < VEC; ++u) S[e + u] = 0.f;
        }
      }
      float sa = 0.f, sb = 0.f;
#pragma unroll
      for (int e = 0; e < KPL; ++e) sa += S[e] * kv[e], sb += S[e] * qv[e];
      sa = group_sum<LG>(sa);
      sb = group_sum<LG>(sb);
      const float vn = beta * (to_f<T>(in.v[r]) - alpha * sa);
      const float o = alpha * sb + kq * vn;
      if (gl == 0 && j < V) orow[j] = detail::from_f<T>(o);
#pragma unroll
      for (int e = 0; e < KPL; ++e) S[e] = alpha * S[e] + kv[e] * vn;
#pragma unroll
      for (int e = 0; e < KPL; e += VEC) {
        if (kidx[e] >= K) continue;
        if (!last) detail::store_state<float, VEC>(dst + row * K + kidx[e], S + e);
        else if (s1 && j < V) detail::store_state<SS, VEC>(s1 + (head * V + j) * K + kidx[e], S + e);
      }
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  InVK<T, KPL, RP> cur;
  bool cur_ok = false;
  for (int it = 0; it < n_my; ++it) {
    issue(it + kStages - 1);
    cp_async_wait<kStages - 1>();
    __syncwarp();  // the whole item is in the stage (each lane waited for its own chunks)
    const SS* stage = reinterpret_cast<const SS*>(wsm + (it % kStages) * p.stage_bytes);
    float* tile = kF32 ? reinterpret_cast<float*>(wsm + (it % kStages) * p.stage_bytes) : scratch;
    long bos, eos;
    detail::seq_bounds(a, at.n, bos, eos);
    if (bos == eos && s1 != nullptr) {  // empty sequence: the final state is the initial one
      const size_t head = static_cast<size_t>(at.n) * HV + at.hv;
      const int j0 = at.tile * R;
#pragma unroll
      for (int r = 0; r < RP; ++r) {
        const int row = r * P + grp, j = j0 + row;
#pragma unroll
        for (int e = 0; e < KPL; e += VEC) {
          if (kidx[e] >= K || j >= V) continue;
          float S[VEC];
          detail::load_state<SS, VEC>(stage + row * K + kidx[e], S);
          detail::store_state<SS, VEC>(s1 + (head * V + j) * K + kidx[e], S);
        }
      }
    }
    Pos nx = at;
    advance(p, HV, nx);
    for (long tok = bos; tok < eos; ++tok) {
      if (!cur_ok) load_in(cur, at, tok);
      InVK<T, KPL, RP> nxt;
      bool nxt_ok = false;
      if (tok + 1 < eos) {
        load_in(nxt, at, tok + 1);
        nxt_ok = true;
      } else if (it + 1 < n_my) {  // the next item's first token, if it has one
        long b2, e2;
        detail::seq_bounds(a, nx.n, b2, e2);
        if (b2 < e2) {
          load_in(nxt, nx, b2);
          nxt_ok = true;
        }
      }
      const bool last = tok + 1 == eos;
      if constexpr (kF32) {
        step(stage, tile, cur, at, tok, last);
      } else {
        if (tok == bos) step(stage, tile, cur, at, tok, last);
        else step(static_cast<const float*>(tile), tile, cur, at, tok, last);
      }
      cur = nxt;
      cur_ok = nxt_ok;
    }
    at = nx;
    __syncwarp();  // every lane is done with the stage before it is refilled
  }
  cp_async_wait<0>();
}

// ---- layout [K, V] -------------------------------------------------------------------------------------------
// Item: all K rows of C = 4*CL columns. Lane (rg, cq) = (lane / CL, lane % CL) owns the 4 columns cq*4.. and the
// rows rg, rg + RG, ... (RG = 32/CL row groups); the K reduction is in-lane, then across the row groups by
// shuffles. The warp normalises k and q into its own shared memory (ks, qs) once per token.
template <typename T>
struct InKV {
  T k[8], q[8], v[4];
  float g, b;
};

template <typename T, typename SS, int CL>
__global__ void __launch_bounds__(kMaxWarps * 32, 1) recurrent_kv_kernel(const GatedDeltaArgs a, const Plan p) {
  constexpr int C = 4 * CL, RG = 32 / CL;
  constexpr bool kF32 = std::is_same<SS, float>::value;
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rg = lane / CL, cq = lane % CL;
  const int K = a.K, V = a.V, HV = a.HV;
  unsigned char* wsm = smem + warp * p.warp_bytes;
  float* ks = reinterpret_cast<float*>(wsm + kStages * p.stage_bytes + p.scratch_bytes);
  float* qs = ks + (K + 3) / 4 * 4;
  float* scratch = kF32 ? nullptr : reinterpret_cast<float*>(wsm + kStages * p.stage_bytes);
  const int gw = warp * gridDim.x + blockIdx.x;  // consecutive items on different SMs: equal shares per SM
  const int n_my = my_items(p, gw);
  const SS* s0 = static_cast<const SS*>(a.initial_state);
  SS* s1 = static_cast<SS*>(a.final_state);
  const T* qp = static_cast<const T*>(a.q);
  const T* kp = static_cast<const T*>(a.k);
  const T* vp = static_cast<const T*>(a.v);
  T* op = static_cast<T*>(a.o);
  const int row_bytes = C * int(sizeof(SS));

  Pos at_issue = pos_of(p, HV, gw < p.items ? gw : 0), at = at_issue;
  auto issue = [&](int it) {
    if (it < n_my) {
      const size_t head = static_cast<size_t>(at_issue.n) * HV + at_issue.hv;
      const int c0 = at_issue.tile * C;
      const int valid = min(C, V - c0) * int(sizeof(SS));  // bytes of a row inside V (a multiple of cb)
      const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(wsm + (it % kStages) * p.stage_bytes));
      const char* g = s0 ? reinterpret_cast<const char*>(s0 + head * K * V + c0) : nullptr;
      const int per_row = row_bytes / p.cb, row_shift = __ffs(per_row) - 1;  // per_row is a power of two
      for (int c = lane; c < K * per_row; c += 32) {
        const int kk = c >> row_shift, off = (c & (per_row - 1)) * p.cb;
        const bool ok = g != nullptr && off < valid;
        const char* src = ok ? g + static_cast<size_t>(kk) * V * sizeof(SS) + off : static_cast<const char*>(a.q);
        if (p.cb == 16) cp_async16(s + kk * row_bytes + off, src, ok);
        else cp_async8(s + kk * row_bytes + off, src, ok);
      }
      advance(p, HV, at_issue);
    }
    cp_async_commit();
  };
  auto load_in = [&](InKV<T>& in, const Pos& x, long tok) {
    const int h = key_head(p, x.hv);
    const int c = x.tile * C + cq * 4;
    const size_t qk = (static_cast<size_t>(tok) * a.H + h) * K;
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int kk = lane + 32 * u;
      in.k[u] = kk < K ? kp[qk + kk] : detail::from_f<T>(0.f);
      in.q[u] = kk < K ? qp[qk + kk] : detail::from_f<T>(0.f);
    }
    if (c < V) {
      load_raw<T, 4>(vp + (static_cast<size_t>(tok) * HV + x.hv) * V + c, in.v);
    } else {
#pragma unroll
      for (int u = 0; u < 4; ++u) in.v[u] = detail::from_f<T>(0.f);
    }
    in.g = gate_raw(a, tok, x.hv);
    in.b = beta_raw(a, tok, x.hv);
  };
  auto step = [&](const auto* src, float* dst, const InKV<T>& in, const Pos& x, long tok, bool last) {
    using Src = std::remove_const_t<std::remove_pointer_t<decltype(src)>>;
    const size_t head = static_cast<size_t>(x.n) * HV + x.hv;
    const int c0 = x.tile * C;
    const bool col_ok = c0 + cq * 4 < V;  // V % 4 == 0
    float xk[8], xq[8];
    float sk = 0.f, sq = 0.f;
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      xk[u] = to_f<T>(in.k[u]), xq[u] = to_f<T>(in.q[u]);
      sk += xk[u] * xk[u], sq += xq[u] * xq[u];
    }
    float mk = 1.f, mq = a.scale;
    if (a.l2norm_qk) {
      mk = rsqrtf(group_sum<32>(sk) + detail::kL2Eps);
      mq *= rsqrtf(group_sum<32>(sq) + detail::kL2Eps);
    }
    float kq = 0.f;
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      xk[u] *= mk, xq[u] *= mq;
      kq += xk[u] * xq[u];
    }
    kq = group_sum<32>(kq);
    __syncwarp();  // the previous token's readers of ks, qs are done
#pragma unroll
    for (int u = 0; u < 8; ++u)
      if (lane + 32 * u < K) ks[lane + 32 * u] = xk[u], qs[lane + 32 * u] = xq[u];
    __syncwarp();
    const float alpha = expf(log_gate(a, in.g, x.hv));  // exact-ish: S is scaled by it every step
    const float beta = beta_of(a, in.b);
    float pa[4] = {0.f, 0.f, 0.f, 0.f}, pb[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
    for (int kk = rg; kk < K; kk += RG) {
      float s[4];
      detail::load_state<Src, 4>(src + kk * C + cq * 4, s);
      const float kx = ks[kk], qx = qs[kk];
#pragma unroll
      for (int u = 0; u < 4; ++u) pa[u] += s[u] * kx, pb[u] += s[u] * qx;
    }
#pragma unroll
    for (int off = CL; off < 32; off <<= 1) {
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        pa[u] += __shfl_xor_sync(0xffffffffu, pa[u], off);
        pb[u] += __shfl_xor_sync(0xffffffffu, pb[u], off);
      }
    }
    float vn[4];
    T ov[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      vn[u] = col_ok ? beta * (to_f<T>(in.v[u]) - alpha * pa[u]) : 0.f;
      ov[u] = detail::from_f<T>(alpha * pb[u] + kq * vn[u]);
    }
    if (rg == 0 && col_ok) {
      uint2 r;
      memcpy(&r, ov, sizeof(r));
      *reinterpret_cast<uint2*>(op + (static_cast<size_t>(tok) * HV + x.hv) * V + c0 + cq * 4) = r;
    }
    SS* fs = s1 ? s1 + head * K * V + c0 + cq * 4 : nullptr;
#pragma unroll 4
    for (int kk = rg; kk < K; kk += RG) {
      float s[4];
      detail::load_state<Src, 4>(src + kk * C + cq * 4, s);
      const float kx = ks[kk];
#pragma unroll
      for (int u = 0; u < 4; ++u) s[u] = alpha * s[u] + kx * vn[u];
      if (!last) detail::store_state<float, 4>(dst + kk * C + cq * 4, s);
      else if (fs && col_ok) detail::store_state<SS, 4>(fs + static_cast<size_t>(kk) * V, s);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  InKV<T> cur;
  bool cur_ok = false;
  for (int it = 0; it < n_my; ++it) {
    issue(it + kStages - 1);
    cp_async_wait<kStages - 1>();
    __syncwarp();
    const SS* stage = reinterpret_cast<const SS*>(wsm + (it % kStages) * p.stage_bytes);
    float* tile = kF32 ? reinterpret_cast<float*>(wsm + (it % kStages) * p.stage_bytes) : scratch;
    long bos, eos;
    detail::seq_bounds(a, at.n, bos, eos);
    if (bos == eos && s1 != nullptr) {  // empty sequence: the final state is the initial one
      const size_t head = static_cast<size_t>(at.n) * HV + at.hv;
      const int c0 = at.tile * C;
      if (c0 + cq * 4 < V) {
        for (int kk = rg; kk < K; kk += RG) {
          float s[4];
          detail::load_state<SS, 4>(stage + kk * C + cq * 4, s);
          detail::store_state<SS, 4>(s1 + (head * K + kk) * V + c0 + cq * 4, s);
        }
      }
    }
    Pos nx = at;
    advance(p, HV, nx);
    for (long tok = bos; tok < eos; ++tok) {
      if (!cur_ok) load_in(cur, at, tok);
      InKV<T> nxt;
      bool nxt_ok = false;
      if (tok + 1 < eos) {
        load_in(nxt, at, tok + 1);
        nxt_ok = true;
      } else if (it + 1 < n_my) {
        long b2, e2;
        detail::seq_bounds(a, nx.n, b2, e2);
        if (b2 < e2) {
          load_in(nxt, nx, b2);
          nxt_ok = true;
        }
      }
      const bool last = tok + 1 == eos;
      if constexpr (kF32) {
        step(stage, tile, cur, at, tok, last);
      } else {
        if (tok == bos) step(stage, tile, cur, at, tok, last);
        else step(static_cast<const float*>(tile), tile, cur, at, tok, last);
      }
      cur = nxt;
      cur_ok = nxt_ok;
    }
    at = nx;
    __syncwarp();
  }
  cp_async_wait<0>();
}

// ---- dispatch ------------------------------------------------------------------------------------------------
// Warps per block: as many as the shared memory holds (at most kMaxWarps), fewer when there are few items so that
// they spread over all SMs; one block per SM at most.
template <typename Kern>
cudaError_t launch(Kern kernel, const GatedDeltaArgs& a, Plan p, cudaStream_t s) {
  int dev = 0, sms = 0, optin = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (e != cudaSuccess) return e;
  const int wmax = std::min(kMaxWarps, optin / p.warp_bytes);
  if (wmax < 1) return cudaErrorInvalidConfiguration;
  const int w = std::max(1, std::min(wmax, (p.items + sms - 1) / sms));
  const int blocks = std::min(sms, (p.items + w - 1) / w);
  p.total_warps = blocks * w;
  p.dt = p.total_warps % p.tiles;
  p.dhv = p.total_warps / p.tiles % a.HV;
  p.dn = p.total_warps / p.tiles / a.HV;
  p.inv_group = 1.f / static_cast<float>(a.HV / a.H);
  const int bytes = w * p.warp_bytes;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) return e;
  kernel<<<blocks, w * 32, bytes, s>>>(a, p);
  return cudaGetLastError();
}

/// An fp32 tile for T > 1 with a bf16 state: needed unless every sequence has at most one token.
bool needs_scratch(const GatedDeltaArgs& a) { return a.state_bf16 && (a.cu_seqlens != nullptr || a.seq_len > 1); }

int round16(int x) { return (x + 15) / 16 * 16; }

template <typename T, typename SS, int VEC, int KPL, int LG, int RP>
cudaError_t launch_vk(const GatedDeltaArgs& a, cudaStream_t s) {
  constexpr int R = (32 / LG) * RP;
  Plan p;
  p.tiles = (a.V + R - 1) / R;
  p.items = a.N * a.HV * p.tiles;
  p.stage_bytes = round16(R * a.K * int(sizeof(SS)));
  p.scratch_bytes = needs_scratch(a) ? R * a.K * 4 : 0;
  p.warp_bytes = round16(kStages * p.stage_bytes + p.scratch_bytes);
  // fp32 runs start at (head*V + j0)*K with head*V + j0 = 0 mod 4: 16-byte aligned; bf16 ones when K is even.
  p.cb = sizeof(SS) == 4 || a.K % 2 == 0 ? 16 : 8;
  return launch(recurrent_vk_kernel<T, SS, VEC, KPL, LG, RP>, a, p, s);
}

template <typename T, typename SS>
cudaError_t dispatch_vk(const GatedDeltaArgs& a, cudaStream_t s) {
  const int K = a.K;
  if (K % 4 == 0) {  // sixteen elements per lane as four 4-vectors (two reduction levels fewer than eight)
    if (K > 128) return launch_vk<T, SS, 4, 16, 16, 4>(a, s);
    if (K > 64) return launch_vk<T, SS, 4, 16, 8, 4>(a, s);  // 8 KiB of fp32 state per item
    if (K > 32) return launch_vk<T, SS, 4, 16, 4, 4>(a, s);
    if (K > 16) return launch_vk<T, SS, 4, 16, 2, 4>(a, s);
    return launch_vk<T, SS, 4, 16, 1, 4>(a, s);
  }
  const int kpl = (K + 31) / 32;
  if (kpl <= 1) return launch_vk<T, SS, 1, 1, 32, 8>(a, s);
  if (kpl <= 2) return launch_vk<T, SS, 1, 2, 32, 8>(a, s);
  if (kpl <= 4) return launch_vk<T, SS, 1, 4, 32, 8>(a, s);
  if (kpl <= 6) return launch_vk<T, SS, 1, 6, 32, 8>(a, s);
  return launch_vk<T, SS, 1, 8, 32, 8>(a, s);
}

template <typename T, typename SS, int CL>
cudaError_t launch_kv(const GatedDeltaArgs& a, cudaStream_t s) {
  constexpr int C = 4 * CL;
  Plan p;
  p.tiles = (a.V + C - 1) / C;
  p.items = a.N * a.HV * p.tiles;
  p.stage_bytes = round16(a.K * C * int(sizeof(SS)));
  p.scratch_bytes = needs_scratch(a) ? a.K * C * 4 : 0;
  const int kq_bytes = 2 * ((a.K + 3) / 4 * 4) * 4;  // ks, qs
  p.warp_bytes = round16(kStages * p.stage_bytes + p.scratch_bytes + kq_bytes);
  // Row segments start at (head*K + k)*V + c0: 16-byte aligned in fp32 (V % 4 == 0), in bf16 when V % 8 == 0.
  p.cb = sizeof(SS) == 4 || a.V % 8 == 0 ? 16 : 8;
  return launch(recurrent_kv_kernel<T, SS, CL>, a, p, s);
}

template <typename T, typename SS>
cudaError_t dispatch_kv(const GatedDeltaArgs& a, cudaStream_t s) {
  // 128-byte fp32 row segments up to K = 64, 64-byte ones above (about 8 KiB of fp32 state per item). A bf16 state
  // takes the fp32 tile shape: the same reduction order, so it equals the fp32 kernel on the widened state.
  if (a.K > 64) return launch_kv<T, SS, 4>(a, s);
  return launch_kv<T, SS, 8>(a, s);
}

template <typename T, typename SS>
cudaError_t dispatch(const GatedDeltaArgs& a, cudaStream_t s) {
  return a.layout == StateLayout::kVK ? dispatch_vk<T, SS>(a, s) : dispatch_kv<T, SS>(a, s);
}

template <typename T>
cudaError_t dispatch_state(const GatedDeltaArgs& a, cudaStream_t s) {
  return a.state_bf16 ? dispatch<T, __nv_bfloat16>(a, s) : dispatch<T, float>(a, s);
}

}  // namespace

const char* check_args(const GatedDeltaArgs& a) {
  if (!a.q || !a.k || !a.v || !a.o) return "q, k, v and o must be given";
  if (a.K < 1 || a.K > 256) return "key dim K must be in 1..256";
  if (a.V < 1 || a.V > 256) return "value dim V must be in 1..256";
  if (a.V % 4 != 0) return "value dim V must be a multiple of 4";
  if (a.H < 1 || a.HV < a.H || a.HV % a.H != 0) return "value heads HV must be a positive multiple of key heads H";
  if (a.N < 1) return "need at least one sequence";
  if (a.cu_seqlens == nullptr && a.seq_len < 0) return "seq_len must be >= 0";
  if (a.cu_seqlens != nullptr && a.max_seq_len < 0) return "max_seq_len must be >= 0 with cu_seqlens";
  if (a.gate_in_kernel && (a.A_log == nullptr || a.g == nullptr)) return "gate_in_kernel needs g and A_log";
  return nullptr;
}

cudaError_t gated_delta_recurrent(const GatedDeltaArgs& a, cudaStream_t stream) {
  if (check_args(a) != nullptr) return cudaErrorInvalidValue;
  return a.in_type == ElemType::kBF16 ? dispatch_state<__nv_bfloat16>(a, stream)
                                       : dispatch_state<__half>(a, stream);
}

}  // namespace statecut::cuda
