// Fresh parameters by the libraries' init rules (init.h).
#include "optimized/train/init.h"

#include <cmath>
#include <random>

#include "optimized/models/model_registry.h"
#include "optimized/models/weight_source.h"

namespace statecut {
namespace {

bool name_ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}
bool contains(const std::string& s, const char* t) { return s.find(t) != std::string::npos; }

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

double number(const nlohmann::json& c, const char* key, double dflt) {
  auto it = c.find(key);
  return (it != c.end() && it->is_number()) ? it->get<double>() : dflt;
}

/// Uniform draws in (0, 1) and standard normals (Box–Muller) from one engine.
struct Draw {
  std::mt19937_64 rng;
  double uniform() { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; }
  double normal() {
    const double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
  }
};

torch::Tensor fill(const std::vector<int64_t>& shape, Draw& d, double (*f)(Draw&, double, double), double a, double b) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = f(d, a, b);
  return torch::tensor(v, torch::kFloat64).reshape(shape);
}

double normal_ab(Draw& d, double mean, double sd) { return mean + sd * d.normal(); }
double uniform_ab(Draw& d, double lo, double hi) { return lo + (hi - lo) * d.uniform(); }
/// softplus⁻¹ of dt = exp(U(log lo, log hi)) clamped below at floor (mamba's dt_bias init).
double dt_bias_draw(Draw& d, double lo, double hi) {
  const double dt = std::max(std::exp(uniform_ab(d, std::log(lo), std::log(hi))), 1e-4);
  return dt + std::log(-std::expm1(-dt));
}
double log_uniform_0_16(Draw& d, double, double) { return std::log(std::max(16.0 * d.uniform(), 1e-30)); }

}  // namespace

torch::Tensor initial_parameter(const nlohmann::json& config, const std::string& name, const std::vector<int64_t>& shape,
                                uint64_t seed) {
  const std::string type = config.value("model_type", std::string());
  const nlohmann::json& c = (type == "qwen3_5" && config.contains("text_config")) ? config["text_config"] : config;
  const bool fla = type == "delta_net" || type == "gated_deltanet";
  const bool mamba = type == "mamba2";
  const bool qwen = !fla && !mamba;
  Draw d{std::mt19937_64(seed ^ fnv1a(name))};
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const int64_t layers = static_cast<int64_t>(number(c, "num_hidden_layers", 1));

  if (name_ends_with(name, "A_log")) {
    if (mamba) return torch::log(torch::arange(1, shape.at(0) + 1, f64));
    return fill(shape, d, log_uniform_0_16, 0, 0);
  }
  if (name_ends_with(name, "dt_bias")) {
    if (qwen) return torch::ones(shape, f64);
    const double lo = mamba ? number(c, "time_step_min", 0.001) : 0.001;
    const double hi = mamba ? number(c, "time_step_max", 0.1) : 0.1;
    return fill(shape, d, dt_bias_draw, lo, hi);
  }
  if (mamba && name_ends_with(name, "mixer.D")) return torch::ones(shape, f64);
  if (contains(name, "conv1d.")) {
    const double K = shape.size() == 3 ? static_cast<double>(shape[2])
                                       : number(c, "conv_size", number(c, "conv_kernel", number(c, "linear_conv_kernel_dim", 4)));
    const double bound = 1.0 / std::sqrt(std::max(1.0, K));
    return fill(shape, d, uniform_ab, -bound, bound);
  }
  if (shape.size() == 1 && contains(name, "norm")) {
    const bool zero_centred = qwen && !contains(name, "linear_attn.norm");
    return zero_centred ? torch::zeros(shape, f64) : torch::ones(shape, f64);
  }
  if (shape.size() == 1) return torch::zeros(shape, f64);  // biases
  double sd = number(c, "initializer_range", mamba ? 0.1 : 0.02);
  if (fla && (name_ends_with(name, "o_proj.weight") || name_ends_with(name, "down_proj.weight")))
    sd /= std::sqrt(2.0 * static_cast<double>(std::max<int64_t>(1, layers)));
  return fill(shape, d, normal_ab, 0.0, sd);
}

std::unique_ptr<CausalLM> fresh_causal_lm(const nlohmann::json& config, const std::string& config_path,
                                          torch::Dtype dtype, torch::Device device, uint64_t seed) {
  const WeightSource w = WeightSource::generated(
      [&config, seed](const std::string& name, const std::vector<int64_t>& shape) {
        return initial_parameter(config, name, shape, seed);
      },
      config_path + " (fresh initialisation)");
  return build_causal_lm(config, w, dtype, device, config_path);
}

}  // namespace statecut
