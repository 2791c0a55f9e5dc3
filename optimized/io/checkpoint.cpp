// Checkpoint directories (single file or sharded), config.json and token files.
#include "optimized/io/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "optimized/io/input_file.h"

namespace statecut::io {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

std::string json_text(const json& j, int indent, bool ensure_ascii) {
  return j.dump(indent, ' ', ensure_ascii, json::error_handler_t::replace);
}

namespace {

/// Python's json.dumps writes the non-finite floats as the bare words NaN, Infinity and -Infinity (transformers 4.x
/// saved Mamba-2's default time_step_limit (0.0, inf) that way); JSON has no such literals. Outside strings each
/// becomes the string of its name, which the config readers that accept a non-finite value read as one and the
/// others refuse as "not a number" naming the key.
std::string quote_python_nonfinite(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (const char* word : {"-Infinity", "Infinity", "NaN"}) {
      const size_t n = std::char_traits<char>::length(word);
      if (text.compare(i, n, word) == 0) {
        out += '"';
        out += word;
        out += '"';
        i += n - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

}  // namespace

json read_json_file(const std::string& path) {
  std::error_code ec;
  if (const std::string link = broken_link_problem(path); !link.empty()) throw Error(path + ": " + link);
  if (!fs::exists(path, ec)) throw Error(path + ": missing");
  if (fs::is_directory(path, ec)) throw Error(path + ": is a directory, expected a JSON file");
  // a FIFO or a device would block or never end: every reader of these files (Python's json) wants a file
  if (!fs::is_regular_file(path, ec)) throw Error(path + ": not a regular file, expected a JSON file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.rfind("\xEF\xBB\xBF", 0) == 0)  // json.loads refuses it ("Unexpected UTF-8 BOM"), and so transformers
    throw Error(path + ": starts with a UTF-8 byte order mark, which Python's json (transformers, fla) refuses");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    try {
      return json::parse(quote_python_nonfinite(text));  // what Python's json module writes for inf and nan
    } catch (const json::exception&) {
    }
    throw Error(path + ": malformed JSON (" + one_line(e.what()) + ")");
  }
}

void require_checkpoint_folder(const std::string& dir) {
  if (dir.empty()) throw Error("an empty path where a checkpoint folder was expected");
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return;
  if (fs::exists(dir, ec)) throw Error(dir + ": not a folder (a checkpoint is a folder holding config.json)");
  throw Error(dir + ": no such checkpoint folder; statecut reads local folders only (download a Hub model first, "
                    "e.g. huggingface-cli download ORG/NAME --local-dir DIR)");
}

int64_t config_vocab_size(const json& c) {
  const json* v = nullptr;
  if (c.contains("vocab_size")) v = &c["vocab_size"];
  else if (c.contains("text_config") && c["text_config"].is_object() && c["text_config"].contains("vocab_size"))
    v = &c["text_config"]["vocab_size"];
  return v && v->is_number_integer() ? v->get<int64_t>() : -1;
}

json read_config(const std::string& dir) {
  require_checkpoint_folder(dir);
  const std::string p = (fs::path(dir) / "config.json").string();
  json c = read_json_file(p);
  if (!c.is_object()) throw Error(p + ": expected a JSON object");
  return c;
}

Checkpoint Checkpoint::open(const std::string& dir) {
  require_checkpoint_folder(dir);
  std::error_code ec;
  Checkpoint ck;
  ck.dir_ = dir;
  ck.config_ = read_config(dir);
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single, ec)) {
    ck.files_.push_back(SafetensorsFile::open(single.string()));
    for (const auto& n : ck.files_[0].names()) ck.where_[n] = 0;
    return ck;
  }
  for (const fs::path& p : {single, index})
    if (const std::string link = broken_link_problem(p.string()); !link.empty()) throw Error(p.string() + ": " + link);
  if (!fs::exists(index, ec)) throw Error(no_weights_message(dir));

  const std::string ip = index.string();
  const json idx = read_json_file(ip);
  if (!idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object())
    throw Error(ip + ": no \"weight_map\" object");
  std::map<std::string, std::string> listed;  // tensor → shard file name
  std::map<std::string, std::size_t> shard_index;
  for (const auto& [name, shard] : idx["weight_map"].items()) {
    if (!shard.is_string()) throw Error(ip + ": " + name + ": shard is not a string");
    const std::string s = shard.get<std::string>();
    // Shards live in the checkpoint directory itself: no paths, so an index cannot point elsewhere.
    if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
      throw Error(ip + ": " + name + ": shard '" + s + "' is not a file name in the checkpoint directory");
    listed[name] = s;
    if (!shard_index.count(s)) {
      shard_index[s] = ck.files_.size();
      ck.files_.push_back(SafetensorsFile::open((fs::path(dir) / s).string()));
    }
  }
  if (ck.files_.empty()) throw Error(ip + ": weight_map is empty");
  for (std::size_t i = 0; i < ck.files_.size(); ++i) {
    for (const auto& n : ck.files_[i].names()) {
      auto [it, fresh] = ck.where_.emplace(n, i);
      if (!fresh)
        throw Error(ck.files_[i].path() + ": " + n + ": tensor also present in " + ck.files_[it->second].path());
      auto l = listed.find(n);
      if (l == listed.end()) throw Error(ck.files_[i].path() + ": " + n + ": not listed in " + ip);
      if (shard_index.at(l->second) != i)
        throw Error(ip + ": " + n + ": listed in shard '" + l->second + "' but found in " + ck.files_[i].path());
    }
  }
  for (const auto& [n, s] : listed)
    if (!ck.where_.count(n)) throw Error(ip + ": " + n + ": listed in shard '" + s + "' which does not hold it");
  return ck;
}

const TensorView& Checkpoint::tensor(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end())
    throw Error(missing_tensor_message(dir_, name, [this](const std::string& n) { return has(n); }));
  return files_[it->second].tensor(name);
}

const std::string& Checkpoint::file_of(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end())
    throw Error(missing_tensor_message(dir_, name, [this](const std::string& n) { return has(n); }));
  return files_[it->second].path();
}

void Checkpoint::release(const std::string& name) const {
  auto it = where_.find(name);
  if (it != where_.end()) files_[it->second].release(files_[it->second].tensor(name));
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& kv : where_) out.push_back(kv.first);
  return out;
}

std::string no_weights_message(const std::string& dir) {
  std::string other;
  std::error_code ec;
  for (const char* f : {"pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "consolidated.safetensors",
                        "consolidated.00.pth", "model.gguf"})
    if (fs::exists(fs::path(dir) / f, ec)) {
      other = f;
      break;
    }
  std::string msg = dir + ": no model.safetensors or model.safetensors.index.json";
  if (!other.empty())
    msg += " (" + other + " is a format statecut does not read: transformers' save_pretrained writes safetensors)";
  return msg;
}

std::string missing_tensor_message(const std::string& where, const std::string& name,
                                   const std::function<bool(const std::string&)>& has) {
  const std::string msg = where + ": missing tensor '" + name + "'";
  std::vector<std::string> alts;
  const auto swap = [&](const std::string& from, const std::string& to) {
    const size_t at = name.find(from);
    if (at != std::string::npos) alts.push_back(name.substr(0, at) + to + name.substr(at + from.size()));
  };
  swap("embeddings.", "embedding.");  // mamba_ssm; transformers' Mamba2 load_hook renames it
  const std::vector<std::string> prefixes = {"model.language_model.", "language_model.model.", "model.", "backbone.", ""};
  for (const std::string& p : prefixes)
    if (name.rfind(p, 0) == 0) {
      const std::string rest = name.substr(p.size());
      for (const std::string& q : prefixes)
        if (q != p) alts.push_back(q + rest);
      break;
    }
  for (const std::string& a : alts)
    if (a != name && has(a))
      return msg + " (the folder has '" + a + "': another layout's name for it; statecut reads the names " +
             "transformers and fla save)";
  return msg;
}

bool is_companion_file(const std::string& name) {
  const auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
  // Remote code (config.json's auto_map, trust_remote_code) by the modules transformers' auto classes name.
  const bool remote_code = has_suffix(name, ".py") &&
                           (starts("configuration_") || starts("modeling_") || starts("tokenization_") ||
                            starts("processing_") || starts("image_processing_") || starts("video_processing_") ||
                            starts("feature_extraction_"));
  return starts("tokenizer") || name == "special_tokens_map.json" || name == "added_tokens.json" || starts("vocab.") ||
         name == "merges.txt" || has_suffix(name, ".tiktoken") || name == "tekken.json" || starts("chat_template.") ||
         name == "generation_config.json" || has_suffix(name, "processor_config.json") || starts("LICENSE") ||
         remote_code;
}

void copy_companion_files(const std::string& src_dir, const std::string& dst_dir) {
  for (const auto& e : fs::directory_iterator(src_dir)) {
    const std::string name = e.path().filename().string();
    if (is_companion_file(name) && e.is_regular_file()) fs::copy_file(e.path(), fs::path(dst_dir) / name);
  }
}

bool has_suffix(const std::string& path, const std::string& suffix) {
  return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_token_file_name(const std::string& path) {
  return has_suffix(path, ".safetensors") || has_suffix(path, ".bin");
}

Tokens read_tokens(const std::string& path, int64_t vocab_size, int bin_bytes) {
  // Said as every input file is (a directory named x.bin read as a stream fails with libstdc++'s words, no path).
  if (const std::string why = input_file_problem(path); !why.empty()) throw Error(path + ": " + why);
  Tokens t;
  if (has_suffix(path, ".safetensors")) {
    const auto f = SafetensorsFile::open(path);
    std::string name = "input_ids";
    if (!f.has(name)) {
      if (f.names().size() != 1)
        throw Error(path + ": missing tensor 'input_ids' (a token file holds input_ids, or exactly one tensor)");
      name = f.names().front();
    }
    const TensorView& v = f.tensor(name);
    switch (v.dtype) {
      case DType::U8: case DType::I8: case DType::U16: case DType::I16: case DType::U32: case DType::I32:
      case DType::U64: case DType::I64: break;
      default: throw Error(path + ": " + name + ": dtype " + std::string(dtype_name(v.dtype)) + " is not an integer type");
    }
    if (v.shape.size() == 1) t.batch = 1, t.length = v.shape[0];
    else if (v.shape.size() == 2) t.batch = v.shape[0], t.length = v.shape[1];
    else throw Error(path + ": " + name + ": expected shape [B,T] or [T], got rank " + std::to_string(v.shape.size()));
    if (t.batch * t.length == 0) throw Error(path + ": " + name + ": no tokens");
    const std::vector<double> d = to_double(v);
    t.ids.resize(d.size());
    for (std::size_t i = 0; i < d.size(); ++i) {
      // U64/I64 beyond 2^53 would not survive the double; no vocabulary comes near that, so reject it.
      if (d[i] < 0 || d[i] > 9007199254740992.0)
        throw Error(path + ": " + name + ": token " + std::to_string(i) + " is out of range");
      t.ids[i] = static_cast<int64_t>(d[i]);
    }
  } else if (has_suffix(path, ".bin")) {
    const int w = bin_bytes                       ? bin_bytes
                  : has_suffix(path, ".u32.bin")   ? 4
                  : has_suffix(path, ".u16.bin")   ? 2
                  : vocab_size > 65536            ? 4
                                                  : 2;
    if (w != 2 && w != 4) throw Error(path + ": token width must be 2 or 4 bytes");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open");
    const std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (b.empty()) throw Error(path + ": no tokens");
    if (b.size() % static_cast<std::size_t>(w) != 0)
      throw Error(path + ": size " + std::to_string(b.size()) + " is not a multiple of the token width " +
                  std::to_string(w) + " (uint" + std::to_string(8 * w) + " ids)");
    t.batch = 1;
    t.length = static_cast<int64_t>(b.size() / static_cast<std::size_t>(w));
    t.ids.resize(static_cast<std::size_t>(t.length));
    for (std::size_t i = 0; i < t.ids.size(); ++i) {
      if (w == 2) {
        uint16_t x;
        std::memcpy(&x, b.data() + 2 * i, 2);
        t.ids[i] = x;
      } else {
        uint32_t x;
        std::memcpy(&x, b.data() + 4 * i, 4);
        t.ids[i] = x;
      }
    }
  } else {
    throw Error(path + ": unknown token file type (expected .safetensors or .bin)");
  }
  if (vocab_size > 0)
    for (std::size_t i = 0; i < t.ids.size(); ++i)
      if (t.ids[i] >= vocab_size)
        throw Error(path + ": token " + std::to_string(i) + " = " + std::to_string(t.ids[i]) +
                    " outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
  return t;
}

}  // namespace statecut::io
