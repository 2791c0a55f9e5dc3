/// A checkpoint directory (config.json + model.safetensors, or the shards of model.safetensors.index.json)
/// with one lookup by tensor name, and pre-tokenised token files. No LibTorch.
///
/// Every failure is an io::Error with one line "<file>: [<tensor>: ]<problem>".
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "optimized/io/safetensors.h"

namespace statecut::io {

/// Parses a JSON file; throws "<path>: cannot open" / "<path>: malformed JSON (...)".
nlohmann::json read_json_file(const std::string& path);
/// dir/config.json, which must be a JSON object; throws "<dir>/config.json: missing" etc.
nlohmann::json read_config(const std::string& dir);

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

/// Reads a token file: .safetensors with an integer tensor `input_ids` of shape [B,T] (or [T] → B = 1), or a raw
/// little-endian .bin of uint16 (uint32 when the name ends in ".u32.bin" or `bin_bytes` = 4) as one sequence.
/// Throws on an empty file, a size not a multiple of the width, a float dtype or negative ids.
Tokens read_tokens(const std::string& path, int bin_bytes = 0);

}  // namespace statecut::io
