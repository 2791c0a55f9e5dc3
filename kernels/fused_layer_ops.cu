// Fused row / elementwise kernels of a model step (fused_layer_ops.h has the math).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/fused_layer_ops.h"
#include "kernels/gated_delta_common.cuh"
#include "kernels/pdl.cuh"
#include "kernels/rms_norm_row.cuh"

namespace statecut::cuda {
namespace {

using detail::from_f;
using detail::to_f;

using detail::sigmoid_f;
using detail::silu_f;

/// Row r's offset; `flat` (no grouping among the rows read) skips the 64-bit division of RowsArg::offset.
__device__ __forceinline__ int64_t row_offset(const RowsArg& x, int64_t r, bool flat) {
  return flat ? r * x.row_stride : x.offset(r);
}

using detail::load_vec;
using detail::store_vec;

using detail::kNormThreads;
using detail::kWarpRowMax;

/// Add: the row normalised is x + delta (rows of `d`), written to sum (contiguous rows x D) on the way. Rows of
/// D <= kWarpRowMax: a warp per row, kNormThreads / 32 rows a block; longer rows: a block per row (rms_norm_row.cuh).
template <typename T, int G, int V, bool Add>
__global__ void __launch_bounds__(kNormThreads) rms_norm_warp_kernel(RowsArg x, RowsArg d, const T* __restrict__ w,
                                                                     RowsArg z, T* __restrict__ y,
                                                                     T* __restrict__ sum, int64_t rows, int D,
                                                                     float eps, float w_offset, bool trigger) {
  pdl::trigger_then_wait(trigger);  // before reading what the previous kernel wrote (kernels/pdl.cuh)
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (kNormThreads / 32) + (threadIdx.x >> 5);
  if (r >= rows) return;
  detail::warp_norm_row<T, G, V, Add>(static_cast<const T*>(x.p) + x.offset(r),
                                      Add ? static_cast<const T*>(d.p) + d.offset(r) : nullptr,
                                      Add ? sum + r * D : nullptr, w,
                                      G ? static_cast<const T*>(z.p) + z.offset(r) : nullptr, y + r * D, D, eps,
                                      w_offset);
}

template <typename T, int G, int V, bool Add>
__global__ void __launch_bounds__(kNormThreads) rms_norm_kernel(RowsArg x, RowsArg d, const T* __restrict__ w,
                                                                RowsArg z, T* __restrict__ y, T* __restrict__ sum,
                                                                int D, float eps, float w_offset, bool trigger) {
  pdl::trigger_then_wait(trigger);  // before reading what the previous kernel wrote (kernels/pdl.cuh)
  __shared__ float part[kNormThreads / 32];
  const int64_t r = blockIdx.x;
  detail::block_norm_row<T, G, V, Add>(static_cast<const T*>(x.p) + x.offset(r),
                                       Add ? static_cast<const T*>(d.p) + d.offset(r) : nullptr,
                                       Add ? sum + r * D : nullptr, w,
                                       G ? static_cast<const T*>(z.p) + z.offset(r) : nullptr, y + r * D, D, eps,
                                       w_offset, part);
}

// Grid (B, ceil(C / (V · kStepThreads))): a thread owns V channels of one sequence (16-byte loads and stores when
// V = 8), its window in registers, W compiled in. Sums in the window order (j = 0 first), as the LibTorch step
// reduces over the window dimension. `state` is read before it is written through the same pointer (no restrict):
// the shift is in place. (One thread per element with a runtime W, 64-bit index division and 2-byte accesses took
// 7.2 µs for a DeltaNet 1.3B layer at batch 64 on the H200, ~3x its bytes.)
constexpr int kStepThreads = 128;
template <typename T, int W, int V>
__global__ void __launch_bounds__(kStepThreads) conv1d_step_kernel(RowsArg x, T* state, const T* __restrict__ w,
                                                                   const T* __restrict__ bias, T* __restrict__ y,
                                                                   int C, bool silu, bool trigger) {
  pdl::trigger_then_wait(trigger);  // before reading what the previous kernel wrote (kernels/pdl.cuh)
  const int c0 = (static_cast<int>(blockIdx.y) * kStepThreads + static_cast<int>(threadIdx.x)) * V;
  if (c0 >= C) return;
  const int64_t b = blockIdx.x;
  T* st = state + b * (W - 1) * C + c0;  // st[j * C] = win[j], j < W - 1
  float win[W][V];
#pragma unroll
  for (int j = 0; j + 1 < W; ++j) load_vec<T, V>(st + static_cast<int64_t>(j) * C, win[j]);
  load_vec<T, V>(static_cast<const T*>(x.p) + x.offset(b) + c0, win[W - 1]);
  // The V·W weights of the thread's channels are contiguous (w [C, W]): W 16-byte loads when V = 8 (one load
  // instruction per weight made the kernel issue-bound: 18.9 µs a layer at batch 256, 1.3 TB/s).
  float wf[V * W], bf[V];
#pragma unroll
  for (int q = 0; q < W; ++q)
    load_vec<T, V>(w + static_cast<int64_t>(c0) * W + q * V, *reinterpret_cast<float(*)[V]>(wf + q * V));
  if (bias) load_vec<T, V>(bias + c0, bf);
  float out[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < W; ++j) acc += win[j][v] * wf[v * W + j];
    if (bias) acc += bf[v];
    if (silu) acc = silu_f(acc);
    out[v] = acc;
  }
  store_vec<T, V>(y + b * C + c0, out);
#pragma unroll
  for (int j = 0; j + 1 < W; ++j) store_vec<T, V>(st + static_cast<int64_t>(j) * C, win[j + 1]);  // exact round trips
}

constexpr int kSeqChunk = 32;     // tokens per thread: the window slides in registers, each input is read once
constexpr int kSeqThreads = 128;  // channel groups per block

// Grid (B · chunks, ceil(C / (V · kSeqThreads))): a thread owns V channels of one sequence over kSeqChunk tokens and
// keeps the last W inputs of each in registers (the old one-thread-per-element kernel read every input W times and
// spent most of its time in 64-bit index division: 598 µs for 8 x 2048 x 2048 on the H200). The sum runs j = 0 first
// as before, so results are unchanged bit for bit.
template <typename T, int W, int V>
__global__ void __launch_bounds__(kSeqThreads) conv1d_seq_kernel(RowsArg x, const T* __restrict__ init,
                                                                 const T* __restrict__ w, const T* __restrict__ bias,
                                                                 T* __restrict__ y, T* __restrict__ fin, int Tn, int C,
                                                                 int chunks, bool flat, bool silu) {
  const int c0 = (static_cast<int>(blockIdx.y) * kSeqThreads + static_cast<int>(threadIdx.x)) * V;
  if (c0 >= C) return;
  const int b = static_cast<int>(blockIdx.x) / chunks, chunk = static_cast<int>(blockIdx.x) % chunks;
  const int t0 = chunk * kSeqChunk, t1 = min(Tn, t0 + kSeqChunk);
  const T* xp = static_cast<const T*>(x.p);
  const int64_t row0 = static_cast<int64_t>(b) * Tn;
  auto in = [&](int pos, float (&out)[V]) {  // inputs at position pos of sequence b; pos < 0 reads the initial window
    if (pos >= 0) {
      load_vec<T, V>(xp + row_offset(x, row0 + pos, flat) + c0, out);
    } else if (init) {
      load_vec<T, V>(init + (static_cast<int64_t>(b) * (W - 1) + (W - 1 + pos)) * C + c0, out);
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) out[v] = 0.f;
    }
  };
  float wc[W][V], win[W][V];  // win[j] = input at t − W + 1 + j
#pragma unroll
  for (int j = 0; j < W; ++j)
#pragma unroll
    for (int v = 0; v < V; ++v) wc[j][v] = to_f<T>(w[static_cast<int64_t>(c0 + v) * W + j]);
#pragma unroll
  for (int j = 0; j + 1 < W; ++j) in(t0 - W + 1 + j, win[j]);
  for (int t = t0; t < t1; ++t) {
    in(t, win[W - 1]);
    float out[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      float acc = 0.f;
#pragma unroll
      for (int j = 0; j < W; ++j) acc += win[j][v] * wc[j][v];
      if (bias) acc += to_f<T>(bias[c0 + v]);
      if (silu) acc = silu_f(acc);
      out[v] = acc;
    }
    store_vec<T, V>(y + (row0 + t) * C + c0, out);
#pragma unroll
    for (int j = 0; j + 1 < W; ++j)
#pragma unroll
      for (int v = 0; v < V; ++v) win[j][v] = win[j + 1][v];
  }
  if (fin && chunk == chunks - 1) {  // the last W − 1 inputs (reaching into init when T < W − 1); exact round trips
#pragma unroll
    for (int j = 0; j + 1 < W; ++j) {
      float v[V];
      in(Tn - (W - 1) + j, v);
      store_vec<T, V>(fin + (static_cast<int64_t>(b) * (W - 1) + j) * C + c0, v);
    }
  }
}

// Grid (rows, column blocks): a block covers up to kSiluCols columns of one row (grid.x up to 2^31 − 1 rows), V
// elements per thread and load. Column blocks keep a decode step's few long rows (batch 1: one row of 5632) on
// several SMs; one block per row took 3.2 µs there, the launch itself ~1.
constexpr int kSiluThreads = 256, kSiluCols = 2048;
template <typename T, int V>
__global__ void __launch_bounds__(kSiluThreads) silu_mul_kernel(RowsArg a, RowsArg b, T* __restrict__ y, int D,
                                                                bool trigger) {
  pdl::trigger_then_wait(trigger);  // before reading what the previous kernel wrote (kernels/pdl.cuh)
  const int64_t r = blockIdx.x;
  const T* ar = static_cast<const T*>(a.p) + a.offset(r);
  const T* br = static_cast<const T*>(b.p) + b.offset(r);
  T* yr = y + r * D;
  const int d1 = min(D, static_cast<int>(blockIdx.y + 1) * kSiluCols);
  for (int d = static_cast<int>(blockIdx.y) * kSiluCols + static_cast<int>(threadIdx.x) * V; d < d1;
       d += kSiluThreads * V) {
    float av[V], bv[V], o[V];
    load_vec<T, V>(ar + d, av);
    load_vec<T, V>(br + d, bv);
#pragma unroll
    for (int v = 0; v < V; ++v) o[v] = detail::silu_times<T>(av[v], bv[v]);
    store_vec<T, V>(yr + d, o);
  }
}

/// The norm kernels' common arguments besides the rows.
struct NormArgs {
  const void* w;
  void* y;
  void* sum;
  int64_t rows;
  int D;
  float eps, w_offset;
};

template <typename T, int G, int V, bool Add>
void launch_norm_v(RowsArg x, RowsArg d, RowsArg z, const NormArgs& n, cudaStream_t s) {
  const T* wp = static_cast<const T*>(n.w);
  if (n.D <= kWarpRowMax) {
    constexpr int kRowsPerBlock = kNormThreads / 32;
    pdl::launch(rms_norm_warp_kernel<T, G, V, Add>, dim3(static_cast<unsigned>((n.rows + kRowsPerBlock - 1) / kRowsPerBlock)),
                dim3(kNormThreads), 0, s, x, d, wp, z, static_cast<T*>(n.y), static_cast<T*>(n.sum), n.rows, n.D,
                n.eps, n.w_offset, pdl::trigger_for(n.rows));
  } else {
    pdl::launch(rms_norm_kernel<T, G, V, Add>, dim3(static_cast<unsigned>(n.rows)), dim3(kNormThreads), 0, s, x, d, wp,
                z, static_cast<T*>(n.y), static_cast<T*>(n.sum), n.D, n.eps, n.w_offset, pdl::trigger_for(n.rows));
  }
}

template <typename T, int V>
void launch_norm_kinds(RowsArg x, RowsArg d, RowsArg z, NormGate gate, const NormArgs& n, cudaStream_t s) {
  if (d.p)
    launch_norm_v<T, 0, V, true>(x, d, z, n, s);  // the add has no gated form (no caller needs one)
  else if (!z.p)
    launch_norm_v<T, 0, V, false>(x, d, z, n, s);
  else if (gate == NormGate::kQwen)
    launch_norm_v<T, 2, V, false>(x, d, z, n, s);
  else
    launch_norm_v<T, 1, V, false>(x, d, z, n, s);
}

template <typename T>
cudaError_t launch_norm(RowsArg x, RowsArg d, RowsArg z, NormGate gate, const NormArgs& n, cudaStream_t s) {
  if (n.rows == 0) return cudaSuccess;
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = rows_aligned16(x, n.rows, n.D) && (!z.p || rows_aligned16(z, n.rows, n.D)) &&
                   (!d.p || (rows_aligned16(d, n.rows, n.D) && al(n.sum))) && al(n.w) && al(n.y);
  vec ? launch_norm_kinds<T, 8>(x, d, z, gate, n, s) : launch_norm_kinds<T, 1>(x, d, z, gate, n, s);
  return cudaGetLastError();
}

}  // namespace

cudaError_t rms_norm_rows(ElemType t, RowsArg x, const void* w, RowsArg z, void* y, int64_t rows, int D, float eps,
                          cudaStream_t s, float w_offset, NormGate gate) {
  if (!x.p || !w || !y || D < 1 || rows < 0 || rows > 0x7fffffff) return cudaErrorInvalidValue;
  const NormArgs n{w, y, nullptr, rows, D, eps, w_offset};
  return t == ElemType::kBF16 ? launch_norm<__nv_bfloat16>(x, RowsArg{}, z, gate, n, s)
                              : launch_norm<__half>(x, RowsArg{}, z, gate, n, s);
}

cudaError_t add_rms_norm_rows(ElemType t, RowsArg x, RowsArg delta, const void* w, void* sum, void* y, int64_t rows,
                              int D, float eps, cudaStream_t s, float w_offset) {
  if (!x.p || !delta.p || !w || !y || !sum || D < 1 || rows < 0 || rows > 0x7fffffff) return cudaErrorInvalidValue;
  const NormArgs n{w, y, sum, rows, D, eps, w_offset};
  return t == ElemType::kBF16 ? launch_norm<__nv_bfloat16>(x, delta, RowsArg{}, NormGate::kFla, n, s)
                              : launch_norm<__half>(x, delta, RowsArg{}, NormGate::kFla, n, s);
}

namespace {

template <typename T, int W>
void launch_conv_step(bool vec, RowsArg x, void* state, const void* w, const void* bias, void* y, int B, int C,
                      bool silu, cudaStream_t s) {
  const auto go = [&](auto v) {
    constexpr int V = decltype(v)::value;
    const dim3 grid(static_cast<unsigned>(B), static_cast<unsigned>((C + V * kStepThreads - 1) / (V * kStepThreads)));
    pdl::launch(conv1d_step_kernel<T, W, V>, grid, dim3(kStepThreads), 0, s, x, static_cast<T*>(state),
                static_cast<const T*>(w), static_cast<const T*>(bias), static_cast<T*>(y), C, silu,
                pdl::trigger_for(B));
  };
  if (vec)
    go(std::integral_constant<int, 8>{});
  else
    go(std::integral_constant<int, 1>{});
}

template <typename T>
cudaError_t launch_conv_step_w(RowsArg x, void* state, const void* w, const void* bias, void* y, int B, int C, int W,
                               bool silu, cudaStream_t s) {
  // 8 channels per thread when x's rows, the contiguous state, y, the weights and C allow 16-byte accesses.
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = rows_aligned16(x, B, C) && al(y) && (W == 1 || al(state)) && al(w) && (!bias || al(bias));
  switch (W) {
    case 1: launch_conv_step<T, 1>(vec, x, state, w, bias, y, B, C, silu, s); break;
    case 2: launch_conv_step<T, 2>(vec, x, state, w, bias, y, B, C, silu, s); break;
    case 3: launch_conv_step<T, 3>(vec, x, state, w, bias, y, B, C, silu, s); break;
    case 4: launch_conv_step<T, 4>(vec, x, state, w, bias, y, B, C, silu, s); break;
    case 5: launch_conv_step<T, 5>(vec, x, state, w, bias, y, B, C, silu, s); break;
    case 6: launch_conv_step<T, 6>(vec, x, state, w, bias, y, B, C, silu, s); break;
    case 7: launch_conv_step<T, 7>(vec, x, state, w, bias, y, B, C, silu, s); break;
    case 8: launch_conv_step<T, 8>(vec, x, state, w, bias, y, B, C, silu, s); break;
    default: return cudaErrorInvalidValue;  // kConvSeqMaxWidth
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t conv1d_step(ElemType t, RowsArg x, void* state, const void* w, const void* bias, void* y, int B, int C,
                        int W, bool silu, cudaStream_t s) {
  if (!x.p || !w || !y || (W > 1 && !state) || B < 0 || C < 1 || W < 1 || W > kConvSeqMaxWidth)
    return cudaErrorInvalidValue;
  if (B == 0) return cudaSuccess;
  return t == ElemType::kBF16 ? launch_conv_step_w<__nv_bfloat16>(x, state, w, bias, y, B, C, W, silu, s)
                              : launch_conv_step_w<__half>(x, state, w, bias, y, B, C, W, silu, s);
}

namespace {

template <typename T, int W, int V>
void launch_conv_seq(RowsArg x, const void* init, const void* w, const void* bias, void* y, void* fin, int B, int Tn,
                     int C, bool silu, cudaStream_t s) {
  const int chunks = Tn > 0 ? (Tn + kSeqChunk - 1) / kSeqChunk : 1;  // one chunk at T = 0 writes the final state
  const dim3 grid(static_cast<unsigned>(static_cast<int64_t>(B) * chunks),
                  static_cast<unsigned>((C + V * kSeqThreads - 1) / (V * kSeqThreads)));
  const bool flat = x.group >= static_cast<int64_t>(B) * Tn;
  conv1d_seq_kernel<T, W, V><<<grid, kSeqThreads, 0, s>>>(x, static_cast<const T*>(init), static_cast<const T*>(w),
                                                          static_cast<const T*>(bias), static_cast<T*>(y),
                                                          static_cast<T*>(fin), Tn, C, chunks, flat, silu);
}

template <typename T, int W>
void launch_conv_seq_v(bool vec, RowsArg x, const void* init, const void* w, const void* bias, void* y, void* fin,
                       int B, int Tn, int C, bool silu, cudaStream_t s) {
  if (vec)
    launch_conv_seq<T, W, 8>(x, init, w, bias, y, fin, B, Tn, C, silu, s);
  else
    launch_conv_seq<T, W, 1>(x, init, w, bias, y, fin, B, Tn, C, silu, s);
}

template <typename T>
cudaError_t launch_conv_seq_w(RowsArg x, const void* init, const void* w, const void* bias, void* y, void* fin, int B,
                              int Tn, int C, int W, bool silu, cudaStream_t s) {
  // 8 channels per thread when every row, the contiguous init / y / final state and C allow 16-byte accesses.
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = rows_aligned16(x, static_cast<int64_t>(B) * Tn, C) && al(y) && (!init || al(init)) &&
                   (!fin || al(fin));
  switch (W) {
    case 1: launch_conv_seq_v<T, 1>(vec, x, init, w, bias, y, fin, B, Tn, C, silu, s); break;
    case 2: launch_conv_seq_v<T, 2>(vec, x, init, w, bias, y, fin, B, Tn, C, silu, s); break;
    case 3: launch_conv_seq_v<T, 3>(vec, x, init, w, bias, y, fin, B, Tn, C, silu, s); break;
    case 4: launch_conv_seq_v<T, 4>(vec, x, init, w, bias, y, fin, B, Tn, C, silu, s); break;
    case 5: launch_conv_seq_v<T, 5>(vec, x, init, w, bias, y, fin, B, Tn, C, silu, s); break;
    case 6: launch_conv_seq_v<T, 6>(vec, x, init, w, bias, y, fin, B, Tn, C, silu, s); break;
    case 7: launch_conv_seq_v<T, 7>(vec, x, init, w, bias, y, fin, B, Tn, C, silu, s); break;
    case 8: launch_conv_seq_v<T, 8>(vec, x, init, w, bias, y, fin, B, Tn, C, silu, s); break;
    default: return cudaErrorInvalidValue;  // kConvSeqMaxWidth
  }
  return cudaGetLastError();
}

template <typename T>
void launch_silu_mul(RowsArg a, RowsArg b, void* y, int64_t rows, int D, cudaStream_t s) {
  const bool vec = rows_aligned16(a, rows, D) && rows_aligned16(b, rows, D) && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((D + kSiluCols - 1) / kSiluCols));
  if (vec)
    pdl::launch(silu_mul_kernel<T, 8>, grid, dim3(kSiluThreads), 0, s, a, b, static_cast<T*>(y), D,
                pdl::trigger_for(rows));
  else
    pdl::launch(silu_mul_kernel<T, 1>, grid, dim3(kSiluThreads), 0, s, a, b, static_cast<T*>(y), D,
                pdl::trigger_for(rows));
}

}  // namespace

cudaError_t conv1d_seq(ElemType t, RowsArg x, const void* init, const void* w, const void* bias, void* y,
                       void* final_state, int B, int T, int C, int W, bool silu, cudaStream_t s) {
  if ((!x.p || !y) && T > 0) return cudaErrorInvalidValue;
  if (!w || B < 0 || T < 0 || C < 1 || W < 1 || W > kConvSeqMaxWidth) return cudaErrorInvalidValue;
  if (final_state && final_state == init && W > 1) return cudaErrorInvalidValue;
  if (B == 0 || (T == 0 && !(final_state && W > 1))) return cudaSuccess;
  if (W == 1) final_state = nullptr;  // [B, 0, C]: nothing to write
  return t == ElemType::kBF16 ? launch_conv_seq_w<__nv_bfloat16>(x, init, w, bias, y, final_state, B, T, C, W, silu, s)
                              : launch_conv_seq_w<__half>(x, init, w, bias, y, final_state, B, T, C, W, silu, s);
}

cudaError_t silu_mul(ElemType t, RowsArg a, RowsArg b, void* y, int64_t rows, int D, cudaStream_t s) {
  if (!a.p || !b.p || !y || rows < 0 || rows > 0x7fffffff || D < 1) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (t == ElemType::kBF16)
    launch_silu_mul<__nv_bfloat16>(a, b, y, rows, D, s);
  else
    launch_silu_mul<__half>(a, b, y, rows, D, s);
  return cudaGetLastError();
}

}  // namespace statecut::cuda
