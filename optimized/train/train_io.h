/// Files of `statecut finetune`: the updated checkpoint, the resumable state, the loss curve (CSV and SVG).
#pragma once
#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "optimized/train/trainer.h"

namespace statecut {

/// What identifies an input of a run to be resumed: {"path": the canonical absolute path, "fingerprint": a 64-bit hash
/// of its config.json and statecut.json (for a file: the file itself) and the names and sizes of its safetensors
/// files}. A resume from another working directory, or through another spelling of the same folder, matches; another
/// model under the same name (an l1 prune where a drrqr prune was) does not.
nlohmann::json input_identity(const std::string& path);

/// Writes the checkpoint of `src_dir` into the existing, empty `dir` with the tensors of `changed` replaced, each cast
/// to the dtype it is stored in (rounded to nearest even for bf16); every other tensor, config.json, the index of a
/// sharded checkpoint and the tokenizer files are copied byte for byte. Throws std::runtime_error naming a tensor that
/// the source lacks or whose shape differs.
void write_updated_checkpoint(const std::string& src_dir, const std::map<std::string, torch::Tensor>& changed,
                              const std::string& dir);

/// Tensors in their own dtype (CPU copies) to a safetensors file, written to "<path>.tmp" and renamed into place.
void save_tensor_file(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors);
/// Every tensor of a safetensors file, as stored, on CPU.
std::map<std::string, torch::Tensor> load_tensor_file(const std::string& path);

/// loss.csv: step,lr,loss,ce,kd,grad_norm,tokens,seconds,eval_bpb (eval_bpb empty when not evaluated).
std::string loss_csv(const std::vector<StepRecord>& rows);
/// A line plot of loss, CE and KD per step (and eval bits/byte on a second axis when present).
std::string loss_svg(const std::vector<StepRecord>& rows, const std::string& title);

nlohmann::json step_to_json(const StepRecord& r);
StepRecord step_from_json(const nlohmann::json& j);

}  // namespace statecut
