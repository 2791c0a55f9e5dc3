/// Surgery: apply a key/query channel selection to a checkpoint (DESIGN.md §4).
///
/// Per prunable layer ℓ with Hk key heads of dim dk and a new dim k', head h keeps the local channels
/// keep[h] (k' indices, in the order given). Only these tensors change, and only along dim 0:
///   fla delta_net / gated_deltanet   attn.{q,k}_proj.weight rows, attn.{q,k}_conv1d.weight (+ .bias) channels
///   HF mamba2                        the B (key) and C (query) row blocks of mixer.in_proj.weight and their
///                                    mixer.conv1d.{weight,bias} channels, per group
///   HF qwen3_5_text                  the q and k row blocks of linear_attn.in_proj_qkv.weight and their
///                                    linear_attn.conv1d.weight channels
///   HF qwen3_5 (nested text_config)  the same under model.language_model.
///   HF qwen3_next                    the q and k rows of each key head's [q | k | v | z] group of
///                                    linear_attn.in_proj_qkvz.weight and their linear_attn.conv1d.weight channels
/// Row (offset + h·stride + c) of a block (stride dk, or the per-head group for qwen3_next) goes to the kept rows
/// of its head in the order keep[h]; all other rows keep their order, so a packed group [q | k | v | z] of width
/// 2dk + 2r·dv becomes [q' | k' | v | z] of width 2k' + 2r·dv, what transformers reads with linear_key_head_dim = k'. Subset surgery copies bytes, so every dtype is kept exactly.
/// A rotation (pca) instead writes W'_h = T_h W_h (T_h [k', dk], rows orthonormal) for the projections and
/// w'[r] = Σ_d T_h[r,d]² w[d] for the depthwise conv filters and biases (the diagonal approximation of paper
/// Prop. B.1), computed in f64 and rounded to the stored dtype.
/// Config edits (each family's FamilySpec::pruned_config, so fla/transformers load the result unchanged):
///   delta_net       expand_k = Hk·k'/hidden_size
///   gated_deltanet  head_dim = k', expand_v = old_dv/k' (checked: int(k'·expand_v) == old_dv, as fla computes it)
///   mamba2          state_size = k'
///   qwen3_5_text, qwen3_next    linear_key_head_dim = k'   (qwen3_5: text_config.linear_key_head_dim = k')
/// config.json is written as transformers writes it: json.dumps(indent=2, sort_keys=True) + "\n", ASCII-escaped.
#pragma once
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "optimized/models/model.h"
#include "optimized/models/model_registry.h"

namespace statecut {

/// k' = max(1, floor(dk·(1 − ratio))); ratio must lie in (0, 1).
int budget_for_ratio(int dk, double ratio);

/// The chosen channels of one prunable layer.
struct LayerSelection {
  int layer = 0;
  std::vector<std::vector<int64_t>> keep;  ///< [Hk][k'] local channel indices (subset methods)
  std::vector<torch::Tensor> rotation;     ///< [Hk] of [k', dk] f64 (pca); empty for subsets
  int new_dim() const;
};

/// Python's json.dumps(obj, indent=2, sort_keys=True) + "\n" (what transformers' save_pretrained writes).
std::string python_json_dump(const nlohmann::json& j);

/// A layer's selection against its geometry: one keep set (or rotation) per key head, k' in [1, dk], channels distinct
/// and in [0, dk); throws std::runtime_error "selection: layer L head H: ..." otherwise.
void check_selection(const PrunableLayer& L, const LayerSelection& s);

/// The names of the tensors apply_selection reads and changes on `layers`: each q/k block's weight and conv, and their
/// biases where src has them.
std::set<std::string> selection_tensors(const class WeightSource& src, const std::vector<PrunableLayer>& layers);

/// Sliced/rotated tensors by name: only the tensors the surgery changes. Validates every keep set
/// (size k', distinct, in [0, dk)) and throws std::runtime_error naming the layer and head.
std::map<std::string, torch::Tensor> apply_selection(const class WeightSource& src,
                                                     const std::vector<PrunableLayer>& layers,
                                                     const std::vector<LayerSelection>& sel);

/// Writes the pruned checkpoint of `src_dir` into the existing, empty directory `dir`: config.json (edited),
/// model.safetensors (or the same shards and index as the source), the tokenizer files, and nothing else.
void write_pruned_checkpoint(const std::string& src_dir, const std::vector<LayerSelection>& sel,
                             const std::string& dir);

/// Reads a fixture keep.json ({"dk", "new_dk", "keep": {"<layer>.<head>": [...]}}) or a statecut.json
/// ({"selection": {"layers": [{"layer", "keep": [[...]...]}]}}) into selections.
std::vector<LayerSelection> read_keep_file(const std::string& path);
/// The same from parsed JSON; `path` names the origin in the one-line errors.
std::vector<LayerSelection> keep_selections(const nlohmann::json& j, const std::string& path);
/// A record's or keep file's "layer": a JSON integer that fits an int and is not negative, else nullopt (a layer the
/// model lacks is refused later, by whoever knows the model). The one rule for keep files and verify's record check:
/// read as int, layer 2^32 + 1 was layer 1 and 2^64 - 1 was layer -1.
std::optional<int> json_layer_index(const nlohmann::json& v);
/// json_layer_index's rule in the words of the messages that refuse a layer.
inline constexpr const char* kLayerIndexRule = "an integer in [0, 2^31)";

}  // namespace statecut
