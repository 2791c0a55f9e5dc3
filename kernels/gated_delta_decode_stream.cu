// Single-token decode of the gated delta rule as a stream: every state byte is read once and written once, and the
// kernel's job is to keep enough of those bytes moving. gated_delta_recurrent takes this path when each sequence has
// at most one token, the state is fp32 and K % 4 == 0 (kernels/gated_delta_decode_stream.h).
//
// Per (sequence n, value head hv) and its token (q, k normalised when asked, α = e^g, β), with a = Sᵀk and b = Sᵀq
// read from the state before the step:
//   v' = β (v − α a),   o = α b + (k·q) v',   S ← α S + k v'ᵀ.
// The state is cut into tiles of 4–16 KiB. Every warp owns a pipeline of NS shared-memory tile buffers and walks a
// contiguous range of tiles: bulk copies (the TMA unit, kernels/bulk_copy.cuh) load tile i + NS − 1 while the warp
// updates tile i in shared memory and a bulk store writes it back, so each warp keeps NS − 1 tiles of loads in
// flight and no thread spends instructions on moving bytes. Warps never wait for each other (no block barrier).
//   [V,K]: a tile is ROWS consecutive rows v of one head (contiguous, one bulk copy); a group of LG lanes owns a row,
//          each lane KPL elements of K, a and b are reduced by shuffles.
//   [K,V]: a tile is all K rows of 32 consecutive columns of one head (one bulk copy per row); lane c owns column c
//          and sums a and b over the rows itself: no reduction across lanes.
// A sequence without a token passes its state through (α = 1, v' = 0); a missing initial state is zero.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/bulk_copy.cuh"
#include "kernels/gated_delta_common.cuh"
#include "kernels/gated_delta_decode_stream.h"

namespace statecut::cuda::detail {
namespace {

template <int LG>
__device__ __forceinline__ float lane_group_sum(float x) {
#pragma unroll
  for (int off = LG / 2; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// The token of sequence n, or -1 when the sequence is empty.
__device__ __forceinline__ long only_token(const GatedDeltaArgs& a, int n) {
  long bos, eos;
  seq_bounds(a, n, bos, eos);
  return eos > bos ? bos : -1;
}

// Per-head quantities of one warp: normalised k, q in shared memory (K <= 256), α, β, k·q and the token's v row.
struct HeadStep {
  float alpha, beta, kq;
  long tok;
};

template <typename T>
__device__ HeadStep load_head(const GatedDeltaArgs& a, int head, float* ks, float* qs, float* vs, int lane) {
  const int n = head / a.HV, hv = head % a.HV, K = a.K, V = a.V;
  HeadStep h{1.f, 0.f, 0.f, only_token(a, n)};
  if (h.tok < 0) {  // nothing to add: v' = 0 and the state is kept
    for (int i = lane; i < 256; i += 32) ks[i] = qs[i] = vs[i] = 0.f;
    __syncwarp();
    return h;
  }
  const T* kp = static_cast<const T*>(a.k) + (static_cast<size_t>(h.tok) * a.H + hv / (a.HV / a.H)) * K;
  const T* qp = static_cast<const T*>(a.q) + (static_cast<size_t>(h.tok) * a.H + hv / (a.HV / a.H)) * K;
  const T* vp = static_cast<const T*>(a.v) + (static_cast<size_t>(h.tok) * a.HV + hv) * V;
  float kx[8], qx[8], sk = 0.f, sq = 0.f;
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    const int i = lane + 32 * u;
    kx[u] = i < K ? to_f<T>(kp[i]) : 0.f;
    qx[u] = i < K ? to_f<T>(qp[i]) : 0.f;
    sk += kx[u] * kx[u], sq += qx[u] * qx[u];
    vs[i] = i < V ? to_f<T>(vp[i]) : 0.f;
  }
  float kscale = 1.f, qscale = a.scale;
  if (a.l2norm_qk) {
    kscale = rsqrtf(lane_group_sum<32>(sk) + kL2Eps);
    qscale *= rsqrtf(lane_group_sum<32>(sq) + kL2Eps);
  }
  float kq = 0.f;
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    ks[lane + 32 * u] = kx[u] * kscale;
    qs[lane + 32 * u] = qx[u] * qscale;
    kq += kx[u] * kscale * qx[u] * qscale;
  }
  h.kq = lane_group_sum<32>(kq);
  h.alpha = expf(token_log_gate(a, h.tok, hv));
  h.beta = token_beta(a, h.tok, hv);
  __syncwarp();
  return h;
}

// The per-warp pipeline both layouts share: NS tile buffers, one mbarrier each; Tile supplies the geometry
// (tiles_per_head, rows(t), issue_load(t, buf, bar), issue_store(t, buf), update(t, buf, head)).
template <int NS, typename Tile>
__device__ __forceinline__ void run_pipeline(Tile& tl, float* bufs, uint64_t* bars, int tile_floats, int t0, int t1,
                                             bool load, bool store, int lane) {
  if (lane == 0) {
#pragma unroll
    for (int s = 0; s < NS; ++s) mbar_init(&bars[s]);
    mbar_init_fence();
  }
  __syncwarp();
  if (load)
    for (int i = 0; i < NS && t0 + i < t1; ++i) tl.issue_load(t0 + i, bufs + i * tile_floats, &bars[i]);
  int head = -1;
  for (int t = t0, i = 0; t < t1; ++t, ++i) {
    const int s = i % NS;
    float* buf = bufs + s * tile_floats;
    if (!load && store && i >= NS) {  // no loads to order the reuse: wait for the store that read this buffer
      bulk_wait_read<NS - 1>();
      __syncwarp();
    }
    const int th = t / tl.tiles_per_head;
    if (th != head) tl.new_head(head = th);
    if (load) mbar_wait(&bars[s], (i / NS) & 1);
    tl.update(t, buf, load);
    if (store) {
      async_proxy_fence();
      __syncwarp();
      tl.issue_store(t, buf);
    }
    // Refill the previous tile's buffer once its store has read it (the store just issued may still run).
    if (load && i >= 1 && t - 1 + NS < t1) {
      if (store) {
        bulk_wait_read<1>();
        __syncwarp();
      }
      const int sp = (i - 1) % NS;
      tl.issue_load(t - 1 + NS, bufs + sp * tile_floats, &bars[sp]);
    }
  }
  if (store) bulk_wait_all();
}

// ---- layout [V, K] -------------------------------------------------------------------------------------------
template <typename T, int KPL, int LG, int ROWS>
struct VkTiles {
  static constexpr int G = 32 / LG;
  const GatedDeltaArgs& a;
  int tiles_per_head, lane;
  float *ks, *qs, *vs;
  HeadStep h;
  __device__ int rows(int t) const { return min(ROWS, a.V - (t % tiles_per_head) * ROWS); }
  __device__ size_t offset(int t) const {
    return (static_cast<size_t>(t / tiles_per_head) * a.V + (t % tiles_per_head) * ROWS) * a.K;
  }
  __device__ void new_head(int head) { h = load_head<T>(a, head, ks, qs, vs, lane); }
  __device__ void issue_load(int t, float* buf, uint64_t* bar) {
    if (lane != 0) return;
    const uint32_t bytes = rows(t) * a.K * 4;
    mbar_expect_tx(bar, bytes);
    bulk_load(buf, static_cast<const float*>(a.initial_state) + offset(t), bytes, bar);
  }
  __device__ void issue_store(int t, float* buf) {
    if (lane != 0) return;
    bulk_store(static_cast<float*>(a.final_state) + offset(t), buf, rows(t) * a.K * 4);
    bulk_commit();
  }
  __device__ void update(int t, float* buf, bool loaded) {
    const int grp = lane / LG, gl = lane % LG, K = a.K, nr = rows(t);
    const int row0 = (t % tiles_per_head) * ROWS;
    float kv[KPL], qv[KPL];
#pragma unroll
    for (int e = 0; e < KPL; e += 4) {
      const int k0 = (e / 4) * LG * 4 + gl * 4;  // ks, qs are zero beyond K (K <= 256 <= LG * KPL)
      *reinterpret_cast<float4*>(kv + e) = *reinterpret_cast<const float4*>(ks + k0);
      *reinterpret_cast<float4*>(qv + e) = *reinterpret_cast<const float4*>(qs + k0);
    }
    T* o = static_cast<T*>(a.o) + (h.tok < 0 ? 0 : (static_cast<size_t>(h.tok) * a.HV + (t / tiles_per_head) % a.HV) * a.V);
#pragma unroll 4
    for (int it = 0; it < ROWS / G; ++it) {
      const int r = it * G + grp;
      float S[KPL];
#pragma unroll
      for (int e = 0; e < KPL; e += 4) {
        const int k0 = (e / 4) * LG * 4 + gl * 4;
        const bool in = r < nr && k0 < K && loaded;
        const float4 x = in ? *reinterpret_cast<const float4*>(buf + r * K + k0) : make_float4(0.f, 0.f, 0.f, 0.f);
        S[e] = x.x, S[e + 1] = x.y, S[e + 2] = x.z, S[e + 3] = x.w;
      }
      float sa = 0.f, sb = 0.f;
#pragma unroll
      for (int e = 0; e < KPL; ++e) sa += S[e] * kv[e], sb += S[e] * qv[e];
      sa = lane_group_sum<LG>(sa);
      sb = lane_group_sum<LG>(sb);
      const int j = row0 + r;
      const float vn = h.beta * (vs[min(j, 255)] - h.alpha * sa);
      if (h.tok >= 0 && gl == 0 && r < nr) o[j] = from_f<T>(h.alpha * sb + h.kq * vn);
#pragma unroll
      for (int e = 0; e < KPL; e += 4) {
        const int k0 = (e / 4) * LG * 4 + gl * 4;
        if (r < nr && k0 < K)
          *reinterpret_cast<float4*>(buf + r * K + k0) =
              make_float4(h.alpha * S[e] + kv[e] * vn, h.alpha * S[e + 1] + kv[e + 1] * vn,
                          h.alpha * S[e + 2] + kv[e + 2] * vn, h.alpha * S[e + 3] + kv[e + 3] * vn);
      }
    }
  }
};

// ---- layout [K, V] -------------------------------------------------------------------------------------------
template <typename T>
struct KvTiles {
  const GatedDeltaArgs& a;
  int tiles_per_head, lane;
  float *ks, *qs, *vs;
  HeadStep h;
  __device__ int cols(int t) const { return min(32, a.V - (t % tiles_per_head) * 32); }
  __device__ size_t offset(int t) const {  // row 0 of the tile
    return static_cast<size_t>(t / tiles_per_head) * a.K * a.V + (t % tiles_per_head) * 32;
  }
  __device__ void new_head(int head) { h = load_head<T>(a, head, ks, qs, vs, lane); }
  __device__ void issue_load(int t, float* buf, uint64_t* bar) {
    const uint32_t bytes = cols(t) * 4;
    if (lane == 0) mbar_expect_tx(bar, bytes * a.K);
    __syncwarp();
    const float* src = static_cast<const float*>(a.initial_state) + offset(t);
    for (int kk = lane; kk < a.K; kk += 32) bulk_load(buf + kk * 32, src + static_cast<size_t>(kk) * a.V, bytes, bar);
  }
  __device__ void issue_store(int t, float* buf) {
    const uint32_t bytes = cols(t) * 4;
    float* dst = static_cast<float*>(a.final_state) + offset(t);
    for (int kk = lane; kk < a.K; kk += 32) bulk_store(dst + static_cast<size_t>(kk) * a.V, buf + kk * 32, bytes);
    bulk_commit();
  }
  __device__ void update(int t, float* buf, bool loaded) {
    const int K = a.K, c = (t % tiles_per_head) * 32 + lane;
    const bool in = lane < cols(t);
    float sa = 0.f, sb = 0.f;
    if (loaded) {
#pragma unroll 8
      for (int kk = 0; kk < K; ++kk) {
        const float s = buf[kk * 32 + lane];
        sa += s * ks[kk], sb += s * qs[kk];
      }
    }
    const float vn = h.beta * (vs[min(c, 255)] - h.alpha * sa);
    if (h.tok >= 0 && in)
      static_cast<T*>(a.o)[(static_cast<size_t>(h.tok) * a.HV + (t / tiles_per_head) % a.HV) * a.V + c] =
          from_f<T>(h.alpha * sb + h.kq * vn);
#pragma unroll 8
    for (int kk = 0; kk < K; ++kk) {
      const float s = loaded ? buf[kk * 32 + lane] : 0.f;
      buf[kk * 32 + lane] = h.alpha * s + ks[kk] * vn;
    }
  }
};

struct WarpShared {  // per warp: normalised k, q and the token's v
  float ks[256], qs[256], vs[256];
};

template <typename T, int KPL, int LG, int ROWS, int NS, int WARPS>
__global__ void __launch_bounds__(WARPS * 32, 1)
    vk_tma_kernel(const GatedDeltaArgs a, int tiles_per_head, int total, int per) {
  extern __shared__ __align__(128) float tiles[];
  __shared__ uint64_t bars[WARPS][NS];
  __shared__ WarpShared ws[WARPS];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t0 = (blockIdx.x * WARPS + warp) * per, t1 = min(total, t0 + per);
  if (t0 >= t1) return;
  const int tile_floats = ROWS * a.K;
  VkTiles<T, KPL, LG, ROWS> tl{a, tiles_per_head, lane, ws[warp].ks, ws[warp].qs, ws[warp].vs, {}};
  run_pipeline<NS>(tl, tiles + static_cast<size_t>(warp) * NS * tile_floats, bars[warp], tile_floats, t0, t1,
                   a.initial_state != nullptr, a.final_state != nullptr, lane);
}

template <typename T, int NS, int WARPS>
__global__ void __launch_bounds__(WARPS * 32, 1)
    kv_tma_kernel(const GatedDeltaArgs a, int tiles_per_head, int total, int per) {
  extern __shared__ __align__(128) float tiles[];
  __shared__ uint64_t bars[WARPS][NS];
  __shared__ WarpShared ws[WARPS];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t0 = (blockIdx.x * WARPS + warp) * per, t1 = min(total, t0 + per);
  if (t0 >= t1) return;
  const int tile_floats = a.K * 32;
  KvTiles<T> tl{a, tiles_per_head, lane, ws[warp].ks, ws[warp].qs, ws[warp].vs, {}};
  run_pipeline<NS>(tl, tiles + static_cast<size_t>(warp) * NS * tile_floats, bars[warp], tile_floats, t0, t1,
                   a.initial_state != nullptr, a.final_state != nullptr, lane);
}

int sm_count() {
  static const int sms = [] {
    int dev = 0, n = 132;
    if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n;
  }();
  return sms;
}

// Persistent grid: as many warps as fit at once (blocks per SM from the occupancy calculator at this K's shared
// memory), each a contiguous, equal share of the tiles.
template <typename Kern>
cudaError_t launch_tiles(Kern kern, int warps, size_t smem, int tiles_per_head, int total, const GatedDeltaArgs& a,
                         cudaStream_t s) {
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  int per_sm = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, warps * 32, smem);
  if (e != cudaSuccess) return e;
  const long workers = static_cast<long>(sm_count()) * std::max(per_sm, 1) * warps;
  const int per = static_cast<int>((total + workers - 1) / workers);
  const int used = (total + per - 1) / per;
  kern<<<(used + warps - 1) / warps, warps * 32, smem, s>>>(a, tiles_per_head, total, per);
  return cudaGetLastError();
}

}  // namespace

template <typename T, int KPL, int LG, int ROWS, int NS, int WARPS>
cudaError_t launch_vk_tma(const GatedDeltaArgs& a, cudaStream_t s) {
  const int tph = (a.V + ROWS - 1) / ROWS;
  const size_t smem = sizeof(float) * WARPS * NS * ROWS * a.K;
  return launch_tiles(vk_tma_kernel<T, KPL, LG, ROWS, NS, WARPS>, WARPS, smem, tph, a.N * a.HV * tph, a, s);
}

template <typename T, int NS, int WARPS>
cudaError_t launch_kv_tma(const GatedDeltaArgs& a, cudaStream_t s) {
  const int tph = (a.V + 31) / 32;
  const size_t smem = sizeof(float) * WARPS * NS * 32 * a.K;
  return launch_tiles(kv_tma_kernel<T, NS, WARPS>, WARPS, smem, tph, a.N * a.HV * tph, a, s);
}

bool decode_stream_applies(const GatedDeltaArgs& a) {
  const bool one_token = a.cu_seqlens ? a.max_seq_len <= 1 : a.seq_len == 1;
  return one_token && !a.state_bf16 && a.K % 4 == 0;
}

namespace {

// Tiles of ~8 KiB ([V,K]: ROWS rows of K floats) or 32 columns of K rows ([K,V]); WARPS x NS buffers <= 192 KiB.
template <typename T>
cudaError_t dispatch_stream(const GatedDeltaArgs& a, cudaStream_t s) {
  const int K = a.K;
  if (a.layout == StateLayout::kVK) {
    if (K <= 16) return launch_vk_tma<T, 4, 4, 128, 3, 8>(a, s);
    if (K <= 32) return launch_vk_tma<T, 4, 8, 64, 3, 8>(a, s);
    if (K <= 64) return launch_vk_tma<T, 4, 16, 32, 3, 8>(a, s);
    if (K <= 128) return launch_vk_tma<T, 4, 32, 16, 3, 8>(a, s);
    return launch_vk_tma<T, 8, 32, 8, 3, 8>(a, s);
  }
  if (K <= 64) return launch_kv_tma<T, 3, 8>(a, s);
  if (K <= 128) return launch_kv_tma<T, 3, 4>(a, s);
  return launch_kv_tma<T, 3, 2>(a, s);
}

}  // namespace

cudaError_t decode_stream(const GatedDeltaArgs& a, cudaStream_t stream) {
  return a.in_type == ElemType::kBF16 ? dispatch_stream<__nv_bfloat16>(a, stream) : dispatch_stream<__half>(a, stream);
}

}  // namespace statecut::cuda::detail
