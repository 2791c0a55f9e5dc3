/// transformers' Mamba2ForCausalLM (model_type "mamba2"), forward as transformers' torch path computes it.
///
/// Block i (pre-norm, residual kept in fp32 when residual_in_fp32):
///   x = RMSNorm(h; w_i, eps)                          (fp32, cast back, then · w like transformers)
///   [z | xBC | dt] = x W_inᵀ                          W_in rows: z (I) | x (I) | B (G·N) | C (G·N) | dt (H)
///   xBC ← SiLU(causal depthwise conv_W(xBC) + bias)   conv over x|B|C only; split x [H,P], B, C [G,N]
///   dt ← clamp(softplus(dt + dt_bias), time_step_limit),   A = −exp(A_log)
///   per head h (group g = ⌊h / (H/G)⌋): S_t = exp(dt_t A_h) S_{t−1} + B_{g,t} (dt_t x_{h,t})ᵀ,
///                                       y_{h,t} = S_tᵀ C_{g,t} + D_h x_{h,t}          (S [N, P], key-major)
///   y ← RMSNorm(y ⊙ SiLU(z); w_norm, eps)             gated norm: gate FIRST, then the RMS over all I channels
///                                                     (transformers ignores n_groups here; mamba_ssm normalises per
///                                                     group of I/G — identical when n_groups = 1)
///   h ← h + y W_outᵀ
/// Logits = norm_f(h) W_lmᵀ (W_lm = embeddings when tie_word_embeddings).
/// hidden_states, as transformers returns them: the residual stream after each block, then norm_f of the last one
/// (num_layers + 1 entries; the embedding output is NOT among them).
/// Decode (forward_cached): the residual add travels to the next block's norm (one kernel with it on CUDA), and a step
/// without a dt clamp forms dt and g = dt·A inside the decode kernel and the D skip with the gated norm in one kernel
/// (kernels/mamba2_step.h; the same operations in LibTorch elsewhere). The SSD of a prompt or a whole sequence in
/// bf16/fp16 on CUDA runs the chunk kernel without its delta term (linear_attention_forward, recurrence.h).
/// As linear attention: key = B, query = C, value = dt·x, log decay g = dt·A, scale 1, plus the D skip (DESIGN.md §3);
/// LayerBoundary gives q = C, k = B [B,T,G,N], v = x [B,T,H,P], g = dt·A [B,T,H], final_state [B,H,N,P].
#pragma once
#include <torch/torch.h>

#include "optimized/models/model.h"

namespace statecut {

/// HF Mamba2Config's default of n_groups (8, Codestral's), which a config without the key gets (also read by
/// prunable_layers_from_config).
inline constexpr int64_t kMamba2DefaultGroups = 8;

/// Registers "mamba2" with the model registry.
void register_hf_mamba2();

/// The SSM of one Mamba-2 layer on the conv outputs (no projections, no norm):
///   x [B,T,H,P], Bm, Cm [B,T,G,N] (H % G == 0), dt [B,T,H] (after softplus and clamp), A, D [H].
/// Returns y [B,T,H,P] in the compute dtype (fp32, f64 for f64 x); final_state (if non-null) [B,H,N,P];
/// log_decay (if non-null) g = dt·A [B,T,H]. carried_state (if non-null, incremental decoding): the recurrence starts
/// from *carried_state [B,H,N,P] (undefined: zeros) and leaves its final state there (recurrence_cached.h).
torch::Tensor mamba2_ssm(const torch::Tensor& x, const torch::Tensor& Bm, const torch::Tensor& Cm,
                         const torch::Tensor& dt, const torch::Tensor& A, const torch::Tensor& D, RecurrenceMode mode,
                         torch::Tensor* final_state = nullptr, torch::Tensor* log_decay = nullptr,
                         torch::Tensor* carried_state = nullptr);

/// dt [B,T,H] (after softplus and clamp, fp32) of block `layer` recovered from its boundary as g / A, with
/// A = −exp(A_log) from the model's parameters: the boundary keeps v = x and g = dt·A (model.h), so the value dt·x of
/// the SSD as linear attention is bd.v · dt (to a rounding of g). Throws std::runtime_error naming the missing
/// tensor when `model` has no backbone.layers.<layer>.mixer.A_log.
torch::Tensor mamba2_boundary_dt(CausalLM& model, int layer, const LayerBoundary& bd);

}  // namespace statecut
