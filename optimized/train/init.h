/// Fresh parameters for `statecut train`, following the libraries' _init_weights (fla's PreTrainedModel, transformers'
/// Mamba2 / Qwen3-Next), by parameter name:
///   2-D weights (linear, embedding)   N(0, σ²), σ = config initializer_range (fla 0.02, mamba2 0.1, qwen 0.02);
///                                     fla: o_proj / down_proj then ÷ √(2·num_hidden_layers) (prenorm 'rescale')
///   conv1d weight [C,1,K] and bias    U(±1/√K) (PyTorch's Conv1d default, kaiming_uniform(a=√5), fan_in K)
///   norm weights                      1; Qwen's zero-centred RMSNorms (input/post_attention_layernorm, model norm,
///                                     q_norm, k_norm: y = x̂·(1 + w)) 0
///   other biases                      0
///   A_log                             log U(0, 16) (fla GDN, Qwen); Mamba-2 log(1..H)
///   dt_bias                           softplus⁻¹(dt), dt = exp(U(log dt_min, log dt_max)) ≥ dt_floor
///                                     (0.001, 0.1, 1e-4; Mamba-2 reads time_step_min/max/floor); Qwen 1
///   D (Mamba-2)                       1
/// Every tensor draws from its own std::mt19937_64 seeded by (seed, name), normals by Box–Muller: the same tensors on
/// every platform, whatever order the family asks for them.
#pragma once
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optimized/models/model.h"

namespace statecut {

/// The initial value of parameter `name` of the model `config` describes (f64, CPU).
torch::Tensor initial_parameter(const nlohmann::json& config, const std::string& name, const std::vector<int64_t>& shape,
                                uint64_t seed);

/// A model built from `config` (its family's factory) with initial_parameter weights. Throws what the family's
/// config reader throws ("<config_path>: ...").
std::unique_ptr<CausalLM> fresh_causal_lm(const nlohmann::json& config, const std::string& config_path,
                                          torch::Dtype dtype, torch::Device device, uint64_t seed);

}  // namespace statecut
