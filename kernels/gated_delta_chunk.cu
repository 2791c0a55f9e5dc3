// Chunked (WY/UT, chunk C = 64) prefill of the gated delta rule in two kernels (the form of fla's chunk_gated_delta_rule).
//
// 1. prep_kernel, fully parallel over (chunk, value head, sequence): L2 norms of the chunk's q, k rows, the in-chunk
//    cumulative log gate G, beta, and from the raw q, k (Kr Kr^T and Qr Kr^T as bf16/fp16 m16n8k16 products: the
//    products of 16-bit values are exact, the sums fp32)
//      A = strict_lower(diag(b) K K^T o D),  T = (I + A)^-1,  P = tril_incl(Q K^T o D),  D_ij = e^{G_i - G_j}
//    (K, Q the normalised, scaled rows). T and P go to a workspace in fp32, already rounded to TF32 and stored in
//    the register order of the m16n8k8 A fragment (one coalesced float4 per lane), with per-token scalars.
// 2. state_kernel, sequential over the chunks of one (sequence, value head, value tile of BV columns): only the
//    state products remain. With Kr the raw k rows (K = diag(rk) Kr) and Qr the raw q rows:
//      X  = Kr S,  Y = diag(b) V - diag(b e^G rk) X           (Y = diag(b) (V - diag(e^G) K S))
//      V' = T Y                                               (= U - W S of the WY form)
//      O  = diag(e^G rq scale) Qr S + P V'
//      S <- e^{G_last} S + Kr^T diag(e^{G_last - G} rk) V'
//    Without the delta term (a.delta false: gated linear attention, Mamba-2's SSD) prep makes T = I and b e^G rk = 0,
//    so V' = diag(b) V and the same products follow.
//    mma.sync with fp32 accumulation: the state is kept in fp32 registers and, for the products that read it, in
//    shared memory as two bf16 terms hi + lo; bf16 inputs: Kr S and Qr S, and Kr^T V'' (V'' also as hi + lo terms),
//    as bf16 m16n8k16 on the exact rows; fp16 inputs: TF32 m16n8k8; T Y and P V' in TF32 (this keeps the error
//    within 2x of an fp32 token loop). Next chunk's q/k by cp.async and its T, P, scalars and v prefetched into
//    registers. With two or more blocks per SM the state kernel is a programmatic dependent launch: its prologue
//    (initial state, first q/k rows) runs while prep drains, griddepcontrol.wait guards the workspace reads.
// The workspace (fp32 T and P, lower block triangle only: 20 KiB + 1.25 KiB per (chunk, value head)) is taken
// with cudaMallocAsync on the caller's stream and released with cudaFreeAsync on it; the default pool of the device
// is told to keep freed memory (release threshold = max) so that repeated calls do not map and unmap it again.
// Any key dim: K is zero-padded to Kp = ceil16(K) in shared memory; rows past the end of a sequence are zeros with
// g = 0 and beta = 0, so they change neither the state nor the cumulative gate.
// Kernel 1 is in gated_delta_chunk_prep.cu, the shared primitives in gated_delta_chunk.cuh.
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "kernels/gated_delta_chunk.cuh"
#include "kernels/pdl.cuh"

namespace statecut::cuda {
namespace chunk {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Kernel 2: per (value tile, value head, sequence) the serial chain over chunks.
//
// The state tile lives in registers in fp32 (warp w owns key tiles w, w+4, ... of 16 rows, in the mma accumulator
// layout) and, for the products that read it, in shared memory as two bf16 terms S = hi + lo (|S - hi - lo| <=
// 2^-16 |S|), stored transposed ([BV][Kp + 8], k contiguous). bf16 inputs: X = Kr S and Qr S as bf16 m16n8k16
// products of the exact bf16 rows with hi and lo (ldmatrix fragments); fp16 inputs (not exact in bf16): TF32
// m16n8k8 with B = tf32(hi + lo).
// At small grids the chain is bound by the latency of its ~1,100 instructions per warp and chunk (one warp per
// scheduler; ncu at 1x8192: 3.9 cycles per instruction, 1.6 of them fixed-latency dependencies), so every address
// the loop needs is computed once and stepped per chunk, and no value loaded for the next chunk is copied between
// registers before it is used (such a copy waits for the load: the chunk's decay, once 7% of the stall samples).
// KB: k row buffers (2: the next chunk's k streams in while this chunk runs; 1: it is copied after the state update,
// which at Kp = 256 halves the q/k rows' 101 KiB so that two blocks share an SM and hide each other's waits).
template <int BV, int KB = 2>
__host__ __device__ inline size_t state_smem_bytes(int Kp, int elem_bytes) {
  constexpr int lds = BV + 8;
  return sizeof(float) * 3 * C * lds + sizeof(uint16_t) * 2 * BV * static_cast<size_t>(qk_stride(Kp)) +
         static_cast<size_t>(elem_bytes) * (1 + KB) * C * qk_stride(Kp);
}

struct TokScal {
  float b[2], bek[2], eq[2], kd[2];  // rows g and g + 8 of the warp's strip
};

/// p: the scalars of the thread's row g of one (chunk, value head) slot.
__device__ __forceinline__ void load_scal(TokScal& s, const float* p) {
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    s.b[x] = __ldg(p + 8 * x), s.bek[x] = __ldg(p + C + 8 * x), s.eq[x] = __ldg(p + 2 * C + 8 * x);
    s.kd[x] = __ldg(p + 3 * C + 8 * x);
  }
}

/// x0 + x1 (x0: lower half) split into two bf16 terms, hi = bf16(x), lo = bf16(x - hi) (|x - hi - lo| <= 2^-16 |x|).
__device__ __forceinline__ void split_bf16x2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
  const float2 hf = __bfloat1622float2(h);
  const __nv_bfloat162 l = __floats2bfloat162_rn(x0 - hf.x, x1 - hf.y);
  hi = *reinterpret_cast<const uint32_t*>(&h);
  lo = *reinterpret_cast<const uint32_t*>(&l);
}

/// d += a * b, m16n8k16, bf16 operands, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

/// 16-bit B fragments of n tiles [0, NT) x k [k0, k0 + 16) from a transposed tile (row = n, k contiguous, row
/// stride ld) by ldmatrix x4: b[nt][0..1]. brow: the lane's row offset.
template <int NT>
__device__ __forceinline__ void ldsm_b(uint32_t (*b)[2], const __nv_bfloat16* tile, int ld, int brow) {
#pragma unroll
  for (int np = 0; np < NT / 2; ++np) {
    uint32_t r[4];
    ldmatrix_x4(r, tile + 16 * np * ld + brow);
    b[2 * np][0] = r[0], b[2 * np][1] = r[1], b[2 * np + 1][0] = r[2], b[2 * np + 1][1] = r[3];
  }
}

/// Accumulator-layout fp32 pairs of n tiles [0, NT) (rows g, g + 8 of a 16-row tile) split into bf16 hi + lo
/// terms and stored transposed (row = column index, k contiguous, row stride ld; k offset kcol) by stmatrix.trans.
/// f(nt, e) gives element e of n tile nt.
template <int NT, typename F>
__device__ __forceinline__ void store_terms_t(__nv_bfloat16* hi_t, __nv_bfloat16* lo_t, int ld, int kcol, int lane,
                                              F&& f) {
  const int mj = lane >> 3, r8 = lane & 7;
#pragma unroll
  for (int np = 0; np < NT / 2; ++np) {
    uint32_t hi[4], lo[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      split_bf16x2(f(2 * np + (j >> 1), 2 * (j & 1)), f(2 * np + (j >> 1), 2 * (j & 1) + 1), hi[j], lo[j]);
    const int off = (16 * np + 8 * (mj >> 1) + r8) * ld + kcol + 8 * (mj & 1);
    stmatrix_x4_trans(hi_t + off, hi);
    stmatrix_x4_trans(lo_t + off, lo);
  }
}

/// acc += M[strip w] B for a lower block-triangular C x C matrix M held as A fragments (k tiles 0..2w+1 of the
/// warp's 16-row strip) and B = [C][NT * 8] TF32 values in shared memory (row stride LD).
template <int NT, int LD>
__device__ __forceinline__ void strip_tri_mma(float (*acc)[4], const float4* frag, const float* B, int warp, int g,
                                              int t) {
#pragma unroll
  for (int kt = 0; kt < 8; ++kt) {
    if (kt > 2 * warp + 1) break;
    const uint32_t af[4] = {__float_as_uint(frag[kt].x), __float_as_uint(frag[kt].y), __float_as_uint(frag[kt].z),
                            __float_as_uint(frag[kt].w)};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint32_t b[2];
      b[0] = __float_as_uint(B[(8 * kt + t) * LD + 8 * nt + g]);
      b[1] = __float_as_uint(B[(8 * kt + t + 4) * LD + 8 * nt + g]);
      mma_tf32(acc[nt], af, b);
    }
  }
}

/// The thread's share of the cp.async copies of one chunk's q or k rows (K % 8 == 0): 16-byte group lk of rows
/// r0, r0 + dr, ... (lanes over the row's groups, padded to a power of two). Computed once per block; `src` of
/// chunk ci is src0 + ci * chunk (elements).
template <typename T, int NTHR>
struct RowCopy {
  int r0 = 0, dr = 0, doff = 0, dstep = 0;
  int pass = 0;  // elements between the rows of two passes (< 2^31: dr <= 128 tokens, checked by the launcher)
  bool on = false, kin = false;
  __device__ void init(const GatedDeltaArgs& a, int Kp, int ldb) {
    const int groups = Kp / 8, lg = 32 - __clz(groups - 1), lane = threadIdx.x & 31;
    const int lr = lane >> lg, lk = lane & ((1 << lg) - 1), rp = 32 >> lg;
    on = lk < groups, kin = lk * 8 < a.K;
    r0 = (threadIdx.x >> 5) * rp + lr, dr = (NTHR / 32) * rp;
    doff = r0 * ldb + lk * 8, dstep = dr * ldb;
    pass = dr * static_cast<int>(qk_token_stride(a));
  }
  /// p: the thread's first row (row r0, group lk) of the chunk; zero (size-0 copies) for rows >= Lc, groups >= K.
  __device__ __forceinline__ void copy(T* dst, const T* p, const T* any, int Lc) const {
    if (!on) return;
    T* d = dst + doff;
    for (int r = r0; r < C; r += dr, p += pass, d += dstep) {
      const bool ok = kin && r < Lc;
      cp_async16(d, ok ? p : any, ok);
    }
  }
};

template <typename T, int BV, int MI, int KB>
__global__ void __launch_bounds__(kThreads) state_kernel(const GatedDeltaArgs a, const int Kp, const int maxC,
                                                         const float* __restrict__ wsT,
                                                         const float* __restrict__ wsP,
                                                         const float* __restrict__ wsS) {
  constexpr int NT = BV / 8;
  constexpr int lds = BV + 8;  // fp32 rows read as B fragments (rows k0 + t): conflict-free
  constexpr bool kBf16 = std::is_same<T, __nv_bfloat16>::value;
  static_assert(NT % 2 == 0, "n tiles in pairs (ldmatrix x4)");
  extern __shared__ __align__(16) float sm[];
  const int ldb = qk_stride(Kp);  // also the row stride of the transposed state terms
  float* Ys = sm;               // [C][lds] Y (TF32)
  float* Vp = Ys + C * lds;     // [C][lds] V' (TF32)
  float* Vq = Vp + C * lds;     // [C][lds] V'' = diag(e^{Gl-G} rk) V' (TF32; fp16 inputs)
  constexpr int ldv = C + 8;    // bf16 inputs: V'' as two bf16 terms [BV][ldv] over Vq (stmatrix/ldmatrix rows
  __nv_bfloat16* Vh = reinterpret_cast<__nv_bfloat16*>(Vq);  // 144 B apart: conflict-free)
  __nv_bfloat16* Vl = Vh + BV * ldv;
  static_assert(2 * BV * ldv * 2 <= C * lds * 4, "V'' terms fit in the Vq buffer");
  __nv_bfloat16* Sh = reinterpret_cast<__nv_bfloat16*>(Vq + C * lds);  // [BV][ldb] state, bf16 high term
  __nv_bfloat16* Sl = Sh + BV * ldb;                                   // [BV][ldb] low term
  T* Qb = reinterpret_cast<T*>(Sl + BV * ldb);  // [C][ldb] raw q
  T* Kb0 = Qb + C * ldb;                        // [KB][C][ldb] raw k

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int v0 = blockIdx.x * BV, hv = blockIdx.y, n = blockIdx.z;
  const int h = hv / (a.HV / a.H);
  const int K = a.K, V = a.V, m0 = 16 * warp;
  const size_t head = static_cast<size_t>(n) * a.HV + hv;
  const T* qp = static_cast<const T*>(a.q);
  const T* kp = static_cast<const T*>(a.k);

  // ---- state tile in registers: element e of (mi, nt) is row 16 (w + 4 mi) + g (+8 for e >= 2), column
  //      8 nt + 2t + (e & 1) ----
  float S[MI][NT][4];
  const float* s0 = static_cast<const float*>(a.initial_state);
  float* s1 = static_cast<float*>(a.final_state);
  auto state_index = [&](int kk, int c) -> size_t {
    return a.layout == StateLayout::kKV ? (head * K + kk) * V + v0 + c : (head * V + v0 + c) * K + kk;
  };
  // f(element, key row, tile column) over the thread's state elements
  auto each_state = [&](auto&& f) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          f(S[mi][nt][e], 16 * (warp + 4 * mi) + g + (e >= 2 ? 8 : 0), 8 * nt + 2 * t + (e & 1));
  };
  each_state([&](float& x, int kk, int c) { x = (s0 && kk < K && v0 + c < V) ? s0[state_index(kk, c)] : 0.f; });
  const int mj = lane >> 3, r8 = lane & 7;
  // hi/lo bf16 terms of the state into Sh/Sl (transposed: element (kk, c) at c * ldb + kk), by stmatrix.trans
  auto store_terms = [&]() {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int mt = warp + 4 * mi;
      if (16 * mt >= Kp) break;  // no such key tile
      store_terms_t<NT>(Sh, Sl, ldb, 16 * mt, lane, [&](int nt, int e) { return S[mi][nt][e]; });
    }
  };
  store_terms();

  long bos, eos;
  detail::seq_bounds(a, n, bos, eos);
  const int nC = static_cast<int>(min(static_cast<long>(maxC), (eos - bos + C - 1) / C));

  // Per-chunk operands held in registers: T, P fragments of the warp's row strip (k tiles 0..2w+1), token
  // scalars, the chunk's decay, the v pairs of the thread's output positions. Loaded one chunk ahead through
  // pointers stepped by one chunk (slot of chunk ci: (n maxC + ci) HV + hv).
  float4 Tf[8], Pf[8];
  TokScal sc;
  float decay = 1.f;
  uint32_t vv[NT][2];
  const size_t slot0 = static_cast<size_t>(n) * maxC * a.HV + hv;
  // the thread's T / P fragments of chunk ci at wsT / wsP (as float4) + fo, its scalars at wsS + so (row g of the
  // warp's strip; the chunk's decay at wsS + so + 4C - m0 - g)
  size_t fo = slot0 * (kFrag / 4) + warp * (warp + 1) * 32 + lane, so = slot0 * kScal + m0 + g;
  const int frag_step = a.HV * (kFrag / 4), scal_step = a.HV * kScal;
  const float4* fT = reinterpret_cast<const float4*>(wsT);
  const float4* fP = reinterpret_cast<const float4*>(wsP);
  const int nk = 2 * warp + 2;  // k tiles of the warp's strip
  auto load_tp = [&](float4* dst, const float4* p) {
#pragma unroll
    for (int kt = 0; kt < 8; ++kt)
      if (kt < nk) dst[kt] = __ldg(p + kt * 32);
  };
  // v and o of the thread's positions: row m0 + g (+8), columns v0 + 8 nt + 2t; pointers stepped by one chunk
  // (v may be a slice of a packed projection output: its own token stride; o is packed) all < 2^31 (launcher)
  const int tok_stride = a.HV * V, chunk_stride = C * tok_stride;
  const int v_tok = a.v_stride ? static_cast<int>(a.v_stride) : tok_stride, v_chunk = C * v_tok;
  const size_t o_base = (static_cast<size_t>(bos + m0 + g) * a.HV + hv) * V + v0 + 2 * t;
  const T* pv = static_cast<const T*>(a.v) + static_cast<size_t>(bos + m0 + g) * v_tok +
                static_cast<size_t>(hv) * V + v0 + 2 * t;
  T* po = static_cast<T*>(a.o) + o_base;
  const int vcols = V - v0 - 2 * t;  // n tile nt of the thread is in range when 8 nt < vcols
  auto load_v = [&](const T* p, int Lcn) {  // Lcn: rows of that chunk
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        vv[nt][x] = 0u;
        if (m0 + g + 8 * x < Lcn && 8 * nt < vcols)
          vv[nt][x] = __ldg(reinterpret_cast<const unsigned*>(p + 8 * x * v_tok + 8 * nt));
      }
  };
  // q/k rows: one cp.async plan, source pointers stepped by one chunk (generic loads when K % 8 != 0)
  RowCopy<T, kThreads> rows;
  rows.init(a, Kp, ldb);
  const int row_chunk = C * static_cast<int>(qk_token_stride(a));
  // the thread's first q/k row of chunk ci at qp / kp + ro
  size_t ro = static_cast<size_t>(bos + rows.r0) * qk_token_stride(a) + static_cast<size_t>(h) * K +
              (rows.doff - rows.r0 * ldb);
  const bool vec_rows = K % 8 == 0;
  auto copy_rows = [&](T* dst, const T* src, const T* p, long c0, int Lcn) {
    if (vec_rows) rows.copy(dst, p, src, Lcn);
    else load_rows<T, kThreads>(dst, src, a, h, c0, Lcn, Kp, ldb);
  };
  if (nC > 0) {
    const int Lc0 = static_cast<int>(min(static_cast<long>(C), eos - bos));
    copy_rows(Kb0, kp, kp + ro, bos, Lc0);
    copy_rows(Qb, qp, qp + ro, bos, Lc0);
    cp_async_commit();
    // Launched as a programmatic dependent of prep_kernel: everything above overlaps prep's tail; the workspace
    // is read only after prep has completed and its writes are visible (a no-op without the dependency).
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    load_tp(Tf, fT + fo);
    load_tp(Pf, fP + fo);
    load_scal(sc, wsS + so);
    decay = __ldg(wsS + so + 4 * C - m0 - g);
    load_v(pv, Lc0);
  }

  for (int ci = 0; ci < nC; ++ci) {
    const long c0 = bos + static_cast<long>(ci) * C;
    const int Lc = static_cast<int>(min(static_cast<long>(C), eos - c0));
    const bool more = ci + 1 < nC;
    const long c1 = c0 + C;
    const int Lc1 = more ? static_cast<int>(min(static_cast<long>(C), eos - c1)) : 0;
    T* Kb = Kb0 + (KB == 2 ? (ci & 1) * C * ldb : 0);
    cp_async_wait_all();
    __syncthreads();  // q, k of this chunk landed; state terms written; Y, V' buffers free
    if (KB == 2 && more) {
      copy_rows(Kb0 + ((ci + 1) & 1) * C * ldb, kp, kp + ro + row_chunk, c1, Lc1);
      cp_async_commit();
    }
    // ---- phase 1: X = Kr S and Qr S on the warp's rows ----
    float X[NT][4], O[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) X[nt][e] = 0.f, O[nt][e] = 0.f;
    if constexpr (kBf16) {
      const int arow = (m0 + (lane & 15)) * ldb + (lane >> 4) * 8;
      const int brow = (((lane >> 4) << 3) + (lane & 7)) * ldb + ((lane >> 3) & 1) * 8;
#pragma unroll 2
      for (int k0 = 0; k0 < Kp; k0 += 16) {
        uint32_t ak[4], aq[4], bh[NT][2], bl[NT][2];
        ldmatrix_x4(ak, Kb + arow + k0);
        ldmatrix_x4(aq, Qb + arow + k0);
        ldsm_b<NT>(bh, Sh + k0, ldb, brow);
        ldsm_b<NT>(bl, Sl + k0, ldb, brow);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          mma_bf16(X[nt], ak, bl[nt][0], bl[nt][1]);
          mma_bf16(O[nt], aq, bl[nt][0], bl[nt][1]);
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          mma_bf16(X[nt], ak, bh[nt][0], bh[nt][1]);
          mma_bf16(O[nt], aq, bh[nt][0], bh[nt][1]);
        }
      }
    } else {
#pragma unroll 2
      for (int k0 = 0; k0 < Kp; k0 += 8) {
        uint32_t ak[4], aq[4];
        a_frag_perm<T>(ak, Kb, ldb, m0, k0, g, t);
        a_frag_perm<T>(aq, Qb, ldb, m0, k0, g, t);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const uint32_t wh = *reinterpret_cast<const uint32_t*>(Sh + (8 * nt + g) * ldb + k0 + 2 * t);
          const uint32_t wl = *reinterpret_cast<const uint32_t*>(Sl + (8 * nt + g) * ldb + k0 + 2 * t);
          uint32_t b[2];
          b[0] = f2tf32(bf16_lo(wh) + bf16_lo(wl));
          b[1] = f2tf32(bf16_hi(wh) + bf16_hi(wl));
          mma_tf32(X[nt], ak, b);
          mma_tf32(O[nt], aq, b);
        }
      }
    }
    // Y = b v - b e^G rk X (TF32) into Ys; O = e^G rq scale (Qr S) stays in registers
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const T* ve = reinterpret_cast<const T*>(&vv[nt][x]);
        const float y0 = sc.b[x] * to_f<T>(ve[0]) - sc.bek[x] * X[nt][2 * x];
        const float y1 = sc.b[x] * to_f<T>(ve[1]) - sc.bek[x] * X[nt][2 * x + 1];
        *reinterpret_cast<float2*>(Ys + (m0 + g + 8 * x) * lds + 8 * nt + 2 * t) =
            make_float2(__uint_as_float(f2tf32(y0)), __uint_as_float(f2tf32(y1)));
        O[nt][2 * x] *= sc.eq[x], O[nt][2 * x + 1] *= sc.eq[x];
      }
    __syncthreads();  // Y complete; q of this chunk consumed
    if (more) {
      ro += row_chunk;
      copy_rows(Qb, qp, qp + ro, c1, Lc1);
      cp_async_commit();
      load_v(pv + static_cast<size_t>(ci + 1) * v_chunk, Lc1);
    }
    // ---- phase 2: V' = T Y (T lower triangular: k tiles 0..2w+1) ----
    float Vr[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) Vr[nt][e] = 0.f;
    strip_tri_mma<NT, lds>(Vr, Tf, Ys, warp, g, t);
    if (more) {
      fo += frag_step;
      load_tp(Tf, fT + fo);
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const int off = (m0 + g + 8 * x) * lds + 8 * nt + 2 * t;
        const float w0 = Vr[nt][2 * x], w1 = Vr[nt][2 * x + 1];
        *reinterpret_cast<float2*>(Vp + off) =
            make_float2(__uint_as_float(f2tf32(w0)), __uint_as_float(f2tf32(w1)));
        if constexpr (!kBf16)
          *reinterpret_cast<float2*>(Vq + off) =
              make_float2(__uint_as_float(f2tf32(sc.kd[x] * w0)), __uint_as_float(f2tf32(sc.kd[x] * w1)));
      }
    if constexpr (kBf16)  // V'' as bf16 hi + lo terms, transposed ([BV][ldv], tokens contiguous)
      store_terms_t<NT>(Vh, Vl, ldv, m0, lane, [&](int nt, int e) { return sc.kd[e >> 1] * Vr[nt][e]; });
    if (more) {
      so += scal_step;
      load_scal(sc, wsS + so);
    }
    __syncthreads();  // V' complete; the state terms are no longer read in this chunk
    // ---- phase 3: O += P V', written out ----
    strip_tri_mma<NT, lds>(O, Pf, Vp, warp, g, t);
    if (more) load_tp(Pf, fP + fo);
    {
      T* pc = po + static_cast<size_t>(ci) * chunk_stride;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          if (m0 + g + 8 * x < Lc && 8 * nt < vcols) {
            T out[2] = {detail::from_f<T>(O[nt][2 * x]), detail::from_f<T>(O[nt][2 * x + 1])};
            *reinterpret_cast<unsigned*>(pc + 8 * x * tok_stride + 8 * nt) = *reinterpret_cast<const unsigned*>(out);
          }
        }
    }
    // ---- S <- e^{Gl} S + Kr^T V'' on the warp's key tiles, then its bf16 terms ----
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int mt = warp + 4 * mi;
      if (16 * mt >= Kp) break;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) S[mi][nt][e] *= decay;
      if constexpr (kBf16) {  // bf16 m16n8k16: A = Kr^T by ldmatrix.trans (exact), B = V'' hi and lo terms
        const int brow = (8 * (mj >> 1) + r8) * ldv + 8 * (mj & 1);
#pragma unroll
        for (int k0 = 0; k0 < C; k0 += 16) {
          uint32_t af[4], bh[NT][2], bl[NT][2];
          ldmatrix_x4_trans(af, Kb + (k0 + 8 * (mj >> 1) + r8) * ldb + 16 * mt + 8 * (mj & 1));
          ldsm_b<NT>(bh, Vh + k0, ldv, brow);
          ldsm_b<NT>(bl, Vl + k0, ldv, brow);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma_bf16(S[mi][nt], af, bl[nt][0], bl[nt][1]);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma_bf16(S[mi][nt], af, bh[nt][0], bh[nt][1]);
        }
      } else {  // fp16 rows: TF32 m16n8k8 on V'' (TF32)
#pragma unroll
        for (int k0 = 0; k0 < C; k0 += 8) {
          uint32_t af[4];
          af[0] = elem_tf32<T>(Kb[(k0 + t) * ldb + 16 * mt + g]);
          af[1] = elem_tf32<T>(Kb[(k0 + t) * ldb + 16 * mt + g + 8]);
          af[2] = elem_tf32<T>(Kb[(k0 + t + 4) * ldb + 16 * mt + g]);
          af[3] = elem_tf32<T>(Kb[(k0 + t + 4) * ldb + 16 * mt + g + 8]);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            uint32_t b[2];
            b[0] = __float_as_uint(Vq[(k0 + t) * lds + 8 * nt + g]);
            b[1] = __float_as_uint(Vq[(k0 + t + 4) * lds + 8 * nt + g]);
            mma_tf32(S[mi][nt], af, b);
          }
        }
      }
    }
    // the next chunk's decay, now that this one's is used (loaded straight into its register: no copy to wait on)
    if (more) decay = __ldg(wsS + so + 4 * C - m0 - g);
    if (KB == 1 && more) {  // every warp is done with this chunk's k: the next chunk's rows into the one buffer
      __syncthreads();
      copy_rows(Kb0, kp, kp + ro, c1, Lc1);  // ro already stepped to chunk ci + 1 with q's copy
      cp_async_commit();
    }
    store_terms();
  }
  if (s1 == nullptr) return;
  each_state([&](float& x, int kk, int c) {
    if (kk < K && v0 + c < V) s1[state_index(kk, c)] = x;
  });
}

template <typename T, int BV, int MI, int KB = 2>
cudaError_t launch_state(const GatedDeltaArgs& a, int Kp, int maxC, const float* ws, size_t slots, cudaStream_t s,
                         int sms) {
  const size_t bytes = state_smem_bytes<BV, KB>(Kp, sizeof(T));
  auto kern = state_kernel<T, BV, MI, KB>;
  cudaError_t e = set_smem(kern, bytes);
  if (e != cudaSuccess) return e;
  // Programmatic dependent launch: state blocks may start (initial state, first q/k rows) while prep drains. Only
  // for grids of at least two blocks per SM: blocks placed early could pile up two to an SM while others stay empty.
  // (Not switched by STATECUT_PDL, which is the decode step's.)
  const dim3 grid((a.V + BV - 1) / BV, a.HV, a.N);
  const bool dependent = static_cast<long>(grid.x) * grid.y * grid.z >= 2L * sms;
  const float* wsT = ws;
  const float* wsP = ws + slots * kFrag;
  const float* wsS = ws + 2 * slots * kFrag;
  return pdl::launch_as(dependent, kern, grid, dim3(kThreads), bytes, s, a, Kp, maxC, wsT, wsP, wsS);
}

/// Blocks of `bytes` dynamic shared memory that fit on one SM of the current device (1 KiB reserved per block).
int blocks_per_sm(size_t bytes) {
  int dev = 0, per_sm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess)
    return 1;
  return static_cast<int>(static_cast<size_t>(per_sm) / (bytes + 1024));
}

/// STATECUT_CHUNK_K_BUFFERS = 1 or 2 (read once): the state kernel's k buffers at Kp > 128, for measurements.
int forced_k_buffers() {
  static const int forced = [] {
    const char* e = std::getenv("STATECUT_CHUNK_K_BUFFERS");
    return e && (e[0] == '1' || e[0] == '2') && e[1] == 0 ? e[0] - '0' : 0;
  }();
  return forced;
}

template <typename T, int BV>
cudaError_t dispatch_mi(const GatedDeltaArgs& a, int Kp, int maxC, const float* ws, size_t slots, cudaStream_t s,
                        int sms) {
  const int ktiles = Kp / 16;  // key tiles of 16 rows, spread over the 4 warps
  if (ktiles <= 4) return launch_state<T, BV, 1>(a, Kp, maxC, ws, slots, s, sms);
  if constexpr (BV == 32) {  // taken only for Kp <= 128 (dispatch)
    return launch_state<T, BV, 2>(a, Kp, maxC, ws, slots, s, sms);
  } else {
    if (ktiles <= 8) return launch_state<T, BV, 2>(a, Kp, maxC, ws, slots, s, sms);
    // Kp > 128: double-buffered k rows leave room for one block per SM; one buffer for two, when the grid has
    // enough blocks to fill both (STATECUT_CHUNK_K_BUFFERS=1|2 overrides, for measuring the choice)
    const long blocks = static_cast<long>(a.N) * a.HV * ((a.V + BV - 1) / BV);
    const int per_sm2 = blocks_per_sm(state_smem_bytes<BV, 2>(Kp, sizeof(T)));
    const int per_sm1 = blocks_per_sm(state_smem_bytes<BV, 1>(Kp, sizeof(T)));
    int kb = per_sm2 < 2 && per_sm1 >= 2 && blocks >= 2L * sms ? 1 : 2;
    if (const int forced = forced_k_buffers(); forced) kb = forced;
    if (kb == 1) return launch_state<T, BV, 4, 1>(a, Kp, maxC, ws, slots, s, sms);
    return launch_state<T, BV, 4>(a, Kp, maxC, ws, slots, s, sms);
  }
}

/// Keep memory freed by cudaFreeAsync in the device's default pool (once per device).
void keep_pool_memory() {
  static bool done[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64 || done[dev]) return;
  cudaMemPool_t pool;
  if (cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess) {
    uint64_t thr = UINT64_MAX;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr);
  }
  done[dev] = true;
}

template <typename T>
cudaError_t dispatch(const GatedDeltaArgs& a, cudaStream_t s) {
  const int Kp = (a.K + 15) / 16 * 16;
  const int maxT = a.cu_seqlens ? a.max_seq_len : a.seq_len;
  const int maxC = (maxT + C - 1) / C;
  const size_t slots = static_cast<size_t>(a.N) * maxC * a.HV;
  const int sms = current_sm_count(132);

  float* ws = nullptr;
  if (slots > 0) {
    keep_pool_memory();
    cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&ws), slots * (2 * kFrag + kScal) * sizeof(float), s);
    if (e != cudaSuccess) return e;
    e = launch_prep<T>(a, Kp, maxC, ws, slots, s);
    if (e != cudaSuccess) return e;
  }
  // The serial chain is latency bound: value tiles of 32 columns unless that leaves fewer than two blocks per SM.
  // Key dims above 128 take 16 columns (the register state of a thread stays at 32 floats).
  const long blocks32 = static_cast<long>(a.N) * a.HV * ((a.V + 31) / 32);
  const cudaError_t e = blocks32 >= 2L * sms && Kp <= 128 ? dispatch_mi<T, 32>(a, Kp, maxC, ws, slots, s, sms)
                                                          : dispatch_mi<T, 16>(a, Kp, maxC, ws, slots, s, sms);
  if (ws != nullptr) {
    const cudaError_t f = cudaFreeAsync(ws, s);
    if (e == cudaSuccess && f != cudaSuccess) return f;
  }
  return e;
}

}  // namespace
}  // namespace chunk

cudaError_t gated_delta_chunk(const GatedDeltaArgs& a, cudaStream_t stream) {
  if (check_args(a) != nullptr || a.state_bf16) return cudaErrorInvalidValue;  // fp32 states only
  if (a.g_typed || a.beta_typed || a.beta_round || a.beta_dt)
    return cudaErrorInvalidValue;  // fp32 gates only (the recurrent kernel takes the others)
  // q and k in place share one token stride, a multiple of 8 elements (16-byte row copies) that holds the H K
  // elements of a token; v's is even (32-bit loads) and holds HV V
  const int64_t qks = chunk::qk_token_stride(a), vs = a.v_stride ? a.v_stride : static_cast<int64_t>(a.HV) * a.V;
  if (a.k_stride != a.q_stride || qks < static_cast<int64_t>(a.H) * a.K || vs < static_cast<int64_t>(a.HV) * a.V ||
      (a.q_stride && (a.q_stride % 8 || reinterpret_cast<uintptr_t>(a.q) % 16 || reinterpret_cast<uintptr_t>(a.k) % 16)) ||
      (a.v_stride && (a.v_stride % 2 || reinterpret_cast<uintptr_t>(a.v) % 4)))
    return cudaErrorInvalidValue;
  // the state kernel steps its pointers by one chunk in 32-bit offsets: 64 HV V, 64 token strides and HV kFrag
  // below 2^31
  if (static_cast<long>(chunk::C) * a.HV * a.V > INT32_MAX || static_cast<long>(chunk::C) * qks > INT32_MAX ||
      static_cast<long>(chunk::C) * vs > INT32_MAX || static_cast<long>(a.HV) * chunk::kFrag > INT32_MAX)
    return cudaErrorInvalidValue;
  return a.in_type == ElemType::kBF16 ? chunk::dispatch<__nv_bfloat16>(a, stream) : chunk::dispatch<__half>(a, stream);
}

}  // namespace statecut::cuda
