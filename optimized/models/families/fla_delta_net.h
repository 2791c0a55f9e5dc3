/// fla DeltaNet (`model_type: delta_net`) and the fla decoder both fla families share (fla/models/*/modeling_*.py):
///   h = embeddings[ids]
///   per block:  x = attn_norm(h);  r = h + attn(x);  h = r + GatedMLP(mlp_norm(r))      (RMSNorm, fused add+norm)
///   logits = lm_head(norm(h))  (lm_head = embeddings when tie_word_embeddings)
/// hidden_states (as fla returns them): h after the embedding and after blocks 0..L−2, then norm(h after block L−1).
///
/// Linear-attention layer (fla/layers/{delta_net,gated_deltanet}.py), x [B,T,hidden]:
///   q,k,v = act(causal_conv1d_4(x W{q,k,v}))  (act SiLU; DeltaNet qk_activation relu/elu+1/identity after the conv)
///   q,k → per-head L2 norm x·rsqrt(Σx²+1e-6) (DeltaNet qk_norm 'sum': x/Σx), scale = dk^−1/2
///   β = sigmoid(x W_b) (×2 with allow_neg_eigval; ones when DeltaNet use_beta = false)
///   GDN: g = −exp(A_log)·softplus(x W_a + dt_bias) (fp32)
///   o = (gated) delta rule (recurrence.h);  o = RMSNorm_head(o)·(silu(x W_g) if use_gate);  out = o W_o
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "optimized/models/model.h"
#include "optimized/models/weight_source.h"

namespace statecut {

/// Geometry and options of the fla linear-attention layer (both families).
struct FlaLayerConfig {
  bool gated = false;  ///< Gated DeltaNet: a_proj, A_log, dt_bias
  int64_t num_heads = 0, num_v_heads = 0, head_k_dim = 0, head_v_dim = 0;
  /// conv_bias is config.json's value; the loader binds the q/k/v conv biases when the weights hold them, whatever it
  /// says (fla's models ignore the key: their layers are built without conv biases).
  bool use_beta = true, use_gate = false, use_short_conv = true, conv_bias = false, allow_neg_eigval = false;
  int64_t conv_size = 4;
  std::string qk_activation = "silu", qk_norm = "l2";
  double norm_eps = 1e-6;
};

struct FlaModelConfig {
  std::string model_type;
  int64_t vocab_size = 0, hidden_size = 0, num_layers = 0, intermediate_size = 0;
  double norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  FlaLayerConfig layer;
};

/// Reads the decoder fields shared by both fla families (vocab, hidden, layers, MLP width, norm_eps, tying) and
/// rejects what we do not implement (hybrid `attn` layers, hidden_act other than swish).
FlaModelConfig parse_fla_decoder_config(const nlohmann::json& config, const std::string& origin);

/// Builds the fla decoder from its config and weights (checkpoint names model.*, lm_head.weight).
std::unique_ptr<CausalLM> make_fla_causal_lm(const FlaModelConfig& cfg, const WeightSource& w, torch::Dtype dtype,
                                             torch::Device device);

/// The prunable layers of an fla config (both families): every layer not listed in config "attn": {"layers"},
/// q/k_proj rows and q/k_conv1d channels (no conv when use_short_conv is false), `heads` key heads of dim dk.
std::vector<PrunableLayer> fla_prunable_layers(const nlohmann::json& config, int64_t heads, int64_t dk,
                                               const std::string& origin);

/// fla's DeltaNetConfig default of num_heads.
inline constexpr int64_t kFlaDeltaNetDefaultHeads = 16;

/// Registers `delta_net`.
void register_fla_delta_net();

}  // namespace statecut
