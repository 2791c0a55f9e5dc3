// Kernel 1 of the chunked prefill (see gated_delta_chunk.cu for the whole algorithm): per (chunk, value head,
// sequence), fully parallel, the L2 norms of the chunk's q, k rows, the in-chunk cumulative log gate G, beta, and
//   A = strict_lower(diag(b) K K^T o D),  T = (I + A)^-1 (blocked, 3xTF32),  P = tril_incl(Q K^T o D)
// written to the workspace in A-fragment order with the per-token scalars the serial kernel needs. Without the delta
// term (gated linear attention, a.delta false) A = 0 and the scalars b e^G rk are 0: T = I exactly and the serial
// kernel's Y = diag(b) V - diag(b e^G rk) Kr S is diag(b) V, so V' = diag(b) V and the state and output products
// are those of S_t = e^{g_t} S_{t-1} + b_t k_t v_t^T.
#include <type_traits>

#include "kernels/gated_delta_chunk.cuh"

namespace statecut::cuda::chunk {
namespace {

/// prep_kernel's shared memory: token vectors, solve scratch, then the q/k tiles, later reused for A/T and P.
__host__ __device__ inline size_t prep_smem_bytes(int Kp) {
  const size_t qk = 2 * 2 * C * static_cast<size_t>(qk_stride(Kp)), tp = sizeof(float) * 2 * C * ldc;
  return sizeof(double) * C + sizeof(float) * (3 * C + (kThreadsA / 32) * kXw) + (qk > tp ? qk : tp);
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


/// d += a * b, m16n8k16, 16-bit operands of type T (bf16 or fp16), fp32 accumulators.
template <typename T>
__device__ __forceinline__ void mma16(float* d, const uint32_t* a, const uint32_t* b) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// acc[j] = Am[16 s_j .. +16) Kb[8 c_j .. +8)^T for five tiles: j < N1 in strip S1 at column tiles J1 + j, the rest
/// in strip S2 at column tiles 0, 1, ...; ss0/ss1 += the squares of rows g / g + 8 of the norm strip (S2 when the
/// warp has two strips, else S1). Am, Kb: [C][ldb] 16-bit rows, Kp a multiple of 16.
template <typename T, int S1, int J1, int N1, int S2>
__device__ __forceinline__ void strip_products(float (&acc)[5][4], float& ss0, float& ss1, const T* Am, const T* Kb,
                                               int ldb, int Kp, int lane) {
  constexpr bool kTwo = N1 < 5;
#pragma unroll
  for (int j = 0; j < 5; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  const int arow = (lane & 15) * ldb + (lane >> 4) * 8;            // ldmatrix x4: 16 rows x 16 k
  const int brow = (lane & 7) * ldb + ((lane >> 3) & 1) * 8;       // ldmatrix x2: 8 rows x 16 k
#pragma unroll 2
  for (int k0 = 0; k0 < Kp; k0 += 16) {
    uint32_t a1[4], a2[4];
    ldmatrix_x4(a1, Am + 16 * S1 * ldb + arow + k0);
    if constexpr (kTwo) ldmatrix_x4(a2, Am + 16 * S2 * ldb + arow + k0);
    const uint32_t* an = kTwo ? a2 : a1;
    uint32_t lo, hi;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      pair_tf32<T>(an[e], lo, hi);  // exact fp32 values of the two elements
      const float x0 = __uint_as_float(lo), x1 = __uint_as_float(hi);
      if (e & 1) ss1 += x0 * x0 + x1 * x1;
      else ss0 += x0 * x0 + x1 * x1;
    }
#pragma unroll
    for (int j = 0; j < 5; ++j) {
      const int ct = j < N1 ? J1 + j : j - N1;
      uint32_t b[2];
      ldmatrix_x2(b, Kb + 8 * ct * ldb + brow + k0);
      mma16<T>(acc[j], j < N1 ? a1 : a2, b);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Kernel 1: per (chunk, value head, sequence) T, P and the token scalars.
template <typename T>
__global__ void __launch_bounds__(kThreadsA, 4) prep_kernel(const GatedDeltaArgs a, const int Kp, const int maxC,
                                                         float* __restrict__ wsT, float* __restrict__ wsP,
                                                         float* __restrict__ wsS) {
  extern __shared__ __align__(16) float sm[];
  // [C] cumulative log gate, in double: the in-chunk decays are e^{G_r - G_c}, and after a strong-decay stretch
  // (32 steps of g = -20 make G = -640) an fp32 G keeps no digits of the weak steps that follow, so their
  // differences would cancel (issue 19.1). Double G makes G_r - G_c exact to ~1e-16 |G| before the fp32 exp.
  double* Gs = reinterpret_cast<double*>(sm);
  float* Bs = sm + 2 * C;       // [C] beta
  float* Rk = Bs + C;           // [C] 1 / |k|
  float* Rq = Rk + C;           // [C] scale / |q|
  float* Xw = Rq + C;           // [8 warps][16 x 8] solve scratch
  float* Ts = Xw + (kThreadsA / 32) * kXw;  // [C][ldc] A, then T   (over the q/k tiles once those are consumed)
  float* Ps = Ts + C * ldc;                 // [C][ldc] P
  const int ldb = qk_stride(Kp);
  T* Kb = reinterpret_cast<T*>(Ts);  // [C][ldb]
  T* Qb = Kb + C * ldb;              // [C][ldb]

  // the state kernel (programmatic dependent) may launch now; it waits for this grid before reading the workspace
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
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
    double g0 = 0.0, g1 = 0.0;
    float b0 = 0.f, b1 = 0.f;
    const int t0 = 2 * lane, t1 = 2 * lane + 1;
    if (t0 < Lc) g0 = detail::token_log_gate(a, c0 + t0, hv), b0 = detail::token_beta(a, c0 + t0, hv);
    if (t1 < Lc) g1 = detail::token_log_gate(a, c0 + t1, hv), b1 = detail::token_beta(a, c0 + t1, hv);
    const double pair = g0 + g1;
    double incl = pair;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const double y = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += y;
    }
    const double excl = incl - pair;
    Gs[t0] = excl + g0, Gs[t1] = excl + pair;
    Bs[t0] = b0, Bs[t1] = b1;
  }
  cp_async_wait_all();
  __syncthreads();
  // ---- warps 0-3: Kr Kr^T, warps 4-7: Qr Kr^T over the lower block triangle (20 16 x 8 tiles: 2s + 2 in row strip
  //      s), 5 tiles per warp (StripTiles), as 16-bit m16n8k16 mma (bf16/fp16 products are exact, fp32 sums); the
  //      row sums of squares (L2 norms) of the warp's norm strip from the same A fragments ----
  const int w4 = warp & 3;
  const bool is_q = warp >= 4;
  const T* Am = is_q ? Qb : Kb;
  float acc[5][4] = {};
  float ss0 = 0.f, ss1 = 0.f;
  // without the delta term Kr Kr^T is not needed (A = 0), nor k's norms unless they are taken
  if (is_q || a.delta || a.l2norm_qk) {
    switch (w4) {
      case 0: strip_products<T, 3, 0, 5, 3>(acc, ss0, ss1, Am, Kb, ldb, Kp, lane); break;
      case 1: strip_products<T, 3, 5, 3, 0>(acc, ss0, ss1, Am, Kb, ldb, Kp, lane); break;
      case 2: strip_products<T, 2, 0, 5, 2>(acc, ss0, ss1, Am, Kb, ldb, Kp, lane); break;
      default: strip_products<T, 2, 5, 1, 1>(acc, ss0, ss1, Am, Kb, ldb, Kp, lane); break;
    }
  }
  const int s1 = w4 < 2 ? 3 : 2, j1 = w4 & 1 ? 5 : 0, n1 = w4 == 1 ? 3 : w4 == 3 ? 1 : 5;
  const int s2 = w4 == 1 ? 0 : w4 == 3 ? 1 : s1;
  const int sn = w4 & 1 ? s2 : s1;
  ss0 += __shfl_xor_sync(0xffffffffu, ss0, 1), ss1 += __shfl_xor_sync(0xffffffffu, ss1, 1);
  ss0 += __shfl_xor_sync(0xffffffffu, ss0, 2), ss1 += __shfl_xor_sync(0xffffffffu, ss1, 2);
  if (t == 0) {
    float* R = is_q ? Rq : Rk;
    const float mul = is_q ? a.scale : 1.f;
    R[16 * sn + g] = mul * (a.l2norm_qk ? rsqrtf(ss0 + detail::kL2Eps) : 1.f);
    R[16 * sn + g + 8] = mul * (a.l2norm_qk ? rsqrtf(ss1 + detail::kL2Eps) : 1.f);
  }
  __syncthreads();  // Rk, Rq visible; q/k tiles consumed (Ts, Ps overlay them)
  // ---- masks, decays, norms: A (strictly lower) into Ts, P (lower incl. diagonal) into Ps; only the lower block
  //      triangle is written (the steps below read nothing else) ----
  {
    float* dst = is_q ? Ps : Ts;
#pragma unroll
    for (int j = 0; j < 5; ++j) {
      const bool first = j < n1;
      const int m0 = 16 * (first ? s1 : s2), ct = first ? j1 + j : j - n1;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + g + (e >= 2 ? 8 : 0), c = 8 * ct + 2 * t + (e & 1);
        float v = 0.f;
        if (is_q ? c <= r : (c < r && a.delta)) {  // no delta term: A = 0, so T = I
          const float d = __expf(static_cast<float>(Gs[r] - Gs[c])) * Rk[c];
          v = (is_q ? Rq[r] : Bs[r] * Rk[r]) * d * acc[j][e];
        }
        dst[r * ldc + c] = v;
      }
    }
  }
  __syncthreads();
  // ---- T = (I + A)^-1: diagonal 16 x 16 blocks by column lanes, then block rows; without the delta term A = 0 and
  //      T = I: the diagonal blocks are set to I (the blocks below them were written 0 above) ----
  if (!a.delta) {
    if (warp < 4 && lane < 16)
#pragma unroll
      for (int r = 0; r < 16; ++r) Ts[(warp * 16 + r) * ldc + warp * 16 + lane] = r == lane ? 1.f : 0.f;
  } else if (warp < 4 && lane < 16) {
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
  for (int bi = 1; bi < (a.delta ? 4 : 1); ++bi) {
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
    const double gl = Gs[C - 1];
    const float e = __expf(static_cast<float>(Gs[tid]));
    os[tid] = Bs[tid];
    os[C + tid] = a.delta ? Bs[tid] * e * Rk[tid] : 0.f;  // no delta term: Y = diag(b) V
    os[2 * C + tid] = e * Rq[tid];
    os[3 * C + tid] = __expf(static_cast<float>(gl - Gs[tid])) * Rk[tid];
    if (tid == 0) os[4 * C] = __expf(static_cast<float>(gl));
  }
}

}  // namespace

template <typename T>
cudaError_t launch_prep(const GatedDeltaArgs& a, int Kp, int maxC, float* ws, size_t slots, cudaStream_t s) {
  const size_t bytes = prep_smem_bytes(Kp);
  cudaError_t e = set_smem(prep_kernel<T>, bytes);
  if (e != cudaSuccess) return e;
  prep_kernel<T><<<dim3(maxC, a.HV, a.N), kThreadsA, bytes, s>>>(a, Kp, maxC, ws, ws + slots * kFrag,
                                                                ws + 2 * slots * kFrag);
  return cudaGetLastError();
}

template cudaError_t launch_prep<__nv_bfloat16>(const GatedDeltaArgs&, int, int, float*, size_t, cudaStream_t);
template cudaError_t launch_prep<__half>(const GatedDeltaArgs&, int, int, float*, size_t, cudaStream_t);

}  // namespace statecut::cuda::chunk
