/// Backward of the causal depthwise conv over whole sequences (training; the forward is conv1d_seq of
/// kernels/fused_layer_ops.h with no initial state). Per sequence b, token t < T, channel c < C, width W <= 8:
///
///   s[b,t,c]  = bias[c] + sum_{j<W} w[c,j] x[b, t−W+1+j, c]      (x[b, t<0] = 0; bias 0 when absent)
///   y[b,t,c]  = act(s),  act = SiLU (s·σ(s)) or identity
///   ds        = dy · act'(s),  SiLU'(s) = σ(s) (1 + s (1 − σ(s)))   (s recomputed from x in fp32, never stored)
///   dx[b,t,c] = sum_{j<W, t+W−1−j < T} w[c,j] ds[b, t+W−1−j, c]   (one rounding of an fp32 sum to the activation type)
///   dw[c,j]   = sum_{b,t} ds[b,t,c] x[b, t−W+1+j, c]              (fp32)
///   db[c]     = sum_{b,t} ds[b,t,c]                               (fp32)
///
/// x [B·T rows, C] may be strided rows (RowsArg, as conv1d_seq reads it: the forward's saved input is used in place);
/// dy and dx are contiguous [B·T, C]; w [C, W] and bias [C] (nullptr: none) contiguous, all of the activation type
/// ElemType. dw [C, W] and db [C] (nullptr: not written) are fp32.
///
/// Deterministic: no float atomics. Each block of the first kernel (a chunk of kConvBwdChunk tokens of one sequence)
/// writes its partial dw, db to `workspace` [P, C, W+1] fp32, P = B·ceil(T / kConvBwdChunk); a second kernel sums
/// the P partials of each (c, j) in a fixed order. Same inputs, same launch: the same bits.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/fused_layer_ops.h"

namespace statecut::cuda {

constexpr int kConvBwdChunk = 32;  ///< tokens per thread (as conv1d_seq)

/// Floats of the workspace conv1d_backward needs: B · ceil(T / kConvBwdChunk) · C · (W + 1).
inline int64_t conv1d_backward_workspace(int B, int T, int C, int W) {
  return static_cast<int64_t>(B) * ((T + kConvBwdChunk - 1) / kConvBwdChunk) * C * (W + 1);
}

/// W in 1..kConvSeqMaxWidth, B, T >= 0, C >= 1 (else cudaErrorInvalidValue). B·T = 0: dw, db are zeros.
cudaError_t conv1d_backward(ElemType t, RowsArg x, const void* w, const void* bias, const void* dy, void* dx,
                            float* dw, float* db, float* workspace, int B, int T, int C, int W, bool silu,
                            cudaStream_t s);

}  // namespace statecut::cuda
