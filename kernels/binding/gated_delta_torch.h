/// LibTorch binding of the statecut::cuda gated delta rule kernels (kernels/gated_delta.h), and their
/// TORCH_LIBRARY registration: after torch.ops.load_library("libstatecut_cuda_torch.so") Python calls
///   torch.ops.statecut.gated_delta_rule_chunk(q, k, v, g, beta, scale, initial_state, output_final_state,
///       cu_seqlens, use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log, dt_bias, use_beta_sigmoid_in_kernel,
///       state_v_first) -> (o, final_state)
///   torch.ops.statecut.gated_delta_rule_recurrent(<same>) -> (o, final_state)
///   torch.ops.statecut.gated_delta_rule_decode_(q, k, v, g, beta, scale, state, cu_seqlens, <flags>) -> o
///       (state updated in place)
/// Shapes as fla: q, k [B,T,H,K]; v [B,T,HV,V] (bf16 or fp16, same dtype); g, beta [B,T,HV] (any float dtype);
/// A_log, dt_bias [HV]; states fp32 [N,HV,K,V] or, with state_v_first, [N,HV,V,K]; cu_seqlens int [N+1] with B = 1.
/// scale <= 0 means K^-1/2. final_state is an empty tensor when output_final_state is false.
#pragma once
#include <ATen/ATen.h>
#include <c10/util/Optional.h>

#include <tuple>

namespace statecut::cuda {

using OptTensor = c10::optional<at::Tensor>;

std::tuple<at::Tensor, at::Tensor> gated_delta_rule_chunk(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const OptTensor& g, const OptTensor& beta,
    double scale, const OptTensor& initial_state, bool output_final_state, const OptTensor& cu_seqlens,
    bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, const OptTensor& A_log, const OptTensor& dt_bias,
    bool use_beta_sigmoid_in_kernel, bool state_v_first);

std::tuple<at::Tensor, at::Tensor> gated_delta_rule_recurrent(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const OptTensor& g, const OptTensor& beta,
    double scale, const OptTensor& initial_state, bool output_final_state, const OptTensor& cu_seqlens,
    bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, const OptTensor& A_log, const OptTensor& dt_bias,
    bool use_beta_sigmoid_in_kernel, bool state_v_first);

/// Gated linear attention over whole sequences (the kernels without their delta term, kernels/gated_delta.h):
///   S_t = exp(g_t) S_{t-1} + beta_t k_t v_t^T,   o_t = S_t^T (scale q_t)
/// on gated_delta_chunk (chunk) or gated_delta_recurrent, with gated_delta_rule_chunk's shapes and no fused
/// transforms: q, k as given (no L2 norm), g the log decay and beta the value scale as given (Mamba-2's SSD: k = B,
/// q = C, beta = dt, g = dt A; beta absent = 1). C++ only, not in the registered schema.
std::tuple<at::Tensor, at::Tensor> gated_linear_attention_rule(
    bool chunk, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const OptTensor& g,
    const OptTensor& beta, double scale, const OptTensor& initial_state, bool output_final_state,
    const OptTensor& cu_seqlens, bool state_v_first);

/// Decode / few-step update: `state` (fp32 or bf16, contiguous, CUDA) is read and overwritten in place; a bf16
/// state is widened to fp32 in registers and rounded once at the end of the call. Inputs are read in place (no copy)
/// when their tokens lie one stride apart (slices of one packed projection output; q, k and v 8-byte aligned with a
/// stride a multiple of 4 for the kernel's 4-element loads), g and beta also when they are of q's dtype (no
/// conversion), at any alignment and stride (read one element at a time). The in-kernel sigmoid of beta is the same
/// (expf) whether beta comes as fp32 or in q's dtype. round_beta: beta (after the sigmoid) is rounded to q's dtype,
/// as a model computing the sigmoid in that dtype (fla DeltaNet) has it. delta = false: gated linear attention,
/// S = exp(g) S + beta k v^T; beta_dt (with use_gate_in_kernel; beta unused): beta = softplus(g + dt_bias), Mamba-2's
/// dt from its raw input (kernels/gated_delta.h; both C++ only, not in the registered schema).
/// A decode step's short conv before the kernel and its output norm after it, done by the kernel (the fold of
/// kernels/gated_delta.h, GatedDeltaArgs::conv_state): q, k, v are then the raw projection outputs and the op returns
/// the normalised output, bit for bit fused_conv1d_step (SiLU) → the decode → fused_rms_norm / fused_gated_rms_norm
/// (kernels/binding/fused_layer_ops_torch.h). Conditions (else TORCH_CHECK fails; decode_fold_fits tells beforehand):
/// one token, no cu_seqlens, [K,V] state, H = HV, V ≤ 128 with V % 8 == 0, conv width 4; every tensor on q's
/// device, of q's dtype, contiguous but z.
struct DecodeFold {
  at::Tensor conv_state;  ///< [B, W−1, C], shifted in place
  at::Tensor conv_w;      ///< [C, 1, W] or [C, W]
  at::Tensor conv_b;      ///< [C], or undefined
  int64_t q0 = 0, k0 = 0, v0 = 0;  ///< the first channel of q, k and v in C (a stacked q | k | v window: 0, H·K, 2·H·K)
  at::Tensor norm_w;      ///< [V]
  double norm_eps = 1e-6;
  at::Tensor z;           ///< fla's gate [B, 1, HV, V] (last dim contiguous, tokens one stride apart), or undefined
};
/// Whether a layer of these sizes can take the fold (the shape conditions above; dtypes and devices are the caller's).
bool decode_fold_fits(int64_t H, int64_t HV, int64_t V, int64_t conv_width);
/// Whether the fold pays for N sequences of HV value heads on the current device: when its grid (one block a head and
/// sequence) fits in one wave, at most one block an SM — the decode kernel is then bound by latency, and two launches
/// fewer a layer save more than the block's added conv and barrier cost. Measured on the H200 (bench/README.md, 37th
/// wave, DeltaNet 1.3B, 16 heads): batch 1 1.136 -> 1.072 ms a step, batch 8 1.628 -> 1.547, its 50% prune 1.115 ->
/// 1.031 and 1.470 -> 1.381; at batch 64 and 256 (8 and 31 waves, bound by the state's bytes) the full model 2-11%
/// slower.
bool decode_fold_pays(int64_t N, int64_t HV);

at::Tensor gated_delta_rule_decode_(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const OptTensor& g, const OptTensor& beta, double scale, at::Tensor& state,
                                    const OptTensor& cu_seqlens, bool use_qk_l2norm_in_kernel,
                                    bool use_gate_in_kernel, const OptTensor& A_log, const OptTensor& dt_bias,
                                    bool use_beta_sigmoid_in_kernel, bool state_v_first, bool round_beta = false,
                                    bool delta = true, bool beta_dt = false, const DecodeFold* fold = nullptr);

}  // namespace statecut::cuda
