/// Fused row and elementwise kernels of a model step (sm_90; bf16 or fp16 activations, fp32 arithmetic). At batch 1 a
/// decode step is ~70 LibTorch launches per layer, each moving a few KiB: the step is launch-bound (issue 14: 4.3 ms
/// for a 1.3B DeltaNet whose bytes take 0.65 ms). Each kernel here replaces 5-12 of them with the same arithmetic in
/// the same order (optimized/models/layers_common.h states the math), so results agree with the LibTorch path to
/// fp32 reduction order before the final rounding to the activation type:
///
///   rms_norm      y[r] = (x[r] * rsqrt(mean_d x[r]^2 + eps)) * (w_offset + w)             rows x D
///                 (w_offset 0: fla, Mamba-2; 1: the zero-centred norms of Qwen3.5, x·rsqrt·(1 + w) in fp32)
///   add_rms_norm  s[r] = round(x[r] + delta[r]);  y[r] = rms_norm(s[r])   (a residual add and the next layer's
///                 norm in one launch: s is LibTorch's bf16/fp16 `x + delta`, the norm reads the rounded s)
///   gated (z)     y[r] = ((x[r] * rsqrt(mean_d x[r]^2 + eps)) * w * z[r]) * sigmoid(z[r])  (fla FusedRMSNormGated)
///   Qwen gated    y[r] = round(round(w * round(x[r] * rsqrt(...))) * silu(z[r]))   (transformers' Qwen3_5RMSNormGated)
///   conv1d_step   y[b,c] = act(sum_{j<W} w[c,j] win[b,j,c] + bias[c]),  win = [state[b,0..W-2,c], x[b,c]];
///                 state[b,j,c] <- win[b,j+1,c] (in place: one thread owns 8 channels or one)   act = SiLU or identity
///   conv1d_seq    the same over T tokens (prefill and whole-sequence forward; LibTorch: fp32 copies + cuDNN)
///   silu_mul      y = round(round(silu(a)) * b)   (LibTorch's silu(a) * b in the activation type: two roundings)
///   gemv          y[m, n] = round(sum_k x[m, k] w[n, k])   (x M x K, w N x K, y M x N contiguous; M <= 8; the model
///                 serves one row with it, a batch-1 decode step where cuBLAS left a third of the bandwidth unused)
///   gemv_silu_mul y[m, n] = silu_mul(gemv(x, w)[m, n], gemv(x, w)[m, N + n])   (w 2N x K: a packed gate|up)
///   gemv_norm     (s, y) = add_rms_norm(x, delta) then gemv or gemv_silu_mul of y (delta null: rms_norm(x)), with
///                 every block of the GEMV forming the normalised rows itself by the norm kernels' code (bit for bit
///                 their output): a decode step's residual add, next norm and first projection in one launch
///   gemv_norm_conv one row of gemv_norm whose columns n < C then pass through conv1d_step of their channel (W = 4):
///                 a decode step's residual add, norm, packed q|k|v|… projection and short conv in one launch
///
/// Rows of x, z, a, b may be strided (RowsArg: up to two levels; the last dim is contiguous), so slices of one packed
/// projection output are read in place; y, the weights and the conv state are contiguous. Pointers of the
/// activation type ElemType (kernels/gated_delta.h); weights in the same type. Launchers return the launch error.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/gated_delta.h"

namespace statecut::cuda {

/// Row r starts at p + (r / group) · group_stride + (r % group) · row_stride (elements): rows of a packed output, or
/// heads [B, T, H, d] of a packed output (group = H).
struct RowsArg {
  const void* p = nullptr;
  int64_t row_stride = 0;
  int64_t group = 1 << 30, group_stride = 0;
  __host__ __device__ int64_t offset(int64_t r) const { return (r / group) * group_stride + (r % group) * row_stride; }
};

/// Every one of `rows` rows of 16-bit elements starts 16-byte aligned and D is a multiple of 8: the kernels' 8-channel
/// (16-byte) paths may be used.
inline bool rows_aligned16(const RowsArg& a, int64_t rows, int D) {
  return reinterpret_cast<uintptr_t>(a.p) % 16 == 0 && a.row_stride % 8 == 0 &&
         (a.group >= rows || a.group_stride % 8 == 0) && D % 8 == 0;
}

/// How the gate z of a gated norm enters (header table): fla's FusedRMSNormGated or Qwen3.5's roundings.
enum class NormGate { kFla, kQwen };

cudaError_t rms_norm_rows(ElemType t, RowsArg x, const void* w, RowsArg z, void* y, int64_t rows, int D, float eps,
                          cudaStream_t s, float w_offset = 0.f, NormGate gate = NormGate::kFla);

/// sum, y: contiguous rows x D.
cudaError_t add_rms_norm_rows(ElemType t, RowsArg x, RowsArg delta, const void* w, void* sum, void* y, int64_t rows,
                              int D, float eps, cudaStream_t s, float w_offset = 0.f);

/// W <= kConvSeqMaxWidth (below; else cudaErrorInvalidValue: the binding's callers take LibTorch's path).
cudaError_t conv1d_step(ElemType t, RowsArg x, void* state, const void* w, const void* bias, void* y, int B, int C,
                        int W, bool silu, cudaStream_t s);

/// The whole-sequence conv of T tokens per sequence (x rows b·T + t) continuing from `init` ([B, W−1, C]; nullptr:
/// zeros): y[b,t,c] = act(sum_j w[c,j] in[b, t−W+1+j, c] + bias[c]), in[b, s<0] = init[b, W−1+s]; y [B·T, C]
/// contiguous. final_state ([B, W−1, C], nullptr: not written; must not alias init) gets the last W−1 inputs.
/// W > kConvSeqMaxWidth: cudaErrorInvalidValue (the binding then takes LibTorch's path).
constexpr int kConvSeqMaxWidth = 8;  ///< conv1d_seq and conv1d_step keep the window in registers: W <= 8 (fla, Mamba, Qwen: 4)

cudaError_t conv1d_seq(ElemType t, RowsArg x, const void* init, const void* w, const void* bias, void* y,
                       void* final_state, int B, int T, int C, int W, bool silu, cudaStream_t s);

cudaError_t silu_mul(ElemType t, RowsArg a, RowsArg b, void* y, int64_t rows, int D, cudaStream_t s);

/// K % 8 == 0 and x, w 16-byte aligned (else cudaErrorInvalidValue: the caller keeps cuBLAS); fp32 sums over k.
/// kernels/gemv.cu.
constexpr int kGemvMaxRows = 8;
cudaError_t gemv(ElemType t, const void* x, const void* w, void* y, int M, int N, int K, cudaStream_t s);
/// A gated MLP's gate|up GEMV and silu_mul in one launch, bit-identical to the two: w [2N, K] holds the gate rows then
/// the up rows (pack_rows), y [M, N] = silu_mul(gemv(x, w[:N]), gemv(x, w[N:])). Same conditions as gemv.
cudaError_t gemv_silu_mul(ElemType t, const void* x, const void* w, void* y, int M, int N, int K, cudaStream_t s);

/// The norm gemv_norm forms before its GEMV: w the norm weight [K]; delta (null: no add) and sum [M, K] contiguous.
struct GemvNorm {
  const void* delta = nullptr;
  const void* w = nullptr;
  void* sum = nullptr;
  float eps = 0.f, w_offset = 0.f;
};
/// gemv (silu_mul: gemv_silu_mul) of the rows norm makes of x [M, K] (contiguous): sum <- x + delta rounded, y <- the
/// GEMV of rms_norm(sum) (or of rms_norm(x) without delta), one launch. The conditions of gemv, plus every pointer
/// 16-byte aligned and M·K ≤ 12,288 when adding (24,576 when not: the rows live in shared memory); else
/// cudaErrorInvalidValue (the caller keeps the two launches). x and delta must not alias sum.
constexpr int kGemvNormMaxK = 12288;  ///< one row's K under which gemv_norm always fits (adding)
cudaError_t gemv_norm(ElemType t, const void* x, const GemvNorm& norm, const void* w, void* y, int M, int N, int K,
                      bool silu_mul, cudaStream_t s);

/// The conv step gemv_norm_conv applies to the first C columns: state [1, W − 1, C] contiguous (shifted in place),
/// w [C, W] contiguous, bias [C] or null, SiLU or identity (conv1d_step's arguments for one row of C channels).
struct GemvConv {
  void* state = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  int C = 0, W = 0;
  bool silu = true;
};
constexpr int kGemvConvWidth = 4;  ///< the one width gemv_norm_conv takes (fla, Mamba-2, Qwen3.5)
/// gemv_norm of one row (no silu·mul) whose columns n < conv.C leave through conv1d_step: y[n] = act(sum_j w[n, j]
/// win[j, n] + bias[n]) with win = [state[0..W−2, n], round(gemv)[n]], the state shifted; bit for bit gemv_norm then
/// conv1d_step over y[:, :C] (the same fma chain on the same rounded input). The conditions of gemv_norm at M = 1,
/// plus W = kGemvConvWidth and 1 ≤ C ≤ N; else cudaErrorInvalidValue. The state must not alias x, y or w.
cudaError_t gemv_norm_conv(ElemType t, const void* x, const GemvNorm& norm, const GemvConv& conv, const void* w,
                           void* y, int N, int K, cudaStream_t s);

}  // namespace statecut::cuda
