/// A checkpoint directory (config.json + model.safetensors, or the shards of model.safetensors.index.json)
/// with one lookup by tensor name, and pre-tokenised token files. No LibTorch.
///
/// Every failure is an io::Error with one line "<file>: [<tensor>: ]<problem>".
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <functional>
#include <string>
#include <vector>

#include "optimized/io/safetensors.h"

namespace statecut::io {

/// Parses a JSON file; throws "<path>: cannot open" / "<path>: malformed JSON (...)".
nlohmann::json read_json_file(const std::string& path);

/// JSON text for output (stdout, statecut.json, config.json, state files): a string that is not valid UTF-8 (a path
/// with bytes of another encoding: Linux file names are bytes) is written with U+FFFD in place of its bad bytes
/// instead of nlohmann's type_error 316 — which failed prune and every --json output after the work was done.
std::string json_text(const nlohmann::json& j, int indent = -1, bool ensure_ascii = false);
/// Throws "<dir>: no such checkpoint folder; statecut reads local folders only ..." when `dir` does not exist (a Hub
/// id such as org/name is not fetched), "<dir>: not a folder ..." when it is a file.
void require_checkpoint_folder(const std::string& dir);
/// dir/config.json, which must be a JSON object; throws the folder errors above, "<dir>/config.json: missing" etc.
nlohmann::json read_config(const std::string& dir);
/// Whether a file of a checkpoint folder (a bare name) is one that prune, finetune and train carry into the folder they
/// write, unchanged: what the tokenizer, a chat template, generation or a processor reads, and the licence —
/// tokenizer*, special_tokens_map.json, added_tokens.json, vocab.*, merges.txt, *.tiktoken, tekken.json,
/// chat_template.*, generation_config.json, *processor_config.json, LICENSE*, and the remote code config.json's
/// auto_map names (configuration_*.py, modeling_*.py, tokenization_*.py, *processing_*.py, feature_extraction_*.py;
/// it reads the pruned config's sizes). Not the weights, config.json or statecut.json (rewritten), nor a model card
/// (README: it describes the source model), nor params.json (a native config, stale once pruned).
bool is_companion_file(const std::string& name);
/// Copies every regular top-level file of src_dir that is_companion_file into dst_dir (dst_dir must not hold them).
void copy_companion_files(const std::string& src_dir, const std::string& dst_dir);
/// "<dir>: no model.safetensors or model.safetensors.index.json", naming weights in a format statecut does not read
/// when the folder has them (pytorch_model.bin, *.pt, mamba_ssm's or Mistral's consolidated files).
std::string no_weights_message(const std::string& dir);
/// "<where>: missing tensor '<name>'", plus " (the folder has 'X': another layout's name for it ...)" when `has` knows
/// a tensor that another common layout names where `name` is expected (mamba_ssm's backbone.embedding, a missing or
/// extra model./backbone./model.language_model. prefix).
std::string missing_tensor_message(const std::string& where, const std::string& name,
                                   const std::function<bool(const std::string&)>& has);
/// config.json's vocab_size (text_config.vocab_size for a nested multimodal config), or -1 when it has none.
int64_t config_vocab_size(const nlohmann::json& config);

class Checkpoint {
 public:
  /// Opens dir: config.json, then model.safetensors if present, else model.safetensors.index.json whose
  /// "weight_map" (tensor → shard file in dir) must agree exactly with the tensors the shards hold.
  static Checkpoint open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  /// Throws "<dir>: missing tensor '<name>'".
  const TensorView& tensor(const std::string& name) const;
  /// Path of the file holding `name` (for messages).
  const std::string& file_of(const std::string& name) const;
  /// SafetensorsFile::release of `name`'s pages (a caller done with it); no-op for an unknown name.
  void release(const std::string& name) const;
  std::vector<std::string> names() const;  ///< sorted
  const std::vector<SafetensorsFile>& files() const { return files_; }

 private:
  std::string dir_;
  nlohmann::json config_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, std::size_t> where_;  // name → index into files_
};

/// Token ids [batch, length] row-major.
struct Tokens {
  int64_t batch = 0;
  int64_t length = 0;
  std::vector<int64_t> ids;
};

/// The one token-file reader of statecut (prune/eval/rank calibration text, `logits --tokens`, verify):
///   *.safetensors  an integer tensor `input_ids` (or the file's only tensor) of shape [B,T], or [T] → B = 1;
///   *.bin          raw little-endian ids, one sequence: uint32 when the name ends in ".u32.bin", uint16 when it
///                  ends in ".u16.bin", else uint16 when vocab_size <= 65536 and uint32 above (`bin_bytes` 2 or 4
///                  overrides).
/// Every id must lie in [0, vocab_size) when vocab_size > 0. Throws io::Error "<path>: <problem>" on another
/// extension, an empty file, a size not a multiple of the width, a float dtype, a rank other than 1 or 2, or an id
/// out of range.
Tokens read_tokens(const std::string& path, int64_t vocab_size = 0, int bin_bytes = 0);

/// Whether `path` ends in `suffix` (a name's extension; the file is not looked at).
bool has_suffix(const std::string& path, const std::string& suffix);
/// Whether every command reads `path` as a token file (.safetensors or .bin, as read_tokens) rather than as text.
bool is_token_file_name(const std::string& path);

}  // namespace statecut::io
