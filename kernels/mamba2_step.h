/// Mamba-2's row kernels of a decode step (sm_90; bf16 or fp16 activations T, fp32 arithmetic): transformers'
/// Mamba2RMSNorm with the residual stream in fp32 (residual_in_fp32, its default) and its MambaRMSNormGated after the
/// SSM's D skip. Written as LibTorch operations (optimized/models/families/hf_mamba2.cpp) each is 10-14 launches of a
/// few KiB a layer: a Mamba-2 1.3B step at batch 1 was ~1,650 kernels, 4.9x its byte floor (bench/README.md, 30th
/// wave). Same arithmetic in the same order as those operations; results differ from them by the fp32 reduction
/// order of the mean only:
///
///   residual_norm  s[r] = res[r] + delta[r]                    (fp32 add: R = float, LibTorch's fp32 + T promotion;
///                                                              R = T: rounded to T; no delta: s = res)
///                  x = round_T(s);  y[r] = round_T(w * round_T(x * rsqrt(mean_d x^2 + eps)))
///                  (Mamba2RMSNorm: normalise in fp32, cast to T, then the weight in T)
///   gated_norm     u[c] = o[r,c] + x[r,c] * Dskip[c / P]       (fp32; o, x of T: the SSM's output and its D skip)
///                  h[c] = u[c] * silu(z[r,c]);  y[r] = round_T(w * (h * rsqrt(mean_c h^2 + eps)))
///                  (MambaRMSNormGated, gate first, over the whole row of I = H·P channels)
///
/// res, sum, o, y and w are contiguous rows; x and z may be strided rows (RowsArg: slices of the packed projection
/// and conv outputs read in place). Launchers return the launch error (cudaErrorInvalidValue for bad arguments).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/fused_layer_ops.h"

namespace statecut::cuda {

/// res_f32: res and sum are fp32 (else of type t); delta nullptr: none.
cudaError_t mamba2_residual_norm(ElemType t, bool res_f32, const void* res, const void* delta, const void* w,
                                 void* sum, void* y, int64_t rows, int D, float eps, cudaStream_t s);

/// Dskip [I / P] fp32; I % P == 0.
cudaError_t mamba2_gated_norm(ElemType t, const void* o, RowsArg x, const float* Dskip, int P, RowsArg z,
                              const void* w, void* y, int64_t rows, int I, float eps, cudaStream_t s);

}  // namespace statecut::cuda
