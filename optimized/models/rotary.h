/// Rotary position embedding (RoPE) of the "default" type in the rotate-half convention, over the first
/// rotary_dim channels of each head (partial rotary, as Qwen3-Next / Qwen3.5 full-attention layers use it):
///   rotary_dim = int(head_dim · partial_rotary_factor)   (even)
///   inv_freq_i = theta^(−2i / rotary_dim),  i < rotary_dim/2;   angle_{t,i} = (t + offset) · inv_freq_i
///   cos, sin : [T, rotary_dim] = cos/sin of cat(angle, angle)
///   x_rot ← x_rot ⊙ cos + rotate_half(x_rot) ⊙ sin,   rotate_half([a | b]) = [−b | a];  channels ≥ rotary_dim pass.
/// Shapes: x [B, T, H, head_dim]; the angles are computed in fp32 as transformers does (f64 for f64 models).
/// Qwen3.5's multimodal rotary (mrope sections T/H/W) reduces to this one when every position id is the same on the
/// three axes, which is the case for text-only input.
#pragma once
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>

namespace statecut {

struct RotaryEmbedding {
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;
  double theta = 10000.0;

  /// Reads rope_parameters {rope_type, rope_theta, partial_rotary_factor} (or the legacy top-level rope_theta,
  /// partial_rotary_factor, rope_scaling) of an HF config; throws io::Error for rope types other than "default".
  /// `default_partial_rotary_factor`: the model class's own default where the config names no factor (transformers'
  /// Qwen3.5 and Qwen3-Next configs set 0.25 in __post_init__: a config written without the key still rotates a
  /// quarter of each head there).
  static RotaryEmbedding from_config(const nlohmann::json& config, int64_t head_dim, const std::string& origin,
                                     double default_partial_rotary_factor = 1.0);

  /// cos and sin [T, rotary_dim] for positions offset … offset+T−1, in `dtype` on `device`.
  std::pair<torch::Tensor, torch::Tensor> cos_sin(int64_t T, int64_t offset, torch::Dtype dtype,
                                                  torch::Device device) const;

  /// The same for the positions held in `positions` (int64 [T]), computed on its device without a host round trip
  /// (a captured decode step reads its positions from device memory). On the CPU identical to cos_sin.
  std::pair<torch::Tensor, torch::Tensor> cos_sin_at(const torch::Tensor& positions, torch::Dtype dtype) const;

  /// Rotates the first rotary_dim channels of x [B, T, H, head_dim] (cos/sin from cos_sin, same T).
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) const;
};

}  // namespace statecut
