/// Gated softmax attention of the Qwen3-Next / Qwen3.5 hybrid models (their "full_attention" layers), as transformers'
/// Qwen3NextAttention / Qwen3_5Attention compute it:
///   x W_qᵀ viewed [B, T, H, 2·hd]: per head the first hd channels are q, the next hd the output gate
///   q ← RMSNorm₁₊(q; w_q),  k ← RMSNorm₁₊(x W_kᵀ; w_k)   (per head over hd; zero-centred weight, see below)
///   v = x W_vᵀ                                            (Hkv heads; query head h reads kv head ⌊h / (H/Hkv)⌋)
///   q, k ← RoPE on the first rotary_dim channels (rotary.h)
///   o_h = softmax(q_h K_hᵀ · hd^{−1/2} + causal mask) V_h          (softmax in fp32)
///   y = (o ⊙ sigmoid(gate)) W_oᵀ                                    (gate omitted when output_gate is false)
/// Zero-centred RMSNorm (Gemma style, the model norms and q/k norms of these families):
///   RMSNorm₁₊(x; w) = x · rsqrt(mean(x²) + eps) · (1 + w), computed in fp32 (f64 for f64) and cast to x's dtype.
/// Shapes: x [B, T, hidden]; W_q [H·hd·(2 if gated), hidden], W_k, W_v [Hkv·hd, hidden], W_o [hidden, H·hd],
/// w_q, w_k [hd]; optional biases (attention_bias). Output [B, T, hidden] in x's dtype.
#pragma once
#include <torch/torch.h>

#include <cstdint>

#include "optimized/models/decode_cache.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/rotary.h"

namespace statecut {

struct FullAttentionConfig {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double eps = 1e-6;         ///< q/k norm epsilon (rms_norm_eps)
  bool output_gate = true;   ///< q_proj carries a sigmoid output gate per head (attn_output_gate)
};

struct FullAttentionWeights {
  torch::Tensor q_proj, k_proj, v_proj, o_proj;  ///< [out, in]
  torch::Tensor q_norm, k_norm;                  ///< [head_dim]
  torch::Tensor q_bias, k_bias, v_bias, o_bias;  ///< undefined unless attention_bias
};

/// Causal gated attention over the whole sequence (positions 0 … T−1); cos/sin from rotary.cos_sin(T, 0, …).
torch::Tensor full_attention(const torch::Tensor& x, const FullAttentionWeights& w, const FullAttentionConfig& cfg,
                             const RotaryEmbedding& rotary, const torch::Tensor& cos, const torch::Tensor& sin);

/// What every softmax layer of one forward_cached call shares: the positions of its T tokens (cache.position … +T−1,
/// read from the device position, so a captured step reads each replay's), their RoPE cos/sin, and the visibility mask
/// over the KV buffer (made by the first layer for the buffer's capacity, reused by the others: they grow alike).
struct AttentionStep {
  torch::Tensor positions, cos, sin;  ///< [T] int64; [T, rotary_dim] in the activation dtype
  torch::Tensor visible;              ///< [r·T, capacity] bool: slot j visible to the token at position p iff j <= p
};
AttentionStep attention_step(DecodeCache& cache, int64_t T, const RotaryEmbedding& rotary, torch::Dtype dtype,
                             torch::Device device);

/// Incremental decoding: x's T tokens (step.positions) attend to the cached keys/values of the earlier positions plus
/// themselves (causally). `layer` holds the KV buffers (decode_cache.h: [B, Hkv, capacity, hd], k after q/k norm and
/// RoPE, v as projected), which receive the T new positions in place. The attention runs over the whole buffer with
/// the unfilled slots masked: exp(−∞) = 0, so it equals the attention over the filled part. bf16/fp16 on CUDA
/// (LibTorch ≥ 2): scaled_dot_product_attention (fp32 scores and softmax inside the kernel, the buffer read once,
/// the query heads of one kv head grouped as rows); elsewhere the same arithmetic as full_attention. With an empty
/// cache this is full_attention.
torch::Tensor full_attention_cached(const torch::Tensor& x, const FullAttentionWeights& w,
                                    const FullAttentionConfig& cfg, const RotaryEmbedding& rotary,
                                    AttentionStep& step, DecodeCache& cache, LayerDecodeState& layer);

}  // namespace statecut
