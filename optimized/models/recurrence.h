/// Batched recurrences used by every family: LibTorch on CPU and for fp32/f64 activations, the statecut::cuda kernels
/// (kernels/gated_delta.h) on CUDA for bf16/fp16 activations through delta_rule_forward (recurrence_cuda.cpp).
///
/// Per batch row b and value head h (key head hk = h / (Hv/Hk): grouped values share q/k), state S ∈ R^{dk×dv}:
///   gated delta rule   S_t = exp(g_t) (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ,  o_t = S_tᵀ (scale · q_t)
///                      (g undefined: plain delta rule, exp(g_t) = 1)
///   gated linear attn  S_t = exp(g_t) S_{t−1} + k_t v_tᵀ,                          o_t = S_tᵀ (scale · q_t)
///                      (Mamba-2: k = B, q = C, v = dt·x, g = dt·A, scale = 1)
/// Shapes: q, k [B,T,Hk,dk] (the delta rule expects them already L2-normalised), v [B,T,Hv,dv], beta, g [B,T,Hv],
/// initial_state [B,Hv,dk,dv] or undefined (zeros). Output o [B,T,Hv,dv] in the compute dtype.
/// Compute dtype: fp32, or f64 when v is f64. final_state (if non-null) receives [B,Hv,dk,dv] in the compute dtype.
///
/// Recurrent mode loops over t. Chunk mode is the WY/UT form with chunk C = 64 (as fla's chunk_gated_delta_rule):
/// inside a chunk with cumulative log gate G, A = (I + strict_lower(diag(β) K Kᵀ ⊙ D))⁻¹ with D_ij = exp(G_i − G_j),
/// computed as exp(g_{j+1} + ... + g_i) (segment sums: a difference of large cumulative sums loses the weak steps),
/// u = A (β ⊙ V), w = A (β ⊙ exp(G) ⊙ K); then per chunk v_new = u − w S,
/// O = (Q ⊙ exp(G)) S + tril_incl(Q Kᵀ ⊙ D) v_new, S ← exp(G_last) S + (K ⊙ exp(G_last − G))ᵀ v_new.
#pragma once
#include <torch/torch.h>

#include <initializer_list>

#include "optimized/models/model.h"

namespace statecut {

constexpr int64_t kRecurrenceChunk = 64;

torch::Tensor gated_delta_rule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& beta, const torch::Tensor& g, double scale,
                               const torch::Tensor& initial_state, RecurrenceMode mode, torch::Tensor* final_state);

torch::Tensor gated_linear_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const torch::Tensor& g, double scale, const torch::Tensor& initial_state,
                                     RecurrenceMode mode, torch::Tensor* final_state);

/// The (gated) delta rule as the families call it: q, k are the raw per-head inputs (before any L2 norm) in the
/// activation dtype, v [B,T,Hv,dv] in the activation dtype, beta/g [B,T,Hv] fp32 (g undefined: plain delta rule),
/// l2norm_qk: normalise q and k first (l2_normalize, eps 1e-6). No initial state. Returns o [B,T,Hv,dv] in fp32/f64
/// (LibTorch path) or in the activation dtype (kernel path); callers cast. final_state: [B,Hv,dk,dv] key-major fp32.
/// Dispatch: the CUDA kernels (gated_delta_chunk for mode Chunk, gated_delta_recurrent for Recurrent; the L2 norm
/// fused as use_qk_l2norm_in_kernel — the same x·rsqrt(Σx²+1e-6) in fp32) run when the build has them
/// (STATECUT_WITH_CUDA_KERNELS), v is on a CUDA device, q/k/v are all bf16 or all fp16 (the kernels take no fp32
/// or f64 inputs) and dk, dv ≤ 256 with dv % 4 == 0 (the kernels' limits). Everything else — CPU, fp32, f64, larger
/// heads — runs l2_normalize + gated_delta_rule above.
/// Accuracy of the kernel path (H200, every fixture, tests/gpu/golden_models_cuda.cpp): final state vs an f64 loop on
/// the same bf16 inputs ≤ 4.8e-7 (recurrent kernel, fp32) and ≤ 3.4e-4 (chunk kernel, TF32 operands).
torch::Tensor delta_rule_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& beta, const torch::Tensor& g, double scale, bool l2norm_qk,
                                 RecurrenceMode mode, torch::Tensor* final_state);

/// Gated linear attention as Mamba-2 calls it: S_t = exp(g_t) S_{t−1} + b_t k_t v_tᵀ, o_t = S_tᵀ (scale · q_t), with
/// b = value_scale [B,T,Hv] (undefined: 1) scaling each token's value (Mamba-2: k = B, q = C, v = x, b = dt,
/// g = dt·A). q, k, v as the model has them (activation dtype), g [B,T,Hv], initial_state [B,Hv,dk,dv] or undefined.
/// Dispatch: under delta_rule_uses_cuda_kernels' conditions the kernels without their delta term (gated_delta_chunk
/// for mode Chunk, gated_delta_recurrent for Recurrent; b and g in fp32, o in v's dtype, the value scaled in fp32
/// inside the kernel); otherwise gated_linear_attention on q, k and b·v in the compute dtype. final_state (if
/// non-null): [B,Hv,dk,dv] key-major, fp32 on the kernel path.
torch::Tensor linear_attention_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& value_scale, const torch::Tensor& g, double scale,
                                       const torch::Tensor& initial_state, RecurrenceMode mode,
                                       torch::Tensor* final_state);

/// True when delta_rule_forward would run these inputs through the CUDA kernels (tests assert the path they measure):
/// CUDA bf16/fp16 q, k, v of supported sizes that autograd does not record, nor any of `other_inputs` (beta, g, the
/// gate's inputs): the kernels have no backward, so a training forward runs the LibTorch recurrences.
bool delta_rule_uses_cuda_kernels(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  std::initializer_list<torch::Tensor> other_inputs = {});
/// Whether this build holds the CUDA kernels (kernels/) at all.
bool cuda_kernels_built();

}  // namespace statecut
