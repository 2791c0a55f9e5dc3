#include "optimized/models/rotary.h"

#include <cmath>

#include "optimized/io/safetensors.h"

namespace statecut {

namespace {

double number_or(const nlohmann::json& obj, const char* key, double dflt, const std::string& origin) {
  if (!obj.is_object() || !obj.contains(key) || obj.at(key).is_null()) return dflt;
  const auto& v = obj.at(key);
  if (!v.is_number()) throw io::Error(origin + ": '" + key + "': expected a number");
  return v.get<double>();
}

}  // namespace

RotaryEmbedding RotaryEmbedding::from_config(const nlohmann::json& config, int64_t head_dim,
                                             const std::string& origin, double default_partial_rotary_factor) {
  const nlohmann::json empty = nlohmann::json::object();
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (config.contains(key) && !config.at(key).is_null() && !config.at(key).is_object())
      throw io::Error(origin + ": '" + key + "': expected an object, got " + config.at(key).type_name());
  const nlohmann::json* pp = config.contains("rope_parameters") && config.at("rope_parameters").is_object()
                                 ? &config.at("rope_parameters")
                                 : &empty;
  // transformers 5 keys rope_parameters by layer type for models that mix attention kinds; the full-attention
  // layers' entry is the one these models rotate with.
  if (pp->contains("full_attention") && pp->at("full_attention").is_object()) pp = &pp->at("full_attention");
  const nlohmann::json& params = *pp;
  // rope_parameters (transformers >= 5) wins over the legacy top-level keys.
  std::string type = "default";
  for (const nlohmann::json* src : {&params, config.contains("rope_scaling") ? &config.at("rope_scaling") : &empty}) {
    if (!src->is_object()) continue;
    for (const char* key : {"rope_type", "type"}) {
      if (src->contains(key) && src->at(key).is_string()) {
        type = src->at(key).get<std::string>();
        break;
      }
    }
    if (type != "default") break;
  }
  if (type != "default")
    throw io::Error(origin + ": 'rope_type': '" + type + "' is not supported (only 'default' rotary embeddings)");

  RotaryEmbedding r;
  r.head_dim = head_dim;
  r.theta = number_or(params, "rope_theta", number_or(config, "rope_theta", 10000.0, origin), origin);
  const double factor = number_or(
      params, "partial_rotary_factor",
      number_or(config, "partial_rotary_factor", default_partial_rotary_factor, origin), origin);
  if (!(factor > 0.0 && factor <= 1.0))
    throw io::Error(origin + ": 'partial_rotary_factor': must lie in (0, 1], got " + std::to_string(factor));
  if (!(r.theta > 0.0)) throw io::Error(origin + ": 'rope_theta': must be positive");
  r.rotary_dim = static_cast<int64_t>(static_cast<double>(head_dim) * factor);  // int() truncation, like HF
  if (r.rotary_dim < 2 || r.rotary_dim % 2 != 0)
    throw io::Error(origin + ": 'partial_rotary_factor': head_dim " + std::to_string(head_dim) + " × " +
                    std::to_string(factor) + " gives rotary dim " + std::to_string(r.rotary_dim) +
                    ", which must be even and >= 2");
  return r;
}

std::pair<torch::Tensor, torch::Tensor> RotaryEmbedding::cos_sin(int64_t T, int64_t offset, torch::Dtype dtype,
                                                                 torch::Device device) const {
  auto [c, s] = cos_sin_at(torch::arange(offset, offset + T, torch::TensorOptions().dtype(torch::kInt64)), dtype);
  return {c.to(device), s.to(device)};
}

std::pair<torch::Tensor, torch::Tensor> RotaryEmbedding::cos_sin_at(const torch::Tensor& positions,
                                                                    torch::Dtype dtype) const {
  // fp32 like transformers (inv_freq = 1 / theta^(2i/d), angle = t · inv_freq, both rounded to fp32), f64 for f64.
  const auto ct = dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const auto opt = torch::TensorOptions().dtype(ct).device(positions.device());
  auto exponent = torch::arange(0, rotary_dim, 2, opt.dtype(torch::kInt64)).to(ct) / static_cast<double>(rotary_dim);
  auto inv_freq = 1.0 / torch::pow(torch::scalar_tensor(theta, opt), exponent);  // [rotary_dim/2]
  auto angle = positions.to(ct).unsqueeze(1) * inv_freq.unsqueeze(0);           // [T, rotary_dim/2]
  auto full = torch::cat({angle, angle}, /*dim=*/1);                             // [T, rotary_dim]
  return {full.cos().to(dtype), full.sin().to(dtype)};
}

torch::Tensor RotaryEmbedding::apply(const torch::Tensor& x, const torch::Tensor& cos,
                                     const torch::Tensor& sin) const {
  TORCH_CHECK(x.dim() == 4 && x.size(3) == head_dim, "rotary: expected x [B,T,H,", head_dim, "], got ", x.sizes());
  TORCH_CHECK(cos.size(0) == x.size(1) && cos.size(1) == rotary_dim, "rotary: cos/sin do not match x");
  const int64_t half = rotary_dim / 2;
  auto rot = x.narrow(3, 0, rotary_dim);
  auto c = cos.view({1, cos.size(0), 1, rotary_dim});
  auto s = sin.view({1, sin.size(0), 1, rotary_dim});
  auto rotated = torch::cat({-rot.narrow(3, half, half), rot.narrow(3, 0, half)}, 3);
  auto out = rot * c + rotated * s;
  if (rotary_dim == head_dim) return out;
  return torch::cat({out, x.narrow(3, rotary_dim, head_dim - rotary_dim)}, 3);
}

}  // namespace statecut
