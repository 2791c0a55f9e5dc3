/// Batched LibTorch recurrences used by every family on CPU (and on CUDA until the kernels land).
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
/// Recurrent mode loops over t. Chunk mode is the WY/UT form with chunk C = 64 (notes/anchor-fla.md §2.1): inside a
/// chunk with cumulative log gate G, A = (I + strict_lower(diag(β) K Kᵀ ⊙ D))⁻¹ with D_ij = exp(G_i − G_j),
/// u = A (β ⊙ V), w = A (β ⊙ exp(G) ⊙ K); then per chunk v_new = u − w S,
/// O = (Q ⊙ exp(G)) S + tril_incl(Q Kᵀ ⊙ D) v_new, S ← exp(G_last) S + (K ⊙ exp(G_last − G))ᵀ v_new.
#pragma once
#include <torch/torch.h>

#include "optimized/model.h"

namespace statecut {

constexpr int64_t kRecurrenceChunk = 64;

torch::Tensor gated_delta_rule(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& beta, const torch::Tensor& g, double scale,
                               const torch::Tensor& initial_state, RecurrenceMode mode, torch::Tensor* final_state);

torch::Tensor gated_linear_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const torch::Tensor& g, double scale, const torch::Tensor& initial_state,
                                     RecurrenceMode mode, torch::Tensor* final_state);

}  // namespace statecut
