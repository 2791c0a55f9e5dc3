/// statecut.json, the record `statecut prune` writes beside a pruned checkpoint, across several pruning steps.
///
/// One step's record (prune.cpp) names its method, options, calibration, its source checkpoint (an absolute path)
/// and "selection": per layer, per key head, the kept channels as indices into the SOURCE's channels. Pruning a
/// folder that already holds a statecut.json adds
///   "history":  the earlier steps' records, oldest first (each without its own history / original);
///   "original": {"checkpoint", "head_k_dim", "steps", "layers": [{"layer", "keep": [[...] per head]}]}: the kept
///               channels as indices into the FIRST source's channels, composed step by step
///                 original_keep[h][i] = previous_original_keep[h][ keep[h][i] ]
///               null when a step is a rotation (pca): rotated channels are no subset of the original ones;
///               absent when the earlier records pruned nothing (statecut train): the source is the first one.
/// verify uses "original" when --source is the first checkpoint, "selection" when it is the step's own source.
/// The file is written with every list of numbers on one line (a 4-layer model's record was 584 lines, one index a
/// line); the JSON is otherwise nlohmann's 2-space indentation.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace statecut {

/// What one statecut.json step did to the key channels: nothing (no "selection": statecut train, a finetune), kept a
/// subset of its source's channels (keep sets per layer), or rotated them (pca: a selection layer without "keep").
/// The one rule by which prune composes "original" and verify reads a record's steps.
enum class PruningStep { None, Subset, Rotation };
PruningStep pruning_step_kind(const nlohmann::json& step);

/// `record` (one step, pruning `source_dir`) with "history" and "original" added when `source_dir` holds a
/// statecut.json; throws std::runtime_error naming that file when it cannot be read or its keep sets do not
/// compose with this step's (an index outside the previous step's kept channels).
nlohmann::json with_pruning_history(nlohmann::json record, const std::string& source_dir);

/// JSON text with arrays of numbers on one line ("[3, 0, 7]") and everything else indented by 2, plus "\n".
std::string compact_record_text(const nlohmann::json& j);

}  // namespace statecut
