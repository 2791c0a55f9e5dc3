/// Registry of model families: config.json "model_type" → the family's FamilySpec, everything statecut knows about
/// it in one place: the factory that builds a CausalLM from config and weights, the config → q/k geometry of its
/// prunable layers (with the family's defaults), the config edit for a new key dim, and its capabilities.
///
/// Adding a family touches one folder: optimized/models/families/<family>.{h,cpp} defines
/// `void register_<family>();` that calls register_family() once per model_type, and register_builtin_families()
/// (model_registry.cpp) calls it. Registration is explicit because static registrars inside a static library are
/// dropped by the linker.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optimized/models/model.h"
#include "optimized/models/weight_source.h"

namespace statecut {

using ModelFactory = std::function<std::unique_ptr<CausalLM>(const nlohmann::json& config, const WeightSource& w,
                                                             torch::Dtype, torch::Device)>;

/// build_causal_lm adds this key (the config file's path) to the config a factory receives, so that its errors can
/// name the file.
inline constexpr const char* kConfigPathKey = "_statecut_config_path";

/// config.json → the prunable layers, the family's defaults applied; throws "<origin>: ..." on a bad geometry.
using PrunableLayersFn = std::function<std::vector<PrunableLayer>(const nlohmann::json& config, const std::string& origin)>;
/// config.json → the config for key dim k' (what fla / transformers read back), or throws "<origin>: ...".
using PrunedConfigFn = std::function<nlohmann::json(const nlohmann::json& config, int new_dk, const std::string& origin)>;

/// What the analysis commands may assume about a family's linear-attention layers.
struct FamilyCapabilities {
  bool delta_rule = true;  ///< the recurrence has β (delta rule); false: Mamba-2's SSD (no β, decay dt·A)
  bool gated = false;      ///< LayerBoundary::g is the layer's log decay (GDN, Mamba-2); false: plain DeltaNet
};

struct FamilySpec {
  std::string model_type;
  ModelFactory build;
  PrunableLayersFn prunable_layers;
  PrunedConfigFn pruned_config;
  FamilyCapabilities caps;
};

/// Layer i with `heads` key heads of dimension dk (tensor names to be filled in by the family). Throws io::Error
/// "<origin>: ..." unless both are positive and fit an int (a hidden_size of 2^32 + 64 wrapped to a dk of
/// -2147483616 that prune then called a bad budget).
PrunableLayer prunable_layer_shape(int64_t i, int64_t heads, int64_t dk, const std::string& origin);

/// Adds (or replaces) the spec for spec.model_type.
void register_family(FamilySpec spec);
/// The spec for `model_type` (built-in families registered first), or nullptr.
const FamilySpec* find_family(const std::string& model_type);
/// Registers every built-in family once (idempotent, thread-safe).
void register_builtin_families();
/// Registered model types, sorted.
std::vector<std::string> registered_model_families();

/// The prunable layers of a checkpoint, read from its config.json alone (no weights needed), through its family's
/// spec. The one source of this geometry: a loaded model's prunable_layers() is this list (build_causal_lm sets
/// it), so calibration, rank, surgery and verify agree by construction. Throws std::runtime_error "<origin>: ..."
/// for unknown model types, inconsistent geometry, or (unless allow_none) a model without linear-attention layers.
std::vector<PrunableLayer> prunable_layers_from_config(const nlohmann::json& config,
                                                       const std::string& origin = "config.json",
                                                       bool allow_none = false);

/// The config with the family's edit for the new key dim k' (so fla / transformers load the pruned weights).
nlohmann::json pruned_config(const nlohmann::json& config, int new_dk, const std::string& origin = "config.json");

/// The stored tensors of `w` a model built from it did not read: the weights of an option the family does not
/// implement (fla's attnres_*, an MoE block, a norm or bias the config does not name: lm_head.bias, model.norm.bias),
/// of a layer past num_hidden_layers, or of a config that does not match them. Computing without them would be a
/// silently wrong model, so loading a checkpoint folder (load_causal_lm, load_causal_lm_placeholders,
/// check_causal_lm_loads) refuses them. Set aside: derived buffers (derived_buffer) and the parts of a published
/// checkpoint that are not the language model (outside_the_language_model); a tied lm_head equal to the embeddings is
/// read (compared) by the loader, so it counts as used.
std::vector<std::string> unused_tensors(const WeightSource& w);

/// Parts of a published checkpoint that are not the language model statecut runs: a multi-token-prediction head
/// (Qwen3.5 / Qwen3-Next `mtp.*`) and a vision tower (Qwen3.5's `model.visual.*`). transformers' causal LM ignores
/// them too; verify counts them, the loaders leave them.
bool outside_the_language_model(const std::string& name);

/// A stored buffer derived from the config, not a weight (a layer's rotary_emb.inv_freq, which older transformers
/// saved): the loaders and verify set it aside.
bool derived_buffer(const std::string& name);

/// Builds a model from an already parsed config and a weight source (used by load_causal_lm and by surgery, which
/// holds the pruned weights in memory). `config_origin` names the config in error messages.
std::unique_ptr<CausalLM> build_causal_lm(const nlohmann::json& config, const WeightSource& w, torch::Dtype dtype,
                                          torch::Device device, const std::string& config_origin = "config.json");

/// What load_causal_lm(dir, bf16, CPU) checks (config, model type, every bound tensor present with the implied shape
/// and finite), through WeightSource::checks_only(): each tensor is read once from the mapped file and dropped, so
/// the peak memory is the file's pages, not a second copy of the weights. Throws as load_causal_lm does.
void check_causal_lm_loads(const std::string& dir);

/// load_causal_lm, except that every tensor of at least `min_numel` elements is checked as a load checks it and bound
/// as an uninitialised placeholder (WeightSource::checks_only(min_numel)): for StreamedModel (streamed_model.h),
/// which fills them block by block from the mapped checkpoint.
std::unique_ptr<CausalLM> load_causal_lm_placeholders(const std::string& dir, torch::Dtype dtype, torch::Device device,
                                                      int64_t min_numel);

}  // namespace statecut
