// The pipeline transformers 5 builds for a tokenizer class (transformers_class.h).
#include "optimized/text/transformers_class.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace statecut {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw std::runtime_error(path + ": " + what); }

// A flag transformers reads with Python truthiness; only the JSON forms a saved config has are accepted.
int tri_state(const json& cfg, const char* key, const std::string& path) {  // -1 unset or null, 0 false, 1 true
  if (!cfg.contains(key) || cfg[key].is_null()) return -1;
  if (!cfg[key].is_boolean()) fail(path, std::string(key) + " is " + cfg[key].dump() + ", not true, false or null");
  return cfg[key].get<bool>() ? 1 : 0;
}

bool mentions_byte_level(const json& step) {  // a step, or a Sequence holding one
  if (!step.is_object()) return false;
  if (step.value("type", std::string()) == "ByteLevel") return true;
  for (const char* list : {"pretokenizers", "decoders"})
    if (step.contains(list) && step[list].is_array())
      for (const json& s : step[list])
        if (mentions_byte_level(s)) return true;
  return false;
}

}  // namespace

TransformersClass read_transformers_class(const std::string& dir) {
  TransformersClass c;
  const fs::path p = fs::path(dir) / "tokenizer_config.json";
  std::error_code ec;
  if (!fs::exists(p, ec)) return c;
  c.config_path = p.string();
  std::ifstream in(p, std::ios::binary);
  if (!in) fail(c.config_path, "cannot open");
  json cfg;
  try {
    cfg = json::parse(in);
  } catch (const json::exception& e) {
    fail(c.config_path, std::string("malformed JSON: ") + e.what());
  }
  if (!cfg.is_object()) fail(c.config_path, "not a JSON object");
  if (cfg.contains("tokenizer_class") && !cfg["tokenizer_class"].is_null()) {
    if (!cfg["tokenizer_class"].is_string()) fail(c.config_path, "tokenizer_class is not a string");
    c.name = cfg["tokenizer_class"].get<std::string>();
  }
  c.llama = c.name == "LlamaTokenizer" || c.name == "LlamaTokenizerFast";
  const int aps = tri_state(cfg, "add_prefix_space", c.config_path);
  const int legacy = tri_state(cfg, "legacy", c.config_path);
  c.add_prefix_space = aps != 0;  // None -> True in LlamaTokenizer.__init__
  // _get_prepend_scheme: "always" unless the tokenizer's legacy is falsy (its 5.x default False; null too) -> "first".
  c.prepend_scheme = !c.add_prefix_space ? "never" : legacy == 1 ? "always" : "first";
  return c;
}

void apply_transformers_class(json& j, const TransformersClass& cls, const std::string& path) {
  if (!cls.llama) return;
  if (!j.is_object()) return;  // the reader names it
  const std::string why = " under " + cls.name + " (" + cls.config_path + ")";
  json model = j.contains("model") ? j["model"] : json();
  const std::string type = model.is_object() ? model.value("type", std::string(model.contains("merges") ? "BPE" : ""))
                                             : std::string();
  if (type != "BPE")
    fail(path, "model '" + (type.empty() ? std::string("(none)") : type) + "'" + why +
                   ": transformers builds that class as BPE from the json's vocab and merges");
  if (mentions_byte_level(j.value("pre_tokenizer", json())) || mentions_byte_level(j.value("decoder", json())))
    fail(path, "a ByteLevel pre-tokenizer or decoder" + why +
                   ", which transformers replaces by Metaspace: its ids would not be the ones this byte-level "
                   "vocabulary was trained with, and statecut does not guess (name PreTrainedTokenizerFast in "
                   "tokenizer_config.json to read the json as it is)");
  json m = json::object();
  m["type"] = "BPE";
  m["dropout"] = nullptr;
  m["unk_token"] = nullptr;
  m["continuing_subword_prefix"] = nullptr;
  m["end_of_word_suffix"] = nullptr;
  m["fuse_unk"] = true;
  m["byte_fallback"] = true;
  m["ignore_merges"] = false;
  m["vocab"] = model.contains("vocab") ? model["vocab"] : json::object();
  m["merges"] = model.contains("merges") ? model["merges"] : json::array();
  j["model"] = std::move(m);
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"},
                        {"prepend_scheme", cls.prepend_scheme}, {"split", false}};
  json decoders = json::array();
  decoders.push_back({{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}});
  decoders.push_back({{"type", "ByteFallback"}});
  decoders.push_back({{"type", "Fuse"}});
  if (cls.add_prefix_space) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1u}, {"stop", 0u}});
  j["decoder"] = {{"type", "Sequence"}, {"decoders", std::move(decoders)}};
}

std::string describe_pipeline(const TransformersClass& cls) {
  if (!cls.llama) return "";
  return cls.name + " (Metaspace, prepend " + cls.prepend_scheme + ")";
}

}  // namespace statecut
