/// Registry of model families: config.json "model_type" → factory that builds a CausalLM from the config and weights.
///
/// Static registrars inside the static library statecut_opt would be dropped by the linker, so registration is
/// explicit: each family file optimized/<family>.{h,cpp} defines `void register_<family>();` that calls
/// register_model_family(), and register_builtin_families() (model_registry.cpp) calls every family's function.
/// Families of other engineers are picked up with __has_include of their header (optimized/hf_mamba2.h,
/// hf_qwen3_5.h, hf_qwen3_next.h must declare register_hf_mamba2(), register_hf_qwen3_5(), register_hf_qwen3_next()).
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optimized/model.h"
#include "optimized/weight_source.h"

namespace statecut {

using ModelFactory = std::function<std::unique_ptr<CausalLM>(const nlohmann::json& config, const WeightSource& w,
                                                             torch::Dtype, torch::Device)>;

/// build_causal_lm adds this key (the config file's path) to the config a factory receives, so that its errors can
/// name the file.
inline constexpr const char* kConfigPathKey = "_statecut_config_path";

/// Adds (or replaces) the factory for `model_type`.
void register_model_family(const std::string& model_type, ModelFactory f);
/// Registers every built-in family once (idempotent, thread-safe).
void register_builtin_families();
/// The factory for `model_type`, or nullptr.
const ModelFactory* find_model_family(const std::string& model_type);
/// Registered model types, sorted.
std::vector<std::string> registered_model_families();

/// Builds a model from an already parsed config and a weight source (used by load_causal_lm and by surgery, which
/// holds the pruned weights in memory). `config_origin` names the config in error messages.
std::unique_ptr<CausalLM> build_causal_lm(const nlohmann::json& config, const WeightSource& w, torch::Dtype dtype,
                                          torch::Device device, const std::string& config_origin = "config.json");

}  // namespace statecut
