/// transformers' Qwen3.5 text model (model_type "qwen3_5_text"; "qwen3_5" reads its nested text_config) and the
/// Qwen3-Next layout (hf_qwen3_next.h): a hybrid of Gated DeltaNet ("linear_attention") and gated softmax attention
/// ("full_attention", full_attention.h) layers, each followed by a SwiGLU MLP, as transformers' torch path computes it.
///
/// Decoder layer i (all model norms are zero-centred: RMSNorm₁₊(x; w) = x·rsqrt(mean(x²)+eps)·(1 + w)):
///   h ← h + Mixer_i(RMSNorm₁₊(h; input_layernorm)),   h ← h + MLP(RMSNorm₁₊(h; post_attention_layernorm))
/// Linear-attention mixer (Hk key heads × dk, Hv value heads × dv, r = Hv/Hk; value head j reads key head ⌊j/r⌋):
///   qwen3_5 : [q | k | v] = x W_qkvᵀ (q, k: all Hk heads contiguous, v: all Hv heads), z = x W_zᵀ, b = x W_bᵀ, a = x W_aᵀ
///   qwen3_next: x W_qkvzᵀ viewed [Hk, 2dk + 2r·dv] = per key head [q | k | v (r heads) | z (r heads)];
///             x W_baᵀ viewed [Hk, 2r] = per key head [b (r) | a (r)]; then q|k|v concatenated as above
///   [q | k | v] ← SiLU(causal depthwise conv(q | k | v))     (no bias)
///   β = sigmoid(b),  g = −exp(A_log)·softplus(a + dt_bias)   (fp32)
///   o = gated delta rule(L2(q), L2(k), v, β, g, scale dk^{−1/2})   (recurrence.h)
///   o ← RMSNorm(o; w_norm) · SiLU(z)   per value head over dv: norm first, weight w (NOT 1 + w), then the gate
///   y = o W_outᵀ
/// Logits = RMSNorm₁₊(h; model.norm) W_lmᵀ.
/// hidden_states, as transformers returns them: the embedding output, the residual stream after layers 0 … L−2, and
/// the FINAL-NORMED output of the last layer (num_layers + 1 entries; lm_head of the last entry gives the logits).
/// LayerBoundary of a linear layer: attn_in = input_layernorm output, q, k before the L2 norm [B,T,Hk,dk], v, β, g,
/// final_state [B,Hv,dk,dv]. prunable_layers(): qwen3_5: the q rows start at 0 and the k rows at Hk·dk in
/// in_proj_qkv; qwen3_next: at 0 and dk in in_proj_qkvz, head h's rows a stride 2dk + 2r·dv further; conv1d's channels
/// are [q | k | v] (offsets 0 and Hk·dk) in both.
#pragma once
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <memory>

#include "optimized/models/model.h"
#include "optimized/models/weight_source.h"

namespace statecut {

/// How the linear-attention input projections are stored.
enum class QwenLinearLayout {
  Separate,  ///< Qwen3.5: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
  Packed,    ///< Qwen3-Next: in_proj_qkvz and in_proj_ba, interleaved per key head
};

/// Builds the hybrid model from a (text) config whose tensors live under `prefix` ("model." for *ForCausalLM).
std::unique_ptr<CausalLM> make_qwen_hybrid(const nlohmann::json& text_config, const WeightSource& w,
                                           torch::Dtype dtype, torch::Device device, QwenLinearLayout layout,
                                           const std::string& model_type, const std::string& prefix);

/// Per layer of a (text) config: is it softmax attention? From 'layer_types' ("linear_attention" / "full_attention")
/// or, in older configs without it, every full_attention_interval-th layer (default 4). Throws io::Error naming
/// `origin` for a list of the wrong length or an unknown type. Shared by the loader and prunable_layers_from_config.
std::vector<bool> qwen_full_attention_layers(const nlohmann::json& text_config, int64_t num_layers,
                                             const std::string& origin);

/// The linear-attention layers of a (text) config whose tensors live under `prefix`: their q/k row blocks of
/// in_proj_qkv (Separate) or the per-key-head groups of in_proj_qkvz (Packed), and the [q | k | v] conv channels.
std::vector<PrunableLayer> qwen_prunable_layers(const nlohmann::json& text_config, QwenLinearLayout layout,
                                                const std::string& prefix, const std::string& origin);
/// linear_key_head_dim = k'.
nlohmann::json qwen_pruned_config(const nlohmann::json& text_config, int new_dk, const std::string& origin);

/// Registers "qwen3_5_text" (flat config, tensors under model.) and "qwen3_5" (nested text_config, tensors under
/// model.language_model.).
void register_hf_qwen3_5();

}  // namespace statecut
