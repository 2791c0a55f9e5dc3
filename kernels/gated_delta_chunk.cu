// Chunked (WY/UT, chunk C = 64) prefill of the gated delta rule in two kernels (notes/anchor-fla.md §2.1).
//
// 1. prep_kernel, fully parallel over (chunk, value head, sequence): L2 norms of the chunk's q, k rows, the in-chunk
//    cumulative log gate G, beta, and from the raw q, k (bf16/fp16 values are exact TF32 operands)
//      A = strict_lower(diag(b) K K^T o D),  T = (I + A)^-1,  P = tril_incl(Q K^T o D),  D_ij = e^{G_i - G_j}
//    (K, Q the normalised, scaled rows). T and P go to a workspace in fp32, already rounded to TF32 and stored in
//    the register order of the m16n8k8 A fragment (one coalesced float4 per lane), with per-token scalars.
// 2. state_kernel, sequential over the chunks of one (sequence, value head, value tile of BV columns): only the
//    state products remain. With Kr the raw k rows (K = diag(rk) Kr) and Qr the raw q rows:
//      X  = Kr S,  Y = diag(b) V - diag(b e^G rk) X           (Y = diag(b) (V - diag(e^G) K S))
//      V' = T Y                                               (= U - W S of the WY form)
//      O  = diag(e^G rq scale) Qr S + P V'
//      S <- e^{G_last} S + Kr^T diag(e^{G_last - G} rk) V'
//    TF32 mma.sync with fp32 accumulation (TF32 keeps the error within 2x of an fp32 token loop), the state in
//    shared memory in fp32, next chunk's q/k by cp.async and its T, P, scalars and v prefetched into registers.
// The workspace (fp32 T and P, lower block triangle only: 20 KiB + 1.25 KiB per (chunk, value head)) is taken
// with cudaMallocAsync on the caller's stream and released with cudaFreeAsync on it; the default pool of the device
// is told to keep freed memory (release threshold = max) so that repeated calls do not map and unmap it again.
// Any key dim: K is zero-padded to Kp = ceil16(K) in shared memory; rows past the end of a sequence are zeros with
// g = 0 and beta = 0, so they change neither the state nor the cumulative gate.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/gated_delta.h"
#include "kernels/gated_delta_common.cuh"

namespace statecut::cuda {
namespace {

using detail::to_f;

constexpr int C = 64;
constexpr int kThreads = 128;   // state_kernel: 4 warps, warp w owns chunk rows [16w, 16w + 16)
constexpr int kThreadsA = 256;  // prep_kernel: warps 0-3 K K^T, warps 4-7 Q K^T, row strip = warp % 4
constexpr int ldc = C + 4;     // fp32 C x C matrices in prep_kernel (A fragment reads conflict-free)
constexpr int kXw = 16 * 8;    // per-warp solve scratch: one 16 x 8 block
constexpr int kTiles = 20;     // 16 x 8 tiles of a lower block-triangular C x C matrix: 2 + 4 + 6 + 8 per row strip
constexpr int kFrag = kTiles * 128;  // floats of one such matrix in fragment order (tile (mt, kt), kt <= 2mt + 1,
                                     // at mt (mt + 1) + kt; 32 lanes x 4 floats per tile)
constexpr int kScal = 5 * C;   // per (chunk, head) scalars: b, b e^G rk, e^G rq scale, e^{Gl-G} rk, e^{Gl}

__device__ __forceinline__ uint32_t f2tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

/// Exact TF32 bits of a bf16 / fp16 element (both embed in TF32: 8/11-bit significands, wider exponent).
template <typename T>
__device__ __forceinline__ uint32_t elem_tf32(T x);
template <>
__device__ __forceinline__ uint32_t elem_tf32<__nv_bfloat16>(__nv_bfloat16 x) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(x)) << 16;
}
template <>
__device__ __forceinline__ uint32_t elem_tf32<__half>(__half x) { return __float_as_uint(__half2float(x)); }

/// TF32 bits of the two 16-bit elements of one 32-bit word (lo: lower address).
template <typename T>
__device__ __forceinline__ void pair_tf32(uint32_t w, uint32_t& lo, uint32_t& hi);
template <>
__device__ __forceinline__ void pair_tf32<__nv_bfloat16>(uint32_t w, uint32_t& lo, uint32_t& hi) {
  lo = w << 16, hi = w & 0xffff0000u;
}
template <>
__device__ __forceinline__ void pair_tf32<__half>(uint32_t w, uint32_t& lo, uint32_t& hi) {
  const __half2 x = *reinterpret_cast<const __half2*>(&w);
  lo = __float_as_uint(__low2float(x)), hi = __float_as_uint(__high2float(x));
}

/// A fragment of rows [m0, m0+16) x k columns [k0, k0+8) of a 16-bit row-major tile, k permuted so that one 32-bit
/// load serves two k: the fragment's k = t and t + 4 hold columns k0 + 2t and k0 + 2t + 1. The B fragment must use
/// the same permutation (rows k0 + 2t, k0 + 2t + 1).
template <typename T>
__device__ __forceinline__ void a_frag_perm(uint32_t* a, const T* tile, int ld, int m0, int k0, int g, int t) {
  const uint32_t w0 = *reinterpret_cast<const uint32_t*>(tile + (m0 + g) * ld + k0 + 2 * t);
  const uint32_t w1 = *reinterpret_cast<const uint32_t*>(tile + (m0 + g + 8) * ld + k0 + 2 * t);
  pair_tf32<T>(w0, a[0], a[2]);
  pair_tf32<T>(w1, a[1], a[3]);
}

/// d += a * b, m16n8k8, TF32 operands, fp32 accumulators. Fragments (g = lane / 4, t = lane % 4):
/// a = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4];  b = B[t][g], B[t+4][g];  d = D[g][2t], D[g][2t+1], D[g+8][2t],
/// D[g+8][2t+1].
__device__ __forceinline__ void mma_tf32(float* d, const uint32_t* a, const uint32_t* b) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool full) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = full ? 16 : 0;  // 0: zero fill
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

/// Row stride (elements) of the bf16/fp16 q/k tiles: Kp + 8, so that 8 rows x 4 columns of 16-bit elements and
/// their transposed reads fall in distinct banks.
__host__ __device__ inline int qk_stride(int Kp) { return Kp + 8; }

/// Rows [c0, c0 + C) of q or k (head h) into dst [C][ldb], zero-padded past K and past the sequence end. Asynchronous
/// (cp.async, the caller commits and waits) when rows are 16-byte aligned (K % 8 == 0), else plain stores.
template <typename T, int NTHR>
__device__ __forceinline__ void load_rows(T* dst, const T* src, const GatedDeltaArgs& a, int h, long c0, int Lc,
                                          int Kp, int ldb) {
  const int K = a.K;
  if (K % 8 == 0) {
    // lanes over the row's 16-byte groups (padded to a power of two), 32 / that many rows per warp pass
    const int groups = Kp / 8, lg = 32 - __clz(groups - 1), lane = threadIdx.x & 31;
    const int lr = lane >> lg, lk = lane & ((1 << lg) - 1), rp = 32 >> lg;
    const size_t stride = static_cast<size_t>(a.H) * K;
    const T* base = src + (static_cast<size_t>(c0) * a.H + h) * K + lk * 8;
    if (lk < groups) {
      for (int r = (threadIdx.x >> 5) * rp + lr; r < C; r += (NTHR / 32) * rp) {
        const bool ok = r < Lc && lk * 8 < K;
        cp_async16(dst + r * ldb + lk * 8, ok ? base + r * stride : src, ok);
      }
    }
  } else {
    const T zero = detail::from_f<T>(0.f);
    for (int i = threadIdx.x; i < C * Kp; i += NTHR) {
      const int r = i / Kp, kk = i % Kp;
      dst[r * ldb + kk] = (r < Lc && kk < K) ? src[(static_cast<size_t>(c0 + r) * a.H + h) * K + kk] : zero;
    }
  }
}

/// prep_kernel's shared memory: token vectors, solve scratch, then the q/k tiles, later reused for A/T and P.
__host__ __device__ inline size_t prep_smem_bytes(int Kp) {
  const size_t qk = 2 * 2 * C * static_cast<size_t>(qk_stride(Kp)), tp = sizeof(float) * 2 * C * ldc;
  return sizeof(float) * (4 * C + (kThreadsA / 32) * kXw) + (qk > tp ? qk : tp);
}

/// hi + lo split of fp32 values into two TF32 values (3xTF32 products: hi*hi + hi*lo + lo*hi, fp32-accurate).
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = f2tf32(x);
  lo = f2tf32(x - __uint_as_float(hi));
}

/// d += A B (16 x 8, k = 8) with fp32 operands from shared memory in 3xTF32: A row-major at a (lda), B row-major
/// at b (ldb).
__device__ __forceinline__ void mma_3xtf32(float* d, const float* a, int lda, const float* b, int ldbb, int g,
                                           int t) {
  uint32_t ah[4], al[4], bh[2], bl[2];
  split_tf32(a[g * lda + t], ah[0], al[0]);
  split_tf32(a[(g + 8) * lda + t], ah[1], al[1]);
  split_tf32(a[g * lda + t + 4], ah[2], al[2]);
  split_tf32(a[(g + 8) * lda + t + 4], ah[3], al[3]);
  split_tf32(b[t * ldbb + g], bh[0], bl[0]);
  split_tf32(b[(t + 4) * ldbb + g], bh[1], bl[1]);
  mma_tf32(d, al, bh);
  mma_tf32(d, ah, bl);
  mma_tf32(d, ah, bh);
}

// ---------------------------------------------------------------------------------------------------------------
// Kernel 1: per (chunk, value head, sequence) T, P and the token scalars.
template <typename T>
__global__ void __launch_bounds__(kThreadsA) prep_kernel(const GatedDeltaArgs a, const int Kp, const int maxC,
                                                         float* __restrict__ wsT, float* __restrict__ wsP,
                                                         float* __restrict__ wsS) {
  extern __shared__ __align__(16) float sm[];
  float* Gs = sm;               // [C] cumulative log gate
  float* Bs = Gs + C;           // [C] beta
  float* Rk = Bs + C;           // [C] 1 / |k|
  float* Rq = Rk + C;           // [C] scale / |q|
  float* Xw = Rq + C;           // [8 warps][16 x 8] solve scratch
  float* Ts = Xw + (kThreadsA / 32) * kXw;  // [C][ldc] A, then T   (over the q/k tiles once those are consumed)
  float* Ps = Ts + C * ldc;                 // [C][ldc] P
  const int ldb = qk_stride(Kp);
  T* Kb = reinterpret_cast<T*>(Ts);  // [C][ldb]
  T* Qb = Kb + C * ldb;              // [C][ldb]

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int ci = blockIdx.x, hv = blockIdx.y, n = blockIdx.z;
  const int h = hv / (a.HV / a.H);
  long bos, eos;
  detail::seq_bounds(a, n, bos, eos);
  const long c0 = bos + static_cast<long>(ci) * C;
  if (c0 >= eos) return;
  const int Lc = static_cast<int>(min(static_cast<long>(C), eos - c0));
  const size_t slot = (static_cast<size_t>(n) * maxC + ci) * a.HV + hv;

  load_rows<T, kThreadsA>(Kb, static_cast<const T*>(a.k), a, h, c0, Lc, Kp, ldb);
  load_rows<T, kThreadsA>(Qb, static_cast<const T*>(a.q), a, h, c0, Lc, Kp, ldb);
  cp_async_commit();
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
  cp_async_wait_all();
  __syncthreads();
  // ---- warps 0-3: Kr Kr^T, warps 4-7: Qr Kr^T, row strip [16s, 16s+16), column tiles 0..2s+1 (lower block
  //      triangle); the row sums of squares (L2 norms) from the same A fragments ----
  const int s = warp & 3, m0 = 16 * s;
  const bool is_q = warp >= 4;
  const T* Am = is_q ? Qb : Kb;
  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  float ss0 = 0.f, ss1 = 0.f;
  for (int k0 = 0; k0 < Kp; k0 += 8) {
    uint32_t af[4];
    a_frag_perm<T>(af, Am, ldb, m0, k0, g, t);
    const float x0 = __uint_as_float(af[0]), x1 = __uint_as_float(af[1]), x2 = __uint_as_float(af[2]),
                x3 = __uint_as_float(af[3]);
    ss0 += x0 * x0 + x2 * x2, ss1 += x1 * x1 + x3 * x3;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (j > 2 * s + 1) break;
      uint32_t b[2];
      const uint32_t w = *reinterpret_cast<const uint32_t*>(Kb + (8 * j + g) * ldb + k0 + 2 * t);
      pair_tf32<T>(w, b[0], b[1]);
      mma_tf32(acc[j], af, b);
    }
  }
  ss0 += __shfl_xor_sync(0xffffffffu, ss0, 1), ss1 += __shfl_xor_sync(0xffffffffu, ss1, 1);
  ss0 += __shfl_xor_sync(0xffffffffu, ss0, 2), ss1 += __shfl_xor_sync(0xffffffffu, ss1, 2);
  if (t == 0) {
    float* R = is_q ? Rq : Rk;
    const float mul = is_q ? a.scale : 1.f;
    R[m0 + g] = mul * (a.l2norm_qk ? rsqrtf(ss0 + detail::kL2Eps) : 1.f);
    R[m0 + g + 8] = mul * (a.l2norm_qk ? rsqrtf(ss1 + detail::kL2Eps) : 1.f);
  }
  __syncthreads();  // Rk, Rq visible; q/k tiles consumed (Ts, Ps overlay them)
  // ---- masks, decays, norms: A (strictly lower) into Ts, P (lower incl. diagonal) into Ps ----
  {
    float* dst = is_q ? Ps : Ts;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + g + (e >= 2 ? 8 : 0), c = 8 * j + 2 * t + (e & 1);
        float v = 0.f;
        if (is_q ? c <= r : c < r) {
          const float d = __expf(Gs[r] - Gs[c]) * Rk[c];
          v = (is_q ? Rq[r] : Bs[r] * Rk[r]) * d * acc[j][e];
        }
        dst[r * ldc + c] = v;
      }
  }
  __syncthreads();
  // ---- T = (I + A)^-1: diagonal 16 x 16 blocks by column lanes, then block rows ----
  if (warp < 4 && lane < 16) {
    const int d = warp * 16, cc = lane;
    float x[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      float sum = 0.f;
#pragma unroll
      for (int m = 0; m < r; ++m) sum += Ts[(d + r) * ldc + d + m] * x[m];
      x[r] = r < cc ? 0.f : (r == cc ? 1.f : -sum);
    }
    __syncwarp(0x0000ffffu);
#pragma unroll
    for (int r = 0; r < 16; ++r) Ts[(d + r) * ldc + d + cc] = x[r];
  }
  __syncthreads();
  // Block rows: T[bi][0:bi] = -T[bi][bi] (A[bi][0:bi] T[0:bi][0:bi]), one warp per 8-column tile, 3xTF32 mma
  // (fp32-accurate); results are stored after a barrier since other warps still read A[bi][.].
  for (int bi = 1; bi < 4; ++bi) {
    const int nt = warp;  // column tile [8 nt, 8 nt + 8) of row block bi
    float y[4] = {0.f, 0.f, 0.f, 0.f};
    if (nt < 2 * bi) {
      float x[4] = {0.f, 0.f, 0.f, 0.f};
      for (int k0 = 8 * nt; k0 < 16 * bi; k0 += 8)  // T lower triangular: rows k >= 8 nt only
        mma_3xtf32(x, Ts + 16 * bi * ldc + k0, ldc, Ts + k0 * ldc + 8 * nt, ldc, g, t);
      float* xw = Xw + warp * kXw;  // [16][8]
      *reinterpret_cast<float2*>(xw + g * 8 + 2 * t) = make_float2(x[0], x[1]);
      *reinterpret_cast<float2*>(xw + (g + 8) * 8 + 2 * t) = make_float2(x[2], x[3]);
      __syncwarp();
      for (int k0 = 0; k0 < 16; k0 += 8)
        mma_3xtf32(y, Ts + 16 * bi * ldc + 16 * bi + k0, ldc, xw + k0 * 8, 8, g, t);
    }
    __syncthreads();
    if (nt < 2 * bi) {
      float* dst = Ts + (16 * bi + g) * ldc + 8 * nt + 2 * t;
      *reinterpret_cast<float2*>(dst) = make_float2(-y[0], -y[1]);
      *reinterpret_cast<float2*>(dst + 8 * ldc) = make_float2(-y[2], -y[3]);
    }
    __syncthreads();
  }
  // ---- T and P in A-fragment order (m tile, k tile, lane), TF32-rounded; token scalars ----
  float4* oT = reinterpret_cast<float4*>(wsT + slot * kFrag);
  float4* oP = reinterpret_cast<float4*>(wsP + slot * kFrag);
  for (int i = tid; i < kFrag / 4; i += kThreadsA) {
    const int ln = i & 31, tile = i >> 5, mt = tile < 2 ? 0 : tile < 6 ? 1 : tile < 12 ? 2 : 3;
    const int kt = tile - mt * (mt + 1);
    const int r = 16 * mt + (ln >> 2), c = 8 * kt + (ln & 3);
    oT[i] = make_float4(__uint_as_float(f2tf32(Ts[r * ldc + c])), __uint_as_float(f2tf32(Ts[(r + 8) * ldc + c])),
                        __uint_as_float(f2tf32(Ts[r * ldc + c + 4])),
                        __uint_as_float(f2tf32(Ts[(r + 8) * ldc + c + 4])));
    oP[i] = make_float4(__uint_as_float(f2tf32(Ps[r * ldc + c])), __uint_as_float(f2tf32(Ps[(r + 8) * ldc + c])),
                        __uint_as_float(f2tf32(Ps[r * ldc + c + 4])),
                        __uint_as_float(f2tf32(Ps[(r + 8) * ldc + c + 4])));
  }
  if (tid < C) {
    float* os = wsS + slot * kScal;
    const float gl = Gs[C - 1], e = __expf(Gs[tid]);
    os[tid] = Bs[tid];
    os[C + tid] = Bs[tid] * e * Rk[tid];
    os[2 * C + tid] = e * Rq[tid];
    os[3 * C + tid] = __expf(gl - Gs[tid]) * Rk[tid];
    if (tid == 0) os[4 * C] = __expf(gl);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Kernel 2: per (value tile, value head, sequence) the serial chain over chunks.
//
// The state tile lives in registers in fp32 (warp w owns key tiles w, w+4, ... of 16 rows, in the mma accumulator
// layout) and, for the products that read it, in shared memory as two bf16 terms S = hi + lo (|S - hi - lo| <=
// 2^-16 |S|), stored transposed ([BV][Kp + 8], k contiguous). bf16 inputs: X = Kr S and Qr S as bf16 m16n8k16
// products of the exact bf16 rows with hi and lo (ldmatrix fragments); fp16 inputs (not exact in bf16): TF32
// m16n8k8 with B = tf32(hi + lo).
template <int BV>
__host__ __device__ inline size_t state_smem_bytes(int Kp, int elem_bytes) {
  constexpr int lds = BV + 8;
  return sizeof(float) * 3 * C * lds + sizeof(uint16_t) * 2 * BV * static_cast<size_t>(qk_stride(Kp)) +
         static_cast<size_t>(elem_bytes) * 3 * C * qk_stride(Kp);
}

struct TokScal {
  float b[2], bek[2], eq[2], kd[2], decay;  // rows g and g + 8 of the warp's strip
};

__device__ __forceinline__ void load_scal(TokScal& s, const float* p, int r0) {
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    const int r = r0 + 8 * x;
    s.b[x] = __ldg(p + r), s.bek[x] = __ldg(p + C + r), s.eq[x] = __ldg(p + 2 * C + r);
    s.kd[x] = __ldg(p + 3 * C + r);
  }
  s.decay = __ldg(p + 4 * C);
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

/// d += a * b, m16n8k16, bf16 operands, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

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

template <typename T, int BV, int MI>
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
  float* Vq = Vp + C * lds;     // [C][lds] diag(e^{Gl-G} rk) V' (TF32)
  __nv_bfloat16* Sh = reinterpret_cast<__nv_bfloat16*>(Vq + C * lds);  // [BV][ldb] state, bf16 high term
  __nv_bfloat16* Sl = Sh + BV * ldb;                                   // [BV][ldb] low term
  T* Qb = reinterpret_cast<T*>(Sl + BV * ldb);  // [C][ldb] raw q
  T* Kb0 = Qb + C * ldb;                        // [2][C][ldb] raw k, double buffered

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int v0 = blockIdx.x * BV, hv = blockIdx.y, n = blockIdx.z;
  const int h = hv / (a.HV / a.H);
  const int K = a.K, V = a.V, m0 = 16 * warp;
  const size_t head = static_cast<size_t>(n) * a.HV + hv;
  const T* qp = static_cast<const T*>(a.q);
  const T* kp = static_cast<const T*>(a.k);
  const T* vp = static_cast<const T*>(a.v);
  T* op = static_cast<T*>(a.o);

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
  // hi/lo bf16 terms of the state into Sh/Sl (transposed)
  auto store_terms = [&]() {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int mt = warp + 4 * mi;
      if (16 * mt >= Kp) break;  // no such key tile
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int kk = 16 * mt + g + (e >= 2 ? 8 : 0), c = 8 * nt + 2 * t + (e & 1);
          const __nv_bfloat16 hi = __float2bfloat16_rn(S[mi][nt][e]);
          Sh[c * ldb + kk] = hi;
          Sl[c * ldb + kk] = __float2bfloat16_rn(S[mi][nt][e] - __bfloat162float(hi));
        }
    }
  };
  store_terms();

  long bos, eos;
  detail::seq_bounds(a, n, bos, eos);
  const int nC = static_cast<int>(min(static_cast<long>(maxC), (eos - bos + C - 1) / C));
  const size_t slot0 = static_cast<size_t>(n) * maxC * a.HV + hv;  // slot of chunk ci: slot0 + ci * HV

  // Per-chunk operands held in registers: T, P fragments of the warp's row strip (k tiles 0..2w+1), token
  // scalars, the v pairs of the thread's output positions. Loaded one chunk ahead.
  float4 Tf[8], Pf[8];
  TokScal sc;
  uint32_t vv[NT][2];
  auto load_tp = [&](float4* dst, const float* base, int ci) {
    const float4* p = reinterpret_cast<const float4*>(base + (slot0 + static_cast<size_t>(ci) * a.HV) * kFrag);
#pragma unroll
    for (int kt = 0; kt < 8; ++kt)
      if (kt <= 2 * warp + 1) dst[kt] = __ldg(p + (warp * (warp + 1) + kt) * 32 + lane);
  };
  auto load_v = [&](int ci) {
    const long c0 = bos + static_cast<long>(ci) * C;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const long r = c0 + m0 + g + 8 * x;
        const int col = v0 + 8 * nt + 2 * t;
        vv[nt][x] = 0u;
        if (r < eos && col < V)
          vv[nt][x] = __ldg(reinterpret_cast<const unsigned*>(vp + (static_cast<size_t>(r) * a.HV + hv) * V + col));
      }
  };
  if (nC > 0) {
    load_rows<T, kThreads>(Kb0, kp, a, h, bos, static_cast<int>(min(static_cast<long>(C), eos - bos)), Kp, ldb);
    load_rows<T, kThreads>(Qb, qp, a, h, bos, static_cast<int>(min(static_cast<long>(C), eos - bos)), Kp, ldb);
    cp_async_commit();
    load_tp(Tf, wsT, 0);
    load_tp(Pf, wsP, 0);
    load_scal(sc, wsS + slot0 * kScal, m0 + g);
    load_v(0);
  }

  for (int ci = 0; ci < nC; ++ci) {
    const long c0 = bos + static_cast<long>(ci) * C;
    const int Lc = static_cast<int>(min(static_cast<long>(C), eos - c0));
    const bool more = ci + 1 < nC;
    const long c1 = c0 + C;
    const int Lc1 = more ? static_cast<int>(min(static_cast<long>(C), eos - c1)) : 0;
    T* Kb = Kb0 + (ci & 1) * C * ldb;
    cp_async_wait_all();
    __syncthreads();  // q, k of this chunk landed; state terms written; Y, V' buffers free
    if (more) {
      load_rows<T, kThreads>(Kb0 + ((ci + 1) & 1) * C * ldb, kp, a, h, c1, Lc1, Kp, ldb);
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
        uint32_t ak[4], aq[4];
        ldmatrix_x4(ak, Kb + arow + k0);
        ldmatrix_x4(aq, Qb + arow + k0);
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
          uint32_t bh[4], bl[4];
          ldmatrix_x4(bh, Sh + 16 * np * ldb + brow + k0);
          ldmatrix_x4(bl, Sl + 16 * np * ldb + brow + k0);
          mma_bf16(X[2 * np], ak, bl[0], bl[1]);
          mma_bf16(X[2 * np + 1], ak, bl[2], bl[3]);
          mma_bf16(O[2 * np], aq, bl[0], bl[1]);
          mma_bf16(O[2 * np + 1], aq, bl[2], bl[3]);
          mma_bf16(X[2 * np], ak, bh[0], bh[1]);
          mma_bf16(X[2 * np + 1], ak, bh[2], bh[3]);
          mma_bf16(O[2 * np], aq, bh[0], bh[1]);
          mma_bf16(O[2 * np + 1], aq, bh[2], bh[3]);
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
      load_rows<T, kThreads>(Qb, qp, a, h, c1, Lc1, Kp, ldb);
      cp_async_commit();
      load_v(ci + 1);
    }
    // ---- phase 2: V' = T Y (T lower triangular: k tiles 0..2w+1) ----
    float Vr[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) Vr[nt][e] = 0.f;
    strip_tri_mma<NT, lds>(Vr, Tf, Ys, warp, g, t);
    if (more) load_tp(Tf, wsT, ci + 1);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const int off = (m0 + g + 8 * x) * lds + 8 * nt + 2 * t;
        const float w0 = Vr[nt][2 * x], w1 = Vr[nt][2 * x + 1];
        *reinterpret_cast<float2*>(Vp + off) =
            make_float2(__uint_as_float(f2tf32(w0)), __uint_as_float(f2tf32(w1)));
        *reinterpret_cast<float2*>(Vq + off) =
            make_float2(__uint_as_float(f2tf32(sc.kd[x] * w0)), __uint_as_float(f2tf32(sc.kd[x] * w1)));
      }
    const float decay = sc.decay;
    if (more) load_scal(sc, wsS + (slot0 + static_cast<size_t>(ci + 1) * a.HV) * kScal, m0 + g);
    __syncthreads();  // V' complete; the state terms are no longer read in this chunk
    // ---- phase 3: O += P V', written out ----
    strip_tri_mma<NT, lds>(O, Pf, Vp, warp, g, t);
    if (more) load_tp(Pf, wsP, ci + 1);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const int r = m0 + g + 8 * x, col = v0 + 8 * nt + 2 * t;
        if (r < Lc && col < V) {
          T out[2] = {detail::from_f<T>(O[nt][2 * x]), detail::from_f<T>(O[nt][2 * x + 1])};
          *reinterpret_cast<unsigned*>(op + (static_cast<size_t>(c0 + r) * a.HV + hv) * V + col) =
              *reinterpret_cast<const unsigned*>(out);
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
    store_terms();
  }
  if (s1 == nullptr) return;
  each_state([&](float& x, int kk, int c) {
    if (kk < K && v0 + c < V) s1[state_index(kk, c)] = x;
  });
}

template <typename KernT>
cudaError_t set_smem(KernT kern, size_t bytes) {
  return cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

template <typename T, int BV, int MI>
cudaError_t launch_state(const GatedDeltaArgs& a, int Kp, int maxC, const float* ws, size_t slots, cudaStream_t s) {
  const size_t bytes = state_smem_bytes<BV>(Kp, sizeof(T));
  auto kern = state_kernel<T, BV, MI>;
  cudaError_t e = set_smem(kern, bytes);
  if (e != cudaSuccess) return e;
  const dim3 grid((a.V + BV - 1) / BV, a.HV, a.N);
  kern<<<grid, kThreads, bytes, s>>>(a, Kp, maxC, ws, ws + slots * kFrag, ws + 2 * slots * kFrag);
  return cudaGetLastError();
}

template <typename T, int BV>
cudaError_t dispatch_mi(const GatedDeltaArgs& a, int Kp, int maxC, const float* ws, size_t slots, cudaStream_t s) {
  const int ktiles = Kp / 16;  // key tiles of 16 rows, spread over the 4 warps
  if (ktiles <= 4) return launch_state<T, BV, 1>(a, Kp, maxC, ws, slots, s);
  if (ktiles <= 8) return launch_state<T, BV, 2>(a, Kp, maxC, ws, slots, s);
  return launch_state<T, BV, 4>(a, Kp, maxC, ws, slots, s);
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
  int sms = 132, dev = 0;
  if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);

  float* ws = nullptr;
  if (slots > 0) {
    keep_pool_memory();
    cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&ws), slots * (2 * kFrag + kScal) * sizeof(float), s);
    if (e != cudaSuccess) return e;
    const size_t bytes = prep_smem_bytes(Kp);
    e = set_smem(prep_kernel<T>, bytes);
    if (e != cudaSuccess) return e;
    prep_kernel<T><<<dim3(maxC, a.HV, a.N), kThreadsA, bytes, s>>>(a, Kp, maxC, ws, ws + slots * kFrag,
                                                                  ws + 2 * slots * kFrag);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  // The serial chain is latency bound: value tiles of 32 columns unless that leaves fewer than two blocks per SM.
  // Key dims above 128 take 16 columns (the register state of a thread stays at 32 floats).
  const long blocks32 = static_cast<long>(a.N) * a.HV * ((a.V + 31) / 32);
  const cudaError_t e = blocks32 >= 2L * sms && Kp <= 128 ? dispatch_mi<T, 32>(a, Kp, maxC, ws, slots, s)
                                                          : dispatch_mi<T, 16>(a, Kp, maxC, ws, slots, s);
  if (ws != nullptr) {
    const cudaError_t f = cudaFreeAsync(ws, s);
    if (e == cudaSuccess && f != cudaSuccess) return f;
  }
  return e;
}

}  // namespace

cudaError_t gated_delta_chunk(const GatedDeltaArgs& a, cudaStream_t stream) {
  if (check_args(a) != nullptr || a.state_bf16) return cudaErrorInvalidValue;  // fp32 states only
  return a.in_type == ElemType::kBF16 ? dispatch<__nv_bfloat16>(a, stream) : dispatch<__half>(a, stream);
}

}  // namespace statecut::cuda
