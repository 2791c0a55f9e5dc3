/// LibTorch binding of the fused step kernels (kernels/fused_layer_ops.h). Each takes CUDA tensors of one activation
/// type, bf16 or fp16 (fused_layer_ops_apply tells whether a call would be served), whose last dim is contiguous;
/// leading dims may be strided views of at most two levels (rows of a packed projection output, or its heads). Shapes as the
/// LibTorch building blocks they replace (optimized/models/layers_common.h, decode_cache.h):
///   fused_rms_norm(x [..., D], w [D], eps, w_offset)          -> [..., D] contiguous (· (w_offset + w): 1 for Qwen's
///                                                                zero-centred norms)
///   fused_gated_rms_norm(x [..., D], z [..., D], w [D], eps, qwen_gate)  -> [..., D] (qwen_gate: Qwen3.5's roundings)
///   fused_add_rms_norm(x [..., D], delta [..., D], w [D], eps, w_offset) -> (x + delta, rms_norm(x + delta)), both
///                                                                contiguous
///   fused_conv1d_step(x [B,1,C], w [C,1,W], bias [C] or undefined, silu, conv [B,W-1,C] in place) -> [B,1,C]
///   fused_conv1d(x [B,T,C], w, bias, silu, init [B,W-1,C] or undefined, &final or null) -> [B,T,C]
///   fused_silu_mul(a [..., D], b [..., D])                    -> [..., D]
///   fused_gemv(x [..., K] contiguous, w [N, K])                -> x · wᵀ [..., N]  (at most kGemvMaxRows rows of x)
///   fused_gemv_silu_mul(x [..., K], gate_up [2I, K])           -> silu(x · gateᵀ) · (x · upᵀ) [..., I], rounded as the
///                                                                fused_gemv + fused_silu_mul pair
///   fused_add_rms_norm_gemv(x [..., K], delta [..., K] or undefined, nw [K], eps, w_offset, w [N, K], silu_mul)
///                                                             -> (x + delta (x when undefined), fused_gemv or
///                                                                fused_gemv_silu_mul of its norm), one launch, bit for
///                                                                bit fused_add_rms_norm (fused_rms_norm) then the GEMV
#pragma once
#include <ATen/ATen.h>

#include <utility>

#include "kernels/gated_delta.h"

namespace statecut::cuda {

/// True when every defined tensor is CUDA, of the first one's dtype, that dtype bf16 or fp16, and flattenable to
/// rows of at most two stride levels with a contiguous last dim.
bool fused_layer_ops_apply(std::initializer_list<at::Tensor> ts);

/// The kernels' element type of a bf16 or fp16 tensor (the *_apply checks have made sure it is one of them).
ElemType elem_type(const at::Tensor& t);
/// TORCH_CHECK that a launcher returned cudaSuccess: "statecut: WHAT launch failed: <the CUDA error>".
void check_launch(cudaError_t e, const char* what);

struct RowsArg;  // kernels/fused_layer_ops.h
/// t [..., D] as the kernels' rows (RowsArg: one or two stride levels over the leading dims; the last dim contiguous)
/// and their count; TORCH_CHECK fails for any other layout (fused_layer_ops_apply tells beforehand).
RowsArg rows_arg(const at::Tensor& t, int64_t& rows);

/// fused_conv1d keeps the conv window in registers: widths up to this (fla, Mamba-2 and Qwen3.5 use 4).
inline constexpr int64_t kFusedConvMaxWidth = 8;

at::Tensor fused_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps, double w_offset = 0.0);
std::pair<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w,
                                                     double eps, double w_offset = 0.0);
at::Tensor fused_gated_rms_norm(const at::Tensor& x, const at::Tensor& z, const at::Tensor& w, double eps,
                                bool qwen_gate = false);
at::Tensor fused_conv1d_step(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, bool silu,
                             at::Tensor& conv);
/// x [B,T,C] → y [B,T,C], the causal conv continuing from `init` ([B,W-1,C] or undefined: zeros); when final_state
/// is non-null it is set to a new [B,W-1,C] tensor holding the last W-1 inputs.
at::Tensor fused_conv1d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, bool silu,
                        const at::Tensor& init, at::Tensor* final_state);
at::Tensor fused_silu_mul(const at::Tensor& a, const at::Tensor& b);
/// Whether t's data starts on 16 bytes (the kernels' vector loads).
bool aligned16(const at::Tensor& t);
/// The operands of a row kernel's x · wᵀ (the GEMV here, the skinny GEMM of skinny_gemm_torch.h): both defined on
/// one CUDA device in one dtype (which one is the caller's to check), w [N, K] contiguous with 1 <= N, K <= 2^31 - 1
/// and K % 8 == 0, x [..., K] contiguous with 1..max_rows rows, both 16-byte aligned.
bool row_gemm_operands(const at::Tensor& x, const at::Tensor& w, int64_t max_rows);
/// True when fused_gemv serves x · wᵀ: one dtype (bf16/fp16) on one CUDA device, x contiguous with 1..8 rows, w
/// contiguous [N, K], K % 8 == 0, both 16-byte aligned.
bool fused_gemv_apply(const at::Tensor& x, const at::Tensor& w);
/// fused_gemv_apply and one row of x: where the GEMV beats cuBLAS. Measured on the H200 (bench/README.md, 25th wave,
/// whole 1.3B decode steps under graphs): at batch 1 it is the faster (wave 5: 1.373 -> 1.332 ms); from 2 rows on
/// cuBLAS's tensor-core GEMMs tie or win, by 29% at 8 rows (DeltaNet 2.262 -> 1.601 ms), as each weight element then
/// costs the GEMV M fp32 FMAs and M loads of x.
bool fused_gemv_pays(const at::Tensor& x, const at::Tensor& w);
at::Tensor fused_gemv(const at::Tensor& x, const at::Tensor& w);
/// silu_mul of the two row halves of x · gate_upᵀ (gate_up [2I, K]: gate rows then up rows) -> [..., I], one launch;
/// served when fused_gemv_apply(x, gate_up) and gate_up has an even row count.
at::Tensor fused_gemv_silu_mul(const at::Tensor& x, const at::Tensor& gate_up);
/// True when fused_add_rms_norm_gemv serves: fused_gemv_pays(x, w) (one row), delta undefined or contiguous of x's
/// shape and dtype, the norm weight nw contiguous with K elements, every pointer 16-byte aligned, K <= 12,288 (the
/// rows live in the blocks' shared memory), and the environment does not say STATECUT_NORM_GEMV=0 (the switch that
/// lets one benchmark call time both ways).
bool fused_norm_gemv_pays(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& nw, const at::Tensor& w);
std::pair<at::Tensor, at::Tensor> fused_add_rms_norm_gemv(const at::Tensor& x, const at::Tensor& delta,
                                                          const at::Tensor& nw, double eps, double w_offset,
                                                          const at::Tensor& w, bool silu_mul);
/// True when fused_add_rms_norm_gemv_conv serves: fused_norm_gemv_pays(x, delta, nw, w), conv_w [C, 1, 4] contiguous
/// with 1 <= C <= N, conv_b [C] contiguous or undefined, window [1, 3, C] contiguous, all of x's dtype and device, and
/// the environment does not say STATECUT_GEMV_CONV=0 (the switch that lets one benchmark call time both ways).
bool fused_norm_gemv_conv_pays(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& nw, const at::Tensor& w,
                               const at::Tensor& conv_w, const at::Tensor& conv_b, const at::Tensor& window);
/// fused_add_rms_norm_gemv (no silu·mul) whose first C output columns then pass through fused_conv1d_step(·, conv_w,
/// conv_b, silu, window), the window shifted in place: one launch (kernels/fused_layer_ops.h gemv_norm_conv), bit for
/// bit the two.
std::pair<at::Tensor, at::Tensor> fused_add_rms_norm_gemv_conv(const at::Tensor& x, const at::Tensor& delta,
                                                               const at::Tensor& nw, double eps, double w_offset,
                                                               const at::Tensor& w, const at::Tensor& conv_w,
                                                               const at::Tensor& conv_b, bool silu,
                                                               at::Tensor& window);

}  // namespace statecut::cuda
