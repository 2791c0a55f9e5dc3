// The weight-streaming GEMM of a batched decode step (kernels/skinny_gemm.h has the math and the rounding).
#include "kernels/skinny_gemm.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kernels/gated_delta_common.cuh"
#include "kernels/pdl.cuh"
#include "kernels/wgmma_bf16.cuh"

namespace statecut::cuda {
namespace {

constexpr int kTileRows = 128;  // rows of w a block owns: two consumer warpgroups of 64 (wgmma's M)
constexpr int kKSlice = 64;     // k per box: one 128-byte swizzle row of bf16
// Consecutive 64-wide k boxes a stage holds. Measured (43rd wave, H100, a DeltaNet 1.3B step's GEMMs): two boxes a
// stage (256 contiguous bytes of each weight row) were as fast at 2-64 rows and 21% slower at 256.
constexpr int kBoxes = 1;
constexpr int kThreads = 288;   // warps 0-7: the two consumer warpgroups; warp 8: the producer
constexpr int kRedPad = 4;      // the partial tile's row pad: [NB][128 + 4] fp32 puts a warp's 32 stores in 32 banks
constexpr int kMaxCluster = 8;  // the portable cluster size

/// Shared memory of the kernel for x's rows rounded up to NB: one block an SM, up to 8 stages in ~200 KB. Measured
/// (43rd wave, H100): two blocks an SM of ~110 KB each were as fast on the GEMMs alone and 6-12% slower once each
/// block triggers its dependents early (kernels/pdl.cuh). With Push (NB <= 64), the received partials take their
/// room from the ring.
template <int NB, bool Push>
struct Plan {
  static constexpr int kWBox = kTileRows * kKSlice * 2;
  static constexpr int kXBox = NB * kKSlice * 2;
  static constexpr int kWBytes = kBoxes * kWBox;
  static constexpr int kXBytes = kBoxes * kXBox;
  static constexpr int kStageBytes = kWBytes + kXBytes;
  // The pushed epilogue: each block receives its rows' partials from every rank, [cs][ceil(NB / cs)][128] fp32, at
  // most NB + 7 rows of 512 bytes, outside the ring (they may land while this block still streams).
  static constexpr int kRecvBytes = Push ? (NB + kMaxCluster - 1) * kTileRows * 4 : 0;
  static constexpr int kBudget = 200 * 1024 - kRecvBytes;
  static constexpr int kStages = kBudget / kStageBytes < 8 ? kBudget / kStageBytes : 8;
  static constexpr int kRedBytes = NB * (kTileRows + kRedPad) * 4;
  static constexpr int kSmem = kStages * kStageBytes + kRecvBytes + 1024 + 2 * kStages * 8 + 8;  // + slack + barriers
  static_assert(kStages >= 2, "a ring of at least two stages");
  static_assert(kRedBytes <= kStages * kStageBytes, "the partial tile reuses the stages");
  static_assert(kStageBytes % 1024 == 0, "each stage starts on a 1024-byte swizzle atom");
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
}
/// One 2-D box of `map` at (c0 along k, c1 along rows) into shared memory at dst, completing on bar.
__device__ __forceinline__ void tma_load(const CUtensorMap* map, uint32_t dst, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/// The cluster barrier without ordering this thread's memory operations: enough where what the others wait for is
/// only that this thread's loads have returned (a loaded value already used cannot still be in flight).
__device__ __forceinline__ void cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }
/// 16 bytes into shared memory of the cluster at `remote`, completing `bytes` on the barrier at `remote_bar`.
__device__ __forceinline__ void st_async(uint32_t remote, float4 v, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                   remote),
               "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(remote_bar)
               : "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_size() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}
/// The address of the same shared memory in the cluster's block `rank`.
__device__ __forceinline__ uint32_t map_rank(uint32_t local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}
__device__ __forceinline__ float4 load_remote(uint32_t local, uint32_t rank) {
  const uint32_t remote = map_rank(local, rank);
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}
/// The wgmma descriptor of a K-major tile with 128-byte swizzle at shared address `addr`: rows of 128 bytes, 8-row
/// atoms 1024 bytes apart (the stride byte offset), the leading byte offset unused (16) for this swizzle.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(16 >> 4) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (1ull << 62);
}

template <int NB>
__device__ __forceinline__ void mma(float* d, uint64_t a, uint64_t b) {
  if constexpr (NB == 8) wgmma::wgmma_n8(d, a, b);
  else if constexpr (NB == 16) wgmma::wgmma_n16(d, a, b);
  else if constexpr (NB == 32) wgmma::wgmma_n32(d, a, b);
  else if constexpr (NB == 64) wgmma::wgmma_n64(d, a, b);
  else if constexpr (NB == 128) wgmma::wgmma_n128(d, a, b);
  else wgmma::wgmma_n256(d, a, b);
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

/// One block: w's rows [128 t, 128 t + 128) against x's M rows over the cluster rank's share of the k slices; the
/// cluster's blocks (consecutive along x of the grid) share t. See skinny_gemm.h. With SiluMul, w is gate|up
/// [2N, K]: the block's 128 rows are gate rows [64 t, 64 t + 64) then the up rows N apart (two 64-row boxes), and it
/// writes silu_mul of the two halves' rounded sums for y's columns [64 t, 64 t + 64).
/// The epilogue of a cluster, two ways with the same sums in the same order (so the same bits):
/// - pulled (Push false): every block writes its partial tile into its own shared memory; after a cluster barrier
///   each reads its rows' partials from every rank, and a last barrier keeps each block alive for the others' reads;
/// - pushed (Push true, NB <= 64): each block sends each row's partials straight to the rank that writes that row
///   (st.async, completing bytes on that rank's mbarrier, armed at the start for exactly what it will receive) and
///   waits only for its own rows' bytes: no barrier after the main loop.
template <int NB, bool SiluMul, bool Push>
__global__ void __launch_bounds__(kThreads, 1)
    skinny_gemm_kernel(const __grid_constant__ CUtensorMap tw, const __grid_constant__ CUtensorMap tx,
                       __nv_bfloat16* __restrict__ y, int M, int N, int kslices, bool trigger) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  pdl::trigger(trigger);  // the next grid may launch and stream its own weights (kernels/pdl.cuh)
  using P = Plan<NB, Push>;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw + 1023) & ~1023u) - raw);
  const uint32_t base = smem_addr(smem);
  const uint32_t recv0 = base + P::kStages * P::kStageBytes;
  const uint32_t full0 = recv0 + P::kRecvBytes, empty0 = full0 + 8 * P::kStages, recv_bar = empty0 + 8 * P::kStages;
  auto full = [&](int s) { return full0 + 8 * s; };
  auto empty = [&](int s) { return empty0 + 8 * s; };
  auto w_at = [&](int s) { return base + s * P::kStageBytes; };
  auto x_at = [&](int s) { return base + s * P::kStageBytes + P::kWBytes; };

  const int cs = static_cast<int>(cluster_size()), rank = static_cast<int>(cluster_rank());
  const int tile = static_cast<int>(blockIdx.x) / cs;
  const int k0 = static_cast<int>(static_cast<int64_t>(kslices) * rank / cs);
  const int steps = static_cast<int>(static_cast<int64_t>(kslices) * (rank + 1) / cs) - k0;
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const bool push = Push && cs > 1;
  const int rows = M < NB ? M : NB;
  const int mine = rank < rows ? (rows - rank + cs - 1) / cs : 0;  // rows of y this block writes

  if (threadIdx.x == 0) {
    for (int s = 0; s < P::kStages; ++s) mbar_init(full(s), 1), mbar_init(empty(s), 256);
    if (push) {
      mbar_init(recv_bar, 1);
      // every rank's partial of this block's rows: the phase completes when they have all landed
      mbar_expect_tx(recv_bar, static_cast<uint32_t>(mine * kTileRows * 4 * cs));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (push) cluster_arrive_relaxed();  // waited for before the first push: every rank's barrier initialized

  float d[NB / 2];
#pragma unroll
  for (int i = 0; i < NB / 2; ++i) d[i] = 0.f;

  if (warp == 8) {
    if (lane == 0) {
      // The weights first: they do not depend on the kernel before this one, x does.
      const int pre = steps < P::kStages ? steps : P::kStages;
      const auto load_w = [&](int i, int s) {
        for (int b = 0; b < kBoxes; ++b) {
          const int k = ((k0 + i) * kBoxes + b) * kKSlice;
          if constexpr (SiluMul) {  // the gate rows, then the up rows N below them: each box 64 rows of 128 bytes
            tma_load(&tw, w_at(s) + b * P::kWBox, full(s), k, tile * 64);
            tma_load(&tw, w_at(s) + b * P::kWBox + 64 * 128, full(s), k, N + tile * 64);
          } else {
            tma_load(&tw, w_at(s) + b * P::kWBox, full(s), k, tile * kTileRows);
          }
        }
      };
      const auto load_x = [&](int i, int s) {
        for (int b = 0; b < kBoxes; ++b)
          tma_load(&tx, x_at(s) + b * P::kXBox, full(s), ((k0 + i) * kBoxes + b) * kKSlice, 0);
      };
      for (int i = 0; i < pre; ++i) mbar_expect_tx(full(i), P::kStageBytes), load_w(i, i);
      pdl::wait();
      for (int i = 0; i < pre; ++i) load_x(i, i);
      for (int i = pre; i < steps; ++i) {
        const int s = i % P::kStages;
        mbar_wait(empty(s), static_cast<uint32_t>((i / P::kStages - 1) & 1));
        mbar_expect_tx(full(s), P::kStageBytes);
        load_w(i, s);
        load_x(i, s);
      }
    }
  } else {
    const int wg = warp >> 2;
    for (int i = 0; i < steps; ++i) {
      const int s = i % P::kStages;
      mbar_wait(full(s), static_cast<uint32_t>((i / P::kStages) & 1));
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int b = 0; b < kBoxes; ++b)
#pragma unroll
        for (int kk = 0; kk < kKSlice / 16; ++kk)
          mma<NB>(d, smem_desc(w_at(s) + b * P::kWBox + wg * 64 * 128 + kk * 32),
                  smem_desc(x_at(s) + b * P::kXBox + kk * 32));
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
      if (i > 0) mbar_arrive(empty((i - 1) % P::kStages));
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  __syncthreads();  // every stage read and every copy landed: the stages become the partial tile

  // The partial tile, x's row major: red[c][r] for w's row r of the tile and x's row c.
  float* red = reinterpret_cast<float*>(smem);
  constexpr int ld = kTileRows + kRedPad;
  if (warp < 8) {
    const int r = (warp >> 2) * 64 + 16 * (warp & 3) + (lane >> 2);
#pragma unroll
    for (int j = 0; j < NB / 8; ++j) {
      const int c = 8 * j + 2 * (lane & 3);
      red[c * ld + r] = d[4 * j];
      red[(c + 1) * ld + r] = d[4 * j + 1];
      red[c * ld + r + 8] = d[4 * j + 2];
      red[(c + 1) * ld + r + 8] = d[4 * j + 3];
    }
  }
  if (push) {  // each row's 128 partial sums to the rank that writes it: recv[rank][m / cs] there
    __syncthreads();
    cluster_wait();
    const uint32_t my_slot = recv0 + static_cast<uint32_t>(rank * ((NB + cs - 1) / cs) * kTileRows * 4);
    for (int idx = static_cast<int>(threadIdx.x); idx < rows * 32; idx += kThreads) {
      const int c = idx >> 5, q = idx & 31;
      const uint32_t to = static_cast<uint32_t>(c % cs);
      const float4 v = *reinterpret_cast<const float4*>(red + c * ld + 4 * q);
      st_async(map_rank(my_slot + static_cast<uint32_t>(((c / cs) * kTileRows + 4 * q) * 4), to), v,
               map_rank(recv_bar, to));
    }
  } else if (cs > 1) {
    cluster_sync();  // every partial tile of the cluster written and visible to the others
  } else {
    __syncthreads();
  }
  pdl::wait();  // y may be memory the kernel before this one still reads
  if (push) mbar_wait(recv_bar, 0);

  // This block writes x's rows m = rank, rank + cs, ...: the cluster's partials added in rank order. A thread owns
  // four consecutive columns of y: 32 threads a row of 128 columns, or 16 a row of 64 with SiluMul.
  constexpr int kCols = SiluMul ? 64 : kTileRows, kLg = SiluMul ? 4 : 5;
  const int n0 = tile * kCols;
  const bool vec = N % 4 == 0;
  const float* recv = reinterpret_cast<const float*>(smem + P::kStages * P::kStageBytes);
  const int slot = ((NB + cs - 1) / cs) * kTileRows;
  // The partials at offset `at` of the tile, added in rank order: a lone block reads its own shared memory; a cluster's
  // loads from every rank are issued before the first add.
  const auto reduced = [&](int at) {
    if (cs == 1) return *reinterpret_cast<const float4*>(red + at);
    if (push) {  // at = m * ld + col: the received row m / cs, in rank order
      const int m = at / ld, col = at - m * ld, off = (m / cs) * kTileRows + col;
      float4 acc = *reinterpret_cast<const float4*>(recv + off);
      for (int r2 = 1; r2 < cs; ++r2) {
        const float4 v = *reinterpret_cast<const float4*>(recv + r2 * slot + off);
        acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
      }
      return acc;
    }
    const uint32_t local = smem_addr(red + at);
    float4 v[kMaxCluster];
#pragma unroll
    for (int r2 = 0; r2 < kMaxCluster; ++r2)
      if (r2 < cs) v[r2] = load_remote(local, static_cast<uint32_t>(r2));
    float4 acc = v[0];
#pragma unroll
    for (int r2 = 1; r2 < kMaxCluster; ++r2)
      if (r2 < cs) acc.x += v[r2].x, acc.y += v[r2].y, acc.z += v[r2].z, acc.w += v[r2].w;
    return acc;
  };
  const int items = mine << kLg;
#pragma unroll 2
  for (int idx = static_cast<int>(threadIdx.x); idx < items; idx += kThreads) {
    const int m = rank + cs * (idx >> kLg), q = idx & (kCols / 4 - 1);
    const int n = n0 + 4 * q;
    if (n >= N) continue;
    float4 acc = reduced(m * ld + 4 * q);
    if constexpr (SiluMul) {  // silu_mul's arithmetic on the two rounded sums (gated_delta_common.cuh)
      const float4 up = reduced(m * ld + 64 + 4 * q);
      const auto glu = [](float g, float u) {
        return detail::silu_times<__nv_bfloat16>(__bfloat162float(__float2bfloat16_rn(g)),
                                                 __bfloat162float(__float2bfloat16_rn(u)));
      };
      acc = make_float4(glu(acc.x, up.x), glu(acc.y, up.y), glu(acc.z, up.z), glu(acc.w, up.w));
    }
    __nv_bfloat16* out = y + static_cast<int64_t>(m) * N + n;
    if (vec) {
      __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x, acc.y), hi = __floats2bfloat162_rn(acc.z, acc.w);
      uint2 packed;
      packed.x = *reinterpret_cast<uint32_t*>(&lo);
      packed.y = *reinterpret_cast<uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(out) = packed;
    } else {
      const float a[4] = {acc.x, acc.y, acc.z, acc.w};
      for (int e = 0; e < 4 && n + e < N; ++e) out[e] = __float2bfloat16_rn(a[e]);
    }
  }
  // No block leaves while another still reads its partial tile. Measured (44th wave, H100): the epilogue (partials
  // through shared memory, two cluster barriers, the adds, the stores) held ~3.5 us of each GEMM's critical path; a
  // lone block skipping the barriers, this one ordering nothing and a cluster's loads issued together took the 97
  // projections of a DeltaNet 1.3B step, each followed by a norm-like kernel, from 1.264 to 1.211 ms at 8 rows and
  // 1.431 to 1.366 at 64. Pushed, no block reads another's memory: each has waited for every byte sent to it, and
  // what it sent left from registers.
  if (cs > 1 && !push) cluster_sync_relaxed();
#else
  __trap();  // sm_90a only: skinny_gemm_device_ok() keeps other chips away
#endif
}

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

/// The tensor map of a row-major bf16 [rows, K] matrix read in boxes of box_rows x 64 with 128-byte swizzle; rows
/// and k past the end read as zeros.
bool make_map(CUtensorMap* map, const void* p, int rows, int K, int box_rows) {
  const auto fn = encode_fn();
  if (fn == nullptr) return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(K) * 2};
  const cuuint32_t box[2] = {kKSlice, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem[2] = {1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(p), dims, strides, box, elem,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

int rows_bucket(int M) {
  int nb = 8;
  while (nb < M) nb *= 2;
  return nb;
}

/// The kernel instance for x's rows rounded up to NB, and the dynamic shared memory it is launched with.
struct Variant {
  void* kernel;
  int smem;
};

template <int NB, bool Push>
Variant variant_of(bool silu_mul) {
  return {silu_mul ? reinterpret_cast<void*>(&skinny_gemm_kernel<NB, true, Push>)
                   : reinterpret_cast<void*>(&skinny_gemm_kernel<NB, false, Push>),
          Plan<NB, Push>::kSmem};
}

/// The pushed epilogue exists for NB <= 64 (above, the received rows would leave the ring too few stages).
template <int NB>
Variant variant_of(bool silu_mul, bool push) {
  if constexpr (NB <= 64)
    if (push) return variant_of<NB, true>(silu_mul);
  return variant_of<NB, false>(silu_mul);
}

Variant variant_for(int nb, bool silu_mul = false, bool push = false) {
  switch (nb) {
    case 8: return variant_of<8>(silu_mul, push);
    case 16: return variant_of<16>(silu_mul, push);
    case 32: return variant_of<32>(silu_mul, push);
    case 64: return variant_of<64>(silu_mul, push);
    case 128: return variant_of<128>(silu_mul, push);
    default: return variant_of<256>(silu_mul, push);
  }
}

// skinny_gemm_push_epilogue: -1 the environment's say, 0 off, 1 on. Off by default: the same bits, no faster in whole
// steps (bench/README.md, 45th wave).
std::atomic<int> push_mode{-1};

bool push_on(int nb) {
  static const bool env = [] {
    const char* e = std::getenv("STATECUT_SKINNY_PUSH");
    return e != nullptr && std::strcmp(e, "1") == 0;
  }();
  const int m = push_mode.load(std::memory_order_relaxed);
  return nb <= 64 && (m < 0 ? env : m == 1);
}

/// What the host asks the driver about each device once: its SM count, how many clusters of each size each kernel
/// instance fits, and which instances have had their shared-memory attribute set there. Kept per device, since a
/// host may hold sm_90 GPUs of different SM counts; guarded by `mu`. (A cudaDeviceReset would drop the attributes
/// this remembers as set; the project never calls it.)
struct DeviceFacts {
  int sms = 0;
  int active[9][kMaxCluster + 1] = {};  // [log2 nb][cs]: 0 not asked, -1 asked and none
  uint32_t attribute_set = 0;           // bit 4 log2(nb) + 2 push + silu_mul
};
constexpr int kDevices = 64;
std::mutex mu;
DeviceFacts facts[kDevices];

int log2_bucket(int nb) {
  int lg = 0;
  while ((8 << lg) < nb) ++lg;
  return lg;
}

/// The current device's facts (nullptr when its index is past kDevices: then nothing is kept). Under `mu`.
DeviceFacts* current_facts() {
  int dev = 0;
  return cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < kDevices ? &facts[dev] : nullptr;
}

/// Sets the variant's dynamic shared memory limit on the current device, once a device.
cudaError_t allow_smem(int nb, bool silu_mul, bool push = false) {
  const Variant v = variant_for(nb, silu_mul, push);
  const uint32_t bit = 1u << (4 * log2_bucket(nb) + (push ? 2 : 0) + (silu_mul ? 1 : 0));
  std::lock_guard<std::mutex> lock(mu);
  DeviceFacts* f = current_facts();
  if (f != nullptr && (f->attribute_set & bit)) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(v.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, v.smem);
  if (e == cudaSuccess && f != nullptr) f->attribute_set |= bit;
  return e;
}

/// How many clusters of `cs` blocks of the NB kernel the current device holds at once (0 when it cannot say).
int active_clusters(int nb, int cs) {
  if (allow_smem(nb, false) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  std::lock_guard<std::mutex> lock(mu);
  DeviceFacts* f = current_facts();
  int scratch = 0;
  int& c = f != nullptr ? f->active[log2_bucket(nb)][cs] : scratch;
  if (c == 0) {
    const Variant v = variant_for(nb);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(cs * 16));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = static_cast<size_t>(v.smem);
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = static_cast<unsigned>(cs), at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    cfg.attrs = at, cfg.numAttrs = 1;
    int n = 0;
    c = cudaOccupancyMaxActiveClusters(&n, v.kernel, &cfg) == cudaSuccess && n > 0 ? n : -1;
    if (c < 0) cudaGetLastError();
  }
  return c > 0 ? c : 0;
}

/// The current device's SM count (132 when it cannot say).
int sm_count() {
  std::lock_guard<std::mutex> lock(mu);
  DeviceFacts* f = current_facts();
  if (f != nullptr && f->sms > 0) return f->sms;
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
    return 132;
  if (f != nullptr) f->sms = n;
  return n;
}

/// The smallest cluster whose blocks (tiles x cs) cover 0.65 of the SMs, at most 8 and at most one k slice a block.
/// Measured on an H100 (bench/README.md, 43rd wave, every cluster size timed on the 1.3B shapes at 8 and 64 rows):
/// the fastest was the smallest split that keeps ~85-100 of its 132 SMs streaming — more, smaller blocks pay their
/// fixed cost (ramp, reduction) more often than they gain bandwidth.
int pick_cluster(int nb, int tiles, int kslices) {
  const int sms = sm_count();
  int cs = 1;
  while (cs < kMaxCluster && cs < kslices && static_cast<int64_t>(tiles) * cs * 100 < 65LL * sms &&
         active_clusters(nb, cs + 1) > 0)
    ++cs;
  return cs;
}

}  // namespace

bool skinny_gemm_device_ok() {
  // Asked on every statecut::linear call of a batched step (twice: whether it pays, then the entry's own check), so
  // each device's answer is kept: 0 not asked yet, 1 runs it, 2 does not.
  static std::atomic<int> known[kDevices] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (dev >= 0 && dev < kDevices && known[dev].load(std::memory_order_relaxed) != 0)
    return known[dev].load(std::memory_order_relaxed) == 1;
  int major = 0, minor = 0;
  const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
                  major == 9 && minor == 0 && encode_fn() != nullptr;
  if (dev >= 0 && dev < kDevices) known[dev].store(ok ? 1 : 2, std::memory_order_relaxed);
  return ok;
}

void skinny_gemm_push_epilogue(int mode) { push_mode.store(mode < 0 ? -1 : mode ? 1 : 0, std::memory_order_relaxed); }

int skinny_gemm_cluster(int M, int N, int K) {
  return pick_cluster(rows_bucket(M), (N + kTileRows - 1) / kTileRows, (K + kBoxes * kKSlice - 1) / (kBoxes * kKSlice));
}

namespace {

/// Both entries: N is y's width; with silu_mul, w has 2N rows (gate then up) and a tile 64 of y's columns.
cudaError_t launch(const void* x, const void* w, void* y, int M, int N, int K, bool silu_mul, bool dependent,
                   cudaStream_t s, int cluster) {
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (M < 1 || M > kSkinnyGemmMaxRows || N < 1 || K < 8 || K % 8 != 0 || !al(x) || !al(w) || !al(y) ||
      (silu_mul && N > (1 << 30)))
    return cudaErrorInvalidValue;
  const int cols = silu_mul ? kTileRows / 2 : kTileRows;
  const int nb = rows_bucket(M), tiles = (N + cols - 1) / cols;
  int kslices = (K + kBoxes * kKSlice - 1) / (kBoxes * kKSlice);
  CUtensorMap tw, tx;
  if (!make_map(&tw, w, silu_mul ? 2 * N : N, K, silu_mul ? kTileRows / 2 : kTileRows) ||
      !make_map(&tx, x, M, K, nb))
    return cudaErrorInvalidValue;
  const int cs = cluster > 0 ? std::min(std::min(cluster, kMaxCluster), kslices) : pick_cluster(nb, tiles, kslices);
  const bool push = push_on(nb) && cs > 1;  // a lone block has no partials to send: the full ring
  const Variant v = variant_for(nb, silu_mul, push);
  const cudaError_t e = allow_smem(nb, silu_mul, push);
  if (e != cudaSuccess) return e;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(tiles * cs));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(v.smem);
  cfg.stream = s;
  cudaLaunchAttribute at[2];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = static_cast<unsigned>(cs), at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
  at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = dependent && pdl::enabled() ? 2 : 1;
  __nv_bfloat16* yp = static_cast<__nv_bfloat16*>(y);
  bool trigger = dependent && pdl::trigger_for(M);
  void* args[] = {&tw, &tx, &yp, &M, &N, &kslices, &trigger};
  return cudaLaunchKernelExC(&cfg, v.kernel, args);
}

}  // namespace

cudaError_t skinny_gemm_bf16(const void* x, const void* w, void* y, int M, int N, int K, bool dependent,
                             cudaStream_t s, int cluster) {
  return launch(x, w, y, M, N, K, false, dependent, s, cluster);
}

cudaError_t skinny_gemm_silu_mul_bf16(const void* x, const void* gate_up, void* y, int M, int N, int K,
                                      bool dependent, cudaStream_t s, int cluster) {
  return launch(x, gate_up, y, M, N, K, true, dependent, s, cluster);
}

}  // namespace statecut::cuda
