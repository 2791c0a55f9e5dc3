// Shared pieces of the chunked prefill (gated_delta_chunk_prep.cu: kernel 1, gated_delta_chunk.cu: kernel 2 and the
// entry point): the chunk geometry, the workspace layout, TF32/bf16 mma.sync and cp.async primitives, and the q/k
// row loader. Internal to kernels/; the algorithm is described at the top of gated_delta_chunk.cu.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/gated_delta.h"
#include "kernels/gated_delta_common.cuh"

namespace statecut::cuda::chunk {

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

/// 16-bit 8 x 8 matrix loads / stores between shared memory and mma fragments (ldmatrix / stmatrix; lanes 8j..8j+7
/// give the row addresses of matrix j). x4: four matrices, x2: two, trans: transposed.
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t* r, const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
/// Four 8 x 8 bf16 fragments (accumulator layout: row g, columns 2t, 2t+1 in one word) stored transposed: fragment
/// element (r, c) of matrix j goes to row c of the 8 rows whose addresses lanes 8j..8j+7 give, position r.
__device__ __forceinline__ void stmatrix_x4_trans(void* smem, const uint32_t* r) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(s), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
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

/// Elements between two tokens of q and k in global memory: the caller's token stride (slices of a packed
/// projection output, read in place; q and k share it) or H K when packed.
__host__ __device__ inline int64_t qk_token_stride(const GatedDeltaArgs& a) {
  return a.q_stride ? a.q_stride : static_cast<int64_t>(a.H) * a.K;
}

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
    if (lk < groups) {
      // pointers stepped by a whole pass (no 64-bit index products in the loop)
      const int r0 = (threadIdx.x >> 5) * rp + lr, dr = (NTHR / 32) * rp;
      const bool kin = lk * 8 < K;
      const size_t tok = static_cast<size_t>(qk_token_stride(a));
      const size_t step = static_cast<size_t>(dr) * tok;
      const T* p = src + static_cast<size_t>(c0 + r0) * tok + static_cast<size_t>(h) * K + lk * 8;
      T* d = dst + r0 * ldb + lk * 8;
      for (int r = r0; r < C; r += dr, p += step, d += dr * ldb) {
        const bool ok = kin && r < Lc;
        cp_async16(d, ok ? p : src, ok);
      }
    }
  } else {
    const T zero = detail::from_f<T>(0.f);
    for (int i = threadIdx.x; i < C * Kp; i += NTHR) {
      const int r = i / Kp, kk = i % Kp;
      dst[r * ldb + kk] = (r < Lc && kk < K)
                              ? src[static_cast<size_t>(c0 + r) * qk_token_stride(a) + static_cast<size_t>(h) * K + kk]
                              : zero;
    }
  }
}


template <typename KernT>
cudaError_t set_smem(KernT kern, size_t bytes) {
  return cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

/// Kernel 1 over grid (maxC, HV, N): T, P and the token scalars of every chunk into the workspace ws
/// (T at ws, P at ws + slots * kFrag, scalars at ws + 2 * slots * kFrag; slots = N * maxC * HV).
template <typename T>
cudaError_t launch_prep(const GatedDeltaArgs& a, int Kp, int maxC, float* ws, size_t slots, cudaStream_t s);

}  // namespace statecut::cuda::chunk
