// Model-family registry and load_causal_lm (config.json dispatch on "model_type").
#include "optimized/models/model_registry.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "optimized/io/checkpoint.h"
#include "optimized/models/families/fla_delta_net.h"
#include "optimized/models/families/fla_gated_deltanet.h"
#include "optimized/models/families/hf_mamba2.h"
#include "optimized/models/families/hf_qwen3_5.h"
#include "optimized/models/families/hf_qwen3_next.h"

namespace statecut {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, FamilySpec>& registry() {
  static std::map<std::string, FamilySpec> r;
  return r;
}

}  // namespace

void register_family(FamilySpec spec) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::string type = spec.model_type;
  registry()[type] = std::move(spec);
}

void register_builtin_families() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_fla_delta_net();
    register_fla_gated_deltanet();
    register_hf_mamba2();
    register_hf_qwen3_5();
    register_hf_qwen3_next();
  });
}

const FamilySpec* find_family(const std::string& model_type) {
  register_builtin_families();
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(model_type);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<std::string> registered_model_families() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> out;
  for (const auto& [k, _] : registry()) out.push_back(k);
  return out;
}

namespace {
/// "<config>: no "model_type" string", naming the format when the keys tell it (mamba_ssm's own config).
std::string no_model_type_message(const std::string& config_origin, const nlohmann::json& config) {
  std::string msg = config_origin + ": no \"model_type\" string";
  if (config.is_object() && config.contains("d_model") && (config.contains("ssm_cfg") || config.contains("n_layer")))
    msg += " (d_model, n_layer, ssm_cfg: a mamba_ssm config; statecut reads transformers' Mamba2 layout, which "
           "transformers' convert_mamba2_ssm_checkpoint script writes)";
  return msg;
}

/// The spec of a config's model_type that can be pruned, or fails naming `origin`.
const FamilySpec& prunable_family(const nlohmann::json& c, const std::string& origin) {
  if (!c.is_object() || !c.contains("model_type") || !c["model_type"].is_string())
    throw io::Error(no_model_type_message(origin, c));
  const std::string mt = c["model_type"].get<std::string>();
  const FamilySpec* f = find_family(mt);
  if (!f || !f->prunable_layers || !f->pruned_config) {
    std::string known;
    for (const auto& k : registered_model_families())
      if (const FamilySpec* s = find_family(k); s && s->prunable_layers) known += (known.empty() ? "" : ", ") + k;
    throw io::Error(origin + ": model_type '" + mt + "' cannot be pruned (supported: " + known + ")");
  }
  return *f;
}
}  // namespace

PrunableLayer prunable_layer_shape(int64_t i, int64_t heads, int64_t dk, const std::string& origin) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (heads < 1 || heads > kIntMax || dk < 1 || dk > kIntMax)
    throw io::Error(origin + ": layer " + std::to_string(i) + " would have " + std::to_string(heads) +
                    " key heads of dimension " + std::to_string(dk) +
                    " (the config's sizes must give a positive head count and key head dim)");
  PrunableLayer L;
  L.layer = static_cast<int>(i);
  L.num_key_heads = static_cast<int>(heads);
  L.head_k_dim = static_cast<int>(dk);
  return L;
}

std::vector<PrunableLayer> prunable_layers_from_config(const nlohmann::json& c, const std::string& origin,
                                                       bool allow_none) {
  auto out = prunable_family(c, origin).prunable_layers(c, origin);
  if (out.empty() && !allow_none) throw io::Error(origin + ": no linear-attention layer to prune");
  return out;
}

nlohmann::json pruned_config(const nlohmann::json& config, int new_dk, const std::string& origin) {
  return prunable_family(config, origin).pruned_config(config, new_dk, origin);
}

bool derived_buffer(const std::string& name) {
  const std::string inv_freq = "rotary_emb.inv_freq";
  return name.size() >= inv_freq.size() && name.compare(name.size() - inv_freq.size(), inv_freq.size(), inv_freq) == 0;
}

bool outside_the_language_model(const std::string& name) {
  return name.rfind("mtp.", 0) == 0 || name.rfind("model.mtp.", 0) == 0 || name.rfind("visual.", 0) == 0 ||
         name.rfind("model.visual.", 0) == 0;
}

std::vector<std::string> unused_tensors(const WeightSource& w) {
  std::vector<std::string> out;
  for (const auto& n : w.names())
    if (!w.used(n) && !derived_buffer(n) && !outside_the_language_model(n)) out.push_back(n);
  return out;
}


std::unique_ptr<CausalLM> build_causal_lm(const nlohmann::json& config, const WeightSource& w, torch::Dtype dtype,
                                          torch::Device device, const std::string& config_origin) {
  register_builtin_families();
  if (dtype != torch::kFloat32 && dtype != torch::kBFloat16 && dtype != torch::kFloat64)
    throw io::Error(config_origin + ": unsupported model dtype (use f32, bf16 or f64)");
  if (!config.is_object()) throw io::Error(config_origin + ": expected a JSON object");
  auto it = config.find("model_type");
  if (it == config.end() || !it->is_string()) throw io::Error(no_model_type_message(config_origin, config));
  const auto type = it->get<std::string>();
  const FamilySpec* f = find_family(type);
  if (!f) {
    std::string known;
    for (const auto& k : registered_model_families()) known += (known.empty() ? "" : ", ") + k;
    throw io::Error(config_origin + ": unknown model_type '" + type + "' (known: " + known + ")");
  }
  nlohmann::json cfg = config;
  if (!cfg.contains(kConfigPathKey)) cfg[kConfigPathKey] = config_origin;
  auto model = f->build(cfg, w, dtype, device);  // validates the config first
  model->set_prunable_layers(prunable_layers_from_config(config, config_origin, /*allow_none=*/true));
  return model;
}

namespace {
/// placeholders_from: -1 loads every tensor; n >= 0 binds the tensors of >= n elements as checked placeholders.
std::unique_ptr<CausalLM> load_from(const std::string& dir, torch::Dtype dtype, torch::Device device,
                                    int64_t placeholders_from) {
  namespace fs = std::filesystem;
  io::require_checkpoint_folder(dir);
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  const nlohmann::json config = io::read_config(dir);  // the one config.json reader: "<path>: <problem>"
  // Dispatch (and reject unknown model types) before touching the weights.
  register_builtin_families();
  if (!config.contains("model_type") || !config["model_type"].is_string())
    throw io::Error(no_model_type_message(cfg_path, config));
  if (!find_family(config["model_type"].get<std::string>()))
    return build_causal_lm(config, WeightSource::from_tensors({}), dtype, device, cfg_path);  // throws: unknown type
  const WeightSource w = WeightSource::open_dir(dir);
  auto model = build_causal_lm(config, placeholders_from >= 0 ? w.checks_only(placeholders_from) : w, dtype, device,
                               cfg_path);
  // A checkpoint as stored must not hold weights its config ignores (built in memory, a transformed config may bind
  // a subset on purpose: verify's theorems drop the convs).
  if (const auto extra = unused_tensors(w); !extra.empty())
    throw io::Error(w.origin(extra[0]) + ": " + extra[0] + ": a weight that " + cfg_path +
                    " gives no use (an option statecut does not implement, a layer past num_hidden_layers, or a config" +
                    " that does not match the weights)" +
                    (extra.size() > 1 ? "; " + std::to_string(extra.size() - 1) + " more like it" : ""));
  return model;
}
}  // namespace

std::unique_ptr<CausalLM> load_causal_lm(const std::string& dir, torch::Dtype dtype, torch::Device device) {
  return load_from(dir, dtype, device, /*placeholders_from=*/-1);
}

std::unique_ptr<CausalLM> load_causal_lm_placeholders(const std::string& dir, torch::Dtype dtype, torch::Device device,
                                                      int64_t min_numel) {
  return load_from(dir, dtype, device, min_numel);  // checks_only refuses a negative count
}

void check_causal_lm_loads(const std::string& dir) {
  (void)load_from(dir, torch::kBFloat16, torch::Device(torch::kCPU), /*placeholders_from=*/0);
}

}  // namespace statecut
