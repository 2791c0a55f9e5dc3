/// pruned.weights, the row of `pruned` that holds a pruned checkpoint to its unpruned source (check_pruned.cpp
/// decides which keep sets and which source): every kept q/k row and conv channel is the source's row bit for bit,
/// in the recorded order, and every other tensor (and every other row of a packed tensor) is identical; a rotation
/// (pca) is held to check_rotation.h's bounds instead. The row map is rebuilt here from the keep sets and the
/// source's geometry alone (DESIGN.md §4), independently of surgery.cpp's index arithmetic.
#pragma once
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "optimized/verify/check_rotation.h"
#include "optimized/verify/verify_checks.h"

namespace statecut::verify {

/// The unpruned source as this check reads it, once: its config.json (a source that cannot be read is the input's
/// fault, exit 2, not a failed check) and its linear-attention layers, or why it has none (the weights row names it).
struct SourceModel {
  std::string dir;
  nlohmann::json cfg;
  std::vector<PrunableLayer> layers;
  std::string layers_error;
};

/// Reads the source's config.json (throws Unreadable: exit 2) and its prunable layers (an error kept in layers_error).
SourceModel read_source(const std::string& source);

/// No statecut.json: the keep sets the weights imply, each pruned q row matched to the source row it equals (the first
/// channel of that head not taken yet); rows that equal none go to `unmatched`.
std::map<int, std::vector<std::vector<int64_t>>> infer_keep(const Context& ctx, const WeightSource& src,
                                                            const std::vector<PrunableLayer>& src_layers,
                                                            std::vector<std::string>& unmatched);

/// With the source: kept rows bit-identical in the recorded order, everything else identical (`keep` per layer, per
/// key head; `rotation`: the layers without keep sets were rotated). `tuned`: tensors a fine-tune changed after the
/// surgery (statecut.json "changed_tensors"): their rows are counted against the geometry but their values are not
/// compared. `recovered`: where the rotated heads' T̂ go (for the pca certificate). `convs_unchecked`: why a chain's
/// conv filters are not compared (two rotations), "" to compare them.
CheckResult weights_row(Context& ctx, const SourceModel& sm, const WeightSource& src,
                        const std::map<int, std::vector<std::vector<int64_t>>>& keep, bool rotation,
                        const std::set<std::string>& tuned = {}, RecoveredRotations* recovered = nullptr,
                        const std::string& convs_unchecked = "");

}  // namespace statecut::verify
