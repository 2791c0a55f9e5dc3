// Chunked (WY/UT, chunk C = 64) prefill of the gated delta rule, fused in one kernel per (sequence, value head,
// value tile of VT columns). Per chunk (notes/anchor-fla.md §2.1), all in shared memory, matrix products on the
// tensor cores in TF32 with fp32 accumulation (TF32 keeps the error within 2x of an fp32 token loop; bf16 operands
// would not), the unit-triangular solve in plain fp32:
//   A = strict_lower(diag(b) K K^T o D),  P = tril_incl(Q K^T o D),  T = (I + A)^-1 (blocked forward substitution)
//   O  = diag(e^G) Q S                     (read before the state changes)
//   V' = T diag(b) V - T diag(b e^G) K S   (U - W S)
//   O += P V';  S <- e^{G_last} S + (diag(e^{G_last - G}) K)^T V'
// Any key dim: K is zero-padded to Kp = ceil16(K) in shared memory; rows past the end of a sequence are zeros with
// g = 0 and beta = 0, so they change neither the state nor the cumulative gate.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <algorithm>

#include "kernels/gated_delta.h"
#include "kernels/gated_delta_common.cuh"

namespace statecut::cuda {
namespace {

using namespace nvcuda;
using detail::to_f;

constexpr int C = 64;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
static_assert(kThreads == 4 * C, "row-wise loops use four threads per chunk row");
constexpr int ldc = C + 4;  // padded row of the C x C matrices

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragACol = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

template <typename F>
__device__ __forceinline__ void to_tf32(F& f) {
#pragma unroll
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = wmma::__float_to_tf32(f.x[i]);
}

constexpr int ldx = 52;  // solve scratch [16][ldx]

// The output tile is staged in Qs (free by then) when its rows are wide enough, else in its own buffer Os.
struct Layout {
  int Kp, VT, ldk, ldv;
  __host__ __device__ bool o_in_q() const { return ldk >= VT; }
  __host__ __device__ int floats() const {
    return 2 * C * ldk + Kp * ldv + C * ldv + (o_in_q() ? 0 : C * ldv) + 16 * ldx + 2 * C * ldc + 2 * C;
  }
};

__host__ __device__ inline Layout make_layout(int Kp, int VT) { return Layout{Kp, VT, Kp + 4, VT + 4}; }

// Acc[m] (m < MT) += A[row tiles r0+m, k range] * B[k range, col tile c0]; A row-major (lda), B row-major (ldb).
template <int MT>
__device__ __forceinline__ void warp_gemm(FragC* acc, const float* A, int lda, const float* B, int ldb, int r0,
                                          int c0, int kdim) {
  for (int k0 = 0; k0 < kdim; k0 += 8) {
    FragB b;
    wmma::load_matrix_sync(b, B + k0 * ldb + c0 * 16, ldb);
    to_tf32(b);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      FragA af;
      wmma::load_matrix_sync(af, A + (r0 + m) * 16 * lda + k0, lda);
      to_tf32(af);
      wmma::mma_sync(acc[m], af, b, acc[m]);
    }
  }
}

template <typename T, int VT>
__global__ void __launch_bounds__(kThreads, 1) chunk_kernel(const GatedDeltaArgs a, const int Kp) {
  extern __shared__ __align__(128) float sm[];
  const Layout L = make_layout(Kp, VT);
  const int ldk = L.ldk, ldv = L.ldv;
  float* Ks = sm;                 // [C][ldk]  normalised k; later diag(e^{G_last-G}) k
  float* Qs = Ks + C * ldk;       // [C][ldk]  scale * normalised q; then e^G rows; then -W
  float* Ss = Qs + C * ldk;       // [Kp][ldv] state tile
  float* Vs = Ss + Kp * ldv;      // [C][ldv]  v chunk; then V'
  float* Xs = Vs + C * ldv;       // [16][ldx] solve scratch
  float* Os = L.o_in_q() ? Qs : Xs + 16 * ldx;  // [C][ldo] output staging
  const int ldo = L.o_in_q() ? ldk : ldv;
  float* Ts = Xs + 16 * ldx + (L.o_in_q() ? 0 : C * ldv);  // [C][ldc]  A -> T -> T diag(b) -> T diag(b e^G)
  float* Ps = Ts + C * ldc;       // [C][ldc]  P
  float* Gs = Ps + C * ldc;       // [C] cumulative log gate
  float* Bs = Gs + C;             // [C] beta

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int n = blockIdx.z, hv = blockIdx.y, v0 = blockIdx.x * VT;
  const int h = hv / (a.HV / a.H);
  const int K = a.K, V = a.V;
  const size_t head = static_cast<size_t>(n) * a.HV + hv;
  const T* qp = static_cast<const T*>(a.q);
  const T* kp = static_cast<const T*>(a.k);
  const T* vp = static_cast<const T*>(a.v);
  T* op = static_cast<T*>(a.o);

  // ---- initial state tile ----
  const float* s0 = static_cast<const float*>(a.initial_state);
  float* s1 = static_cast<float*>(a.final_state);
  if (a.layout == StateLayout::kKV) {
    for (int i = tid; i < Kp * VT; i += kThreads) {
      const int kk = i / VT, c = i % VT;
      float x = 0.f;
      if (s0 && kk < K && v0 + c < V) x = s0[(head * K + kk) * V + v0 + c];
      Ss[kk * ldv + c] = x;
    }
  } else {
    for (int i = tid; i < Kp * VT; i += kThreads) {
      const int kk = i % Kp, c = i / Kp;
      float x = 0.f;
      if (s0 && kk < K && v0 + c < V) x = s0[(head * V + v0 + c) * K + kk];
      Ss[kk * ldv + c] = x;
    }
  }

  // Output tiles of the C x VT products: warp owns column tile ct and MT row tiles from rt0.
  constexpr int kColTiles = VT / 16;
  constexpr int MT = 4 * kColTiles / kWarps;
  const int ct = warp % kColTiles, rt0 = (warp / kColTiles) * MT;

  long bos, eos;
  detail::seq_bounds(a, n, bos, eos);
  for (long c0 = bos; c0 < eos; c0 += C) {
    const int Lc = static_cast<int>(min(static_cast<long>(C), eos - c0));
    __syncthreads();  // previous chunk done with every buffer
    // ---- 1. load k, q (zero padded), v tile: every load of a thread issued before the first use ----
    if (K % 8 == 0) {
      // 64 rows x Kp/8 groups of 8 over 256 threads: at most 8 groups per thread (Kp <= 256)
      const int groups = Kp / 8;
      uint4 rk[8], rq[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int i = tid + u * kThreads, r = i / groups, k0 = (i % groups) * 8;
        rk[u] = rq[u] = make_uint4(0u, 0u, 0u, 0u);
        if (i < C * groups && r < Lc && k0 < K) {
          const size_t off = (static_cast<size_t>(c0 + r) * a.H + h) * K + k0;
          rk[u] = *reinterpret_cast<const uint4*>(kp + off);
          rq[u] = *reinterpret_cast<const uint4*>(qp + off);
        }
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int i = tid + u * kThreads, r = i / groups, k0 = (i % groups) * 8;
        if (i >= C * groups) break;
        const T* ek = reinterpret_cast<const T*>(&rk[u]);
        const T* eq = reinterpret_cast<const T*>(&rq[u]);
#pragma unroll
        for (int e = 0; e < 8; ++e) Ks[r * ldk + k0 + e] = to_f<T>(ek[e]), Qs[r * ldk + k0 + e] = to_f<T>(eq[e]);
      }
    } else {
      for (int i = tid; i < C * Kp; i += kThreads) {
        const int r = i / Kp, kk = i % Kp;
        float xk = 0.f, xq = 0.f;
        if (r < Lc && kk < K) {
          const size_t off = (static_cast<size_t>(c0 + r) * a.H + h) * K + kk;
          xk = to_f<T>(kp[off]);
          xq = to_f<T>(qp[off]);
        }
        Ks[r * ldk + kk] = xk, Qs[r * ldk + kk] = xq;
      }
    }
    {
      constexpr int kVIt = C * (VT / 4) / kThreads;  // 2 (VT 32) or 4 (VT 64)
      uint2 rv[kVIt];
#pragma unroll
      for (int u = 0; u < kVIt; ++u) {
        const int i = tid + u * kThreads, r = i / (VT / 4), c = (i % (VT / 4)) * 4;
        rv[u] = make_uint2(0u, 0u);
        if (r < Lc && v0 + c < V)
          rv[u] = *reinterpret_cast<const uint2*>(vp + (static_cast<size_t>(c0 + r) * a.HV + hv) * V + v0 + c);
      }
#pragma unroll
      for (int u = 0; u < kVIt; ++u) {
        const int i = tid + u * kThreads, r = i / (VT / 4), c = (i % (VT / 4)) * 4;
        const T* e = reinterpret_cast<const T*>(&rv[u]);
#pragma unroll
        for (int x = 0; x < 4; ++x) Vs[r * ldv + c + x] = to_f<T>(e[x]);
      }
    }
    if (warp == 0) {  // gates: inclusive cumsum over the chunk, two tokens per lane
      float g0 = 0.f, g1 = 0.f, b0 = 0.f, b1 = 0.f;
      const int t0 = 2 * lane, t1 = 2 * lane + 1;
      if (t0 < Lc) g0 = detail::token_log_gate(a, c0 + t0, hv), b0 = detail::token_beta(a, c0 + t0, hv);
      if (t1 < Lc) g1 = detail::token_log_gate(a, c0 + t1, hv), b1 = detail::token_beta(a, c0 + t1, hv);
      const float pair = g0 + g1;
      float incl = pair;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const float y = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += y;
      }
      const float excl = incl - pair;
      Gs[t0] = excl + g0, Gs[t1] = excl + pair;
      Bs[t0] = b0, Bs[t1] = b1;
    }
    __syncthreads();
    // ---- 2. l2 norm and scale (one warp per row) ----
    for (int r = warp; r < C; r += kWarps) {
      float sk = 0.f, sq = 0.f;
      for (int kk = lane; kk < Kp; kk += 32) sk += Ks[r * ldk + kk] * Ks[r * ldk + kk], sq += Qs[r * ldk + kk] * Qs[r * ldk + kk];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        sk += __shfl_xor_sync(0xffffffffu, sk, off);
        sq += __shfl_xor_sync(0xffffffffu, sq, off);
      }
      const float mk = a.l2norm_qk ? rsqrtf(sk + detail::kL2Eps) : 1.f;
      const float mq = a.scale * (a.l2norm_qk ? rsqrtf(sq + detail::kL2Eps) : 1.f);
      for (int kk = lane; kk < Kp; kk += 32) Ks[r * ldk + kk] *= mk, Qs[r * ldk + kk] *= mq;
    }
    __syncthreads();
    // ---- 3. A = K K^T (warps 0-3), P = Q K^T (warps 4-7), 32 x 32 blocks; the upper block is masked away ----
    {
      const int blk = warp & 3, bi = blk >> 1, bj = blk & 1;
      if (bj <= bi) {
        const float* Ao = warp < 4 ? Ks : Qs;
        FragC acc[2][2];
#pragma unroll
        for (int x = 0; x < 2; ++x)
#pragma unroll
          for (int y = 0; y < 2; ++y) wmma::fill_fragment(acc[x][y], 0.f);
        for (int k0 = 0; k0 < Kp; k0 += 8) {
          FragA fa[2];
          FragBCol fb[2];
#pragma unroll
          for (int x = 0; x < 2; ++x) {
            wmma::load_matrix_sync(fa[x], Ao + (bi * 32 + x * 16) * ldk + k0, ldk);
            to_tf32(fa[x]);
            wmma::load_matrix_sync(fb[x], Ks + (bj * 32 + x * 16) * ldk + k0, ldk);
            to_tf32(fb[x]);
          }
#pragma unroll
          for (int x = 0; x < 2; ++x)
#pragma unroll
            for (int y = 0; y < 2; ++y) wmma::mma_sync(acc[x][y], fa[x], fb[y], acc[x][y]);
        }
        float* dst = warp < 4 ? Ts : Ps;
#pragma unroll
        for (int x = 0; x < 2; ++x)
#pragma unroll
          for (int y = 0; y < 2; ++y)
            wmma::store_matrix_sync(dst + (bi * 32 + x * 16) * ldc + bj * 32 + y * 16, acc[x][y], ldc,
                                    wmma::mem_row_major);
      }
    }
    __syncthreads();
    // ---- 4. masks and decays; Q rows times e^G ----
    for (int i = tid; i < C * C; i += kThreads) {
      const int r = i / C, c = i % C;
      const float d = c <= r ? __expf(Gs[r] - Gs[c]) : 0.f;
      Ts[r * ldc + c] = c < r ? Bs[r] * d * Ts[r * ldc + c] : 0.f;
      Ps[r * ldc + c] = c <= r ? d * Ps[r * ldc + c] : 0.f;
    }
    {  // four threads per row
      const int r = tid >> 2;
      const float e = __expf(Gs[r]);
      for (int kk = tid & 3; kk < Kp; kk += 4) Qs[r * ldk + kk] *= e;
    }
    __syncthreads();
    // ---- 5. O = (e^G Q) S, kept in registers ----
    FragC accO[MT], accU[MT];
#pragma unroll
    for (int m = 0; m < MT; ++m) wmma::fill_fragment(accO[m], 0.f), wmma::fill_fragment(accU[m], 0.f);
    warp_gemm<MT>(accO, Qs, ldk, Ss, ldv, rt0, ct, Kp);
    // ---- 6. T = (I + A)^-1: diagonal 16 x 16 blocks by column lanes, then block rows ----
    if (warp < 4 && lane < 16) {
      const int d = warp * 16, cc = lane;
      float x[16];
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        float s = 0.f;
#pragma unroll
        for (int m = 0; m < r; ++m) s += Ts[(d + r) * ldc + d + m] * x[m];
        x[r] = r < cc ? 0.f : (r == cc ? 1.f : -s);
      }
      __syncwarp(0x0000ffffu);
#pragma unroll
      for (int r = 0; r < 16; ++r) Ts[(d + r) * ldc + d + cc] = x[r];
    }
    __syncthreads();
    for (int bi = 1; bi < 4; ++bi) {
      const int w = 16 * bi;
      for (int i = tid; i < 16 * w; i += kThreads) {
        const int r = i / w, cc = i % w;
        float s = 0.f;
        for (int m = cc; m < w; ++m) s += Ts[(w + r) * ldc + m] * Ts[m * ldc + cc];
        Xs[r * ldx + cc] = s;
      }
      __syncthreads();
      for (int i = tid; i < 16 * w; i += kThreads) {
        const int r = i / w, cc = i % w;
        float s = 0.f;
        for (int m = 0; m <= r; ++m) s += Ts[(w + r) * ldc + w + m] * Xs[m * ldx + cc];
        Ts[(w + r) * ldc + cc] = -s;
      }
      __syncthreads();
    }
    // ---- 7. U = T diag(b) V ----
    for (int i = tid; i < C * C; i += kThreads) Ts[(i / C) * ldc + i % C] *= Bs[i % C];
    __syncthreads();
    warp_gemm<MT>(accU, Ts, ldc, Vs, ldv, rt0, ct, C);
    __syncthreads();
    for (int i = tid; i < C * C; i += kThreads) Ts[(i / C) * ldc + i % C] *= __expf(Gs[i % C]);
    __syncthreads();
    // ---- 8. -W = -T diag(b e^G) K into Qs ----
    for (int t = warp; t < 4 * (Kp / 16); t += kWarps) {
      const int rt = t % 4, kt = t / 4;
      FragC acc;
      wmma::fill_fragment(acc, 0.f);
      for (int k0 = 0; k0 < C; k0 += 8) {
        FragA fa;
        FragB fb;
        wmma::load_matrix_sync(fa, Ts + rt * 16 * ldc + k0, ldc);
        to_tf32(fa);
        wmma::load_matrix_sync(fb, Ks + k0 * ldk + kt * 16, ldk);
        to_tf32(fb);
        wmma::mma_sync(acc, fa, fb, acc);
      }
#pragma unroll
      for (int i = 0; i < acc.num_elements; ++i) acc.x[i] = -acc.x[i];
      wmma::store_matrix_sync(Qs + rt * 16 * ldk + kt * 16, acc, ldk, wmma::mem_row_major);
    }
    __syncthreads();
    // ---- 9. V' = U - W S into Vs ----
    warp_gemm<MT>(accU, Qs, ldk, Ss, ldv, rt0, ct, Kp);
#pragma unroll
    for (int m = 0; m < MT; ++m)
      wmma::store_matrix_sync(Vs + (rt0 + m) * 16 * ldv + ct * 16, accU[m], ldv, wmma::mem_row_major);
    __syncthreads();
    // ---- 10. O += P V'; K rows times e^{G_last - G} ----
    warp_gemm<MT>(accO, Ps, ldc, Vs, ldv, rt0, ct, C);
#pragma unroll
    for (int m = 0; m < MT; ++m)
      wmma::store_matrix_sync(Os + (rt0 + m) * 16 * ldo + ct * 16, accO[m], ldo, wmma::mem_row_major);
    const float glast = Gs[C - 1];
    {
      const int r = tid >> 2;
      const float e = __expf(glast - Gs[r]);
      for (int kk = tid & 3; kk < Kp; kk += 4) Ks[r * ldk + kk] *= e;
    }
    __syncthreads();
    // ---- 11. write O; S <- e^{G_last} S + Kd^T V' ----
    for (int i = tid; i < Lc * (VT / 4); i += kThreads) {
      const int r = i / (VT / 4), c = (i % (VT / 4)) * 4;
      if (v0 + c >= V) continue;
      T out[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) out[u] = detail::from_f<T>(Os[r * ldo + c + u]);
      *reinterpret_cast<uint2*>(op + (static_cast<size_t>(c0 + r) * a.HV + hv) * V + v0 + c) =
          *reinterpret_cast<const uint2*>(out);
    }
    const float decay = __expf(glast);
    for (int t = warp; t < (Kp / 16) * kColTiles; t += kWarps) {
      const int kt = t / kColTiles, vt = t % kColTiles;
      FragC acc;
      wmma::load_matrix_sync(acc, Ss + kt * 16 * ldv + vt * 16, ldv, wmma::mem_row_major);
#pragma unroll
      for (int i = 0; i < acc.num_elements; ++i) acc.x[i] *= decay;
      for (int k0 = 0; k0 < C; k0 += 8) {
        FragACol fa;
        FragB fb;
        wmma::load_matrix_sync(fa, Ks + k0 * ldk + kt * 16, ldk);
        to_tf32(fa);
        wmma::load_matrix_sync(fb, Vs + k0 * ldv + vt * 16, ldv);
        to_tf32(fb);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(Ss + kt * 16 * ldv + vt * 16, acc, ldv, wmma::mem_row_major);
    }
  }
  __syncthreads();
  if (a.final_state == nullptr) return;
  if (a.layout == StateLayout::kKV) {
    for (int i = tid; i < K * VT; i += kThreads) {
      const int kk = i / VT, c = i % VT;
      if (v0 + c < V) s1[(head * K + kk) * V + v0 + c] = Ss[kk * ldv + c];
    }
  } else {
    for (int i = tid; i < K * VT; i += kThreads) {
      const int kk = i % K, c = i / K;
      if (v0 + c < V) s1[(head * V + v0 + c) * K + kk] = Ss[kk * ldv + c];
    }
  }
}

constexpr int kMaxSmemBytes = 232448;  // sm_90 opt-in limit per block

template <typename T, int VT>
cudaError_t launch(const GatedDeltaArgs& a, int Kp, cudaStream_t s) {
  const size_t bytes = sizeof(float) * make_layout(Kp, VT).floats();
  auto kern = chunk_kernel<T, VT>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  dim3 grid((a.V + VT - 1) / VT, a.HV, a.N);
  kern<<<grid, kThreads, bytes, s>>>(a, Kp);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch(const GatedDeltaArgs& a, cudaStream_t s) {
  const int Kp = (a.K + 15) / 16 * 16;
  int sms = 132;
  int dev = 0;
  if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  // One block per SM (shared memory); the intra-chunk work (K K^T, Q K^T, the solve, W) is repeated per value
  // tile, so wider tiles cost only ~30% more per block than VT = 32 (ncu: the kernel issues ~0.37 warp
  // instructions per cycle, latency bound). Pick the tile with the fewest waves x relative block cost.
  int best = 32;
  double best_cost = 1e30;
  for (int vt : {32, 64, 128}) {
    if (sizeof(float) * make_layout(Kp, vt).floats() > kMaxSmemBytes) continue;
    if (vt > 32 && (a.V + vt - 1) / vt == (a.V + vt / 2 - 1) / (vt / 2)) continue;  // no fewer tiles than half
    const long blocks = static_cast<long>(a.N) * a.HV * ((a.V + vt - 1) / vt);
    const double cost = static_cast<double>((blocks + sms - 1) / sms) * (1.0 + 0.3 * (vt / 32 - 1));
    if (cost < best_cost) best_cost = cost, best = vt;
  }
  if (best == 128) return launch<T, 128>(a, Kp, s);
  if (best == 64) return launch<T, 64>(a, Kp, s);
  return launch<T, 32>(a, Kp, s);
}

}  // namespace

cudaError_t gated_delta_chunk(const GatedDeltaArgs& a, cudaStream_t stream) {
  if (check_args(a) != nullptr || a.state_bf16) return cudaErrorInvalidValue;  // fp32 states only
  return a.in_type == ElemType::kBF16 ? dispatch<__nv_bfloat16>(a, stream) : dispatch<__half>(a, stream);
}

}  // namespace statecut::cuda
