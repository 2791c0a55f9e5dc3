// The class transformers 5 picks for a tokenizer folder and the pipeline it builds (transformers_class.h).
#include "optimized/text/transformers_class.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

namespace statecut {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw std::runtime_error(path + ": " + what); }

const char* const kBackend = "TokenizersBackend";
const std::string kMeta = "\xE2\x96\x81";  // ▁

// TOKENIZER_MAPPING_NAMES (models/auto/tokenization_auto.py), the model types of the families statecut reads and
// their neighbours; the types of MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS without an entry map to TokenizersBackend.
const std::map<std::string, std::string>& registered_classes() {
  static const std::map<std::string, std::string> m = [] {
    std::map<std::string, std::string> r;
    for (const char* t : {"gpt_neox", "mamba", "mamba2", "falcon_mamba", "mpt", "olmo", "olmoe", "rwkv", "xlstm"})
      r[t] = "GPTNeoXTokenizer";
    for (const char* t : {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_vl", "qwen3_vl_moe"})
      r[t] = "Qwen2Tokenizer";
    for (const char* t : {"qwen3_5", "qwen3_5_moe"}) r[t] = "Qwen3_5Tokenizer";
    for (const char* t : {"gpt2", "gpt_neo", "gptj", "opt", "phi", "starcoder2", "dbrx", "codegen"})
      r[t] = "GPT2Tokenizer";
    r["code_llama"] = "CodeLlamaTokenizer";
    for (const char* t : {"gemma", "gemma2", "gemma3", "gemma3_text"}) r[t] = "GemmaTokenizer";
    for (const char* t : {"mistral", "mixtral", "mistral3", "ministral", "ministral3", "pixtral", "voxtral",
                          "granite", "granitemoe", "granitemoehybrid", "granitemoeshared", "olmo2", "olmo3",
                          "olmo_hybrid", "flex_olmo", "gpt_bigcode", "stablelm", "glm", "glm4", "glm4_moe",
                          "persimmon", "phi3", "phi3_v", "phimoe", "deepseek_v2", "deepseek_v3", "jamba",
                          "internlm2", "nemotron", "llava", "llava_next", "minicpm3", "ernie4_5", "ernie4_5_moe"})
      r[t] = kBackend;
    return r;
  }();
  return m;
}

std::string without_fast(std::string c) {
  const std::string fast = "Fast";
  if (c.size() > fast.size() && c.compare(c.size() - fast.size(), fast.size(), fast) == 0) c.resize(c.size() - fast.size());
  return c == "PreTrainedTokenizer" || c == "PreTrainedTokenizer" + fast ? kBackend : c;
}

const std::set<std::string>& byte_level_classes() {
  static const std::set<std::string> s = {"GPT2Tokenizer",  "RobertaTokenizer", "CodeGenTokenizer", "WhisperTokenizer",
                                          "GPTNeoXTokenizer", "Qwen2Tokenizer", "Qwen3_5Tokenizer"};
  return s;
}

json read_object(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) fail(p.string(), "not a regular file (a directory?)");
  json j = read_hf_json(p.string(), "transformers' json.load");  // Python's: "Unexpected UTF-8 BOM"
  if (!j.is_object()) fail(p.string(), "not a JSON object");
  return j;
}

std::string string_key(const json& j, const char* key, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) return "";
  if (!j[key].is_string()) fail(path, std::string(key) + " is not a string");
  return j[key].get<std::string>();
}

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

const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* kQwen35Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json byte_level_step(bool add_prefix_space, bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

}  // namespace

json read_hf_json(const std::string& path, const std::string& reader) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  // nlohmann skips a UTF-8 byte order mark; HF's readers do not.
  char bom[3] = {};
  if (in.read(bom, 3) && bom[0] == '\xEF' && bom[1] == '\xBB' && bom[2] == '\xBF')
    fail(path, "starts with a UTF-8 byte order mark, which " + reader + " refuses");
  in.clear();
  in.seekg(0);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail(path, std::string("malformed JSON: ") + e.what());
  }
}

std::string resolve_tokenizer_class(const std::string& declared, const std::string& model_type) {
  const std::string hub = declared.empty() ? "" : without_fast(declared);
  const auto& reg = registered_classes();
  const auto it = model_type.empty() ? reg.end() : reg.find(model_type);
  if (!hub.empty() && it != reg.end() && it->second != hub)
    return it->second == kBackend || model_type == "qwen2" ? it->second : hub;
  if (!hub.empty()) return hub;
  return it != reg.end() ? it->second : kBackend;
}

std::string remote_tokenizer_code(const std::string& dir) {
  TransformersClass c;
  try {
    c = read_transformers_class(dir);
  } catch (const std::exception&) {
    return "";  // named where the tokenizer is read
  }
  if (c.auto_tokenizer.empty()) return "";
  const auto& reg = registered_classes();
  if (!c.model_type.empty() && reg.count(c.model_type)) return "";  // transformers' own class for the type
  if (!c.declared.empty()) {  // a class transformers has: the ones this file builds, and the registered ones
    const std::string hub = without_fast(c.declared);
    bool known = hub == "LlamaTokenizer" || byte_level_classes().count(hub) > 0;
    for (const auto& [type, cls] : reg) known = known || cls == hub;
    if (known) return "";
  }
  return c.auto_tokenizer_file + ": the tokenizer is the checkpoint's own Python code (auto_map AutoTokenizer '" +
         c.auto_tokenizer + "'" + (c.declared.empty() ? std::string() : ", tokenizer_class '" + c.declared + "'") +
         "), which transformers runs only with trust_remote_code and statecut never runs: its ids need not be those of "
         "the folder's tokenizer files";
}

TransformersClass read_transformers_class(const std::string& dir) {
  TransformersClass c;
  std::error_code ec;
  json cfg = json::object(), model_cfg = json::object();
  const fs::path tc = fs::path(dir) / "tokenizer_config.json", mc = fs::path(dir) / "config.json";
  if (fs::exists(tc, ec)) {
    c.config_path = tc.string();
    cfg = read_object(tc);
    c.declared = string_key(cfg, "tokenizer_class", c.config_path);
  }
  if (fs::exists(mc, ec)) {
    model_cfg = read_object(mc);
    c.model_type = string_key(model_cfg, "model_type", mc.string());
    if (c.declared.empty()) c.declared = string_key(model_cfg, "tokenizer_class", mc.string());
  }
  c.resolved = resolve_tokenizer_class(c.declared, c.model_type);
  // auto_map's AutoTokenizer: "module.Class", or [slow, fast] with null for a missing one; tokenizer_config.json's
  // first, as transformers reads it.
  const auto auto_tokenizer = [&](const json& j, const fs::path& path) {
    if (!c.auto_tokenizer.empty() || !j.contains("auto_map") || !j["auto_map"].is_object()) return;
    const json a = j["auto_map"].value("AutoTokenizer", json());
    for (const json& e : a.is_array() ? a : json::array({a}))
      if (c.auto_tokenizer.empty() && e.is_string() && !e.get<std::string>().empty())
        c.auto_tokenizer = e.get<std::string>(), c.auto_tokenizer_file = path.string();
  };
  auto_tokenizer(cfg, tc);
  auto_tokenizer(model_cfg, mc);
  if (cfg.contains("added_tokens_decoder") && !cfg["added_tokens_decoder"].is_null()) {
    if (!cfg["added_tokens_decoder"].is_object()) fail(c.config_path, "added_tokens_decoder is not an object");
    c.added_tokens_decoder = cfg["added_tokens_decoder"];
  }
  // Named special tokens (a string, or a token object with its flags), and the lists of extra ones.
  auto named = [&](const json& v) {
    if (v.is_string() && !v.get<std::string>().empty()) {
      c.named_special_tokens.push_back({{"content", v}, {"lstrip", false}, {"rstrip", false}, {"single_word", false}});
    } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      json e = {{"content", v["content"]}, {"lstrip", false}, {"rstrip", false}, {"single_word", false}};
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        if (v.contains(flag) && v[flag].is_boolean()) e[flag] = v[flag];
      c.named_special_tokens.push_back(std::move(e));
    }
  };
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"})
    if (cfg.contains(key)) named(cfg[key]);
  for (const char* key : {"additional_special_tokens", "extra_special_tokens"})
    if (cfg.contains(key) && (cfg[key].is_array() || cfg[key].is_object()))
      for (const json& v : cfg[key]) named(v);
  // Flags are read (and checked) only by the classes that read them: transformers passes the others on unread.
  const auto flag = [&](const char* key) { return tri_state(cfg, key, c.config_path); };
  c.split_special_tokens = flag("split_special_tokens") == 1;  // read by every class (TokenizersBackend)
  using P = TransformersClass::Pipeline;
  if (c.resolved == "LlamaTokenizer") {
    c.pipeline = P::Llama;
    c.add_prefix_space = flag("add_prefix_space") != 0;  // None -> True in LlamaTokenizer.__init__
    // _get_prepend_scheme: "always" unless the tokenizer's legacy is falsy (its 5.x default False; null too) -> "first".
    const int legacy = flag("legacy");
    c.prepend_scheme = !c.add_prefix_space ? "never" : legacy == 1 ? "always" : "first";
  } else if (c.resolved == "CodeLlamaTokenizer") {
    c.pipeline = P::CodeLlama;
    c.add_prefix_space = flag("add_prefix_space") != 0;
    c.prepend_scheme = c.add_prefix_space ? "first" : "never";  // legacy is not read
  } else if (c.resolved == "GemmaTokenizer") {
    c.pipeline = P::Gemma;
  } else if (byte_level_classes().count(c.resolved)) {
    c.pipeline = P::ByteLevel;
    c.add_prefix_space = flag("add_prefix_space") == 1;  // None -> False
    c.nfc = c.resolved == "GPTNeoXTokenizer" || c.resolved == "Qwen2Tokenizer" || c.resolved == "Qwen3_5Tokenizer";
    if (c.resolved == "Qwen2Tokenizer") c.split_regex = kQwen2Regex;
    if (c.resolved == "Qwen3_5Tokenizer") c.split_regex = kQwen35Regex;
  }
  return c;
}

// tokenizer_config.json's added_tokens_decoder, as transformers adds it (tokenization_utils_base.py _from_pretrained,
// TokenizersBackend.__init__): its entries in id order, each with its own flags, after the json's when the json is
// read as it is (tokenizers' add_tokens: a content already there keeps its id and takes the new flags; a new content
// gets the next id), in place of the json's when the class rebuilt the tokenizer (it starts without added tokens).
void apply_added_tokens_decoder(json& j, const TransformersClass& cls) {
  if (cls.added_tokens_decoder.empty()) return;
  std::map<long long, json> by_id;
  for (const auto& [key, v] : cls.added_tokens_decoder.items()) {
    long long id = -1;
    try {
      size_t used = 0;
      id = std::stoll(key, &used);
      if (used != key.size() || id < 0) id = -1;
    } catch (const std::exception&) {
      id = -1;
    }
    if (id < 0) fail(cls.config_path, "added_tokens_decoder key '" + key + "' is not a token id");
    if (!v.is_object() || !v.contains("content") || !v["content"].is_string())
      fail(cls.config_path, "added_tokens_decoder entry " + key + " has no string content");
    const bool special = v.contains("special") && v["special"].is_boolean() && v["special"].get<bool>();
    json e = {{"id", id}, {"content", v["content"]}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
              {"normalized", !special}, {"special", special}};
    for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized"}) {
      if (!v.contains(flag) || v[flag].is_null()) continue;
      if (!v[flag].is_boolean()) fail(cls.config_path, "added_tokens_decoder entry " + key + ": " + flag + " is not true or false");
      e[flag] = v[flag];
    }
    by_id[id] = std::move(e);
  }
  json list = cls.pipeline == TransformersClass::Pipeline::Json && j.contains("added_tokens") && j["added_tokens"].is_array()
                  ? j["added_tokens"]
                  : json::array();
  for (auto& [id, e] : by_id) list.push_back(std::move(e));
  j["added_tokens"] = std::move(list);
}

// Then every named special token whose content is not an added token yet is added (TokenizersBackend.__init__), as
// AddedToken(content, special=True): not normalized, its own lstrip/rstrip when the config writes a token object.
void apply_named_special_tokens(json& j, const TransformersClass& cls) {
  if (cls.named_special_tokens.empty()) return;
  json list = j.contains("added_tokens") && j["added_tokens"].is_array() ? j["added_tokens"] : json::array();
  std::set<std::string> have;
  for (const json& a : list)
    if (a.is_object() && a.contains("content") && a["content"].is_string()) have.insert(a["content"].get<std::string>());
  for (const json& t : cls.named_special_tokens) {
    if (!have.insert(t["content"].get<std::string>()).second) continue;
    json e = t;
    e["id"] = 0;  // ids are assigned by content on load (bpe_added_tokens.h): the vocab's, else the next free one
    e["normalized"] = false;
    e["special"] = true;
    list.push_back(std::move(e));
  }
  j["added_tokens"] = std::move(list);
}

void apply_transformers_class(json& j, const TransformersClass& cls, const std::string& path) {
  using P = TransformersClass::Pipeline;
  if (!j.is_object()) return;  // the reader names it
  apply_added_tokens_decoder(j, cls);
  apply_named_special_tokens(j, cls);
  if (cls.pipeline == P::Json) return;
  const std::string why = " under " + cls.resolved + ", the class transformers picks for " +
                          (cls.declared.empty() ? std::string("no tokenizer_class") : "tokenizer_class '" + cls.declared + "'") +
                          " and " + (cls.model_type.empty() ? std::string("no model_type") : "model_type '" + cls.model_type + "'");
  json model = j.contains("model") ? j["model"] : json();
  const std::string type = model.is_object() ? model.value("type", std::string(model.contains("merges") ? "BPE" : ""))
                                             : std::string();
  if (type != "BPE")
    fail(path, "model '" + (type.empty() ? std::string("(none)") : type) + "'" + why +
                   ": transformers builds that class as BPE from the json's vocab and merges");
  const bool json_byte_level =
      mentions_byte_level(j.value("pre_tokenizer", json())) || mentions_byte_level(j.value("decoder", json()));
  if (json_byte_level != (cls.pipeline == P::ByteLevel))
    fail(path, std::string(json_byte_level ? "a ByteLevel pre-tokenizer or decoder" : "no ByteLevel pre-tokenizer") +
                   why + ", which transformers reads as " + (json_byte_level ? "characters" : "bytes") +
                   ": its ids would not be the ones this vocabulary was trained with, and statecut does not guess");
  json m = json::object();
  m["type"] = "BPE";
  m["dropout"] = nullptr;
  m["unk_token"] = cls.pipeline == P::CodeLlama || cls.pipeline == P::Gemma ? json("<unk>") : json();
  m["continuing_subword_prefix"] = nullptr;
  m["end_of_word_suffix"] = nullptr;
  m["fuse_unk"] = cls.pipeline != P::ByteLevel;
  m["byte_fallback"] = cls.pipeline != P::ByteLevel;
  m["ignore_merges"] = false;
  m["vocab"] = model.contains("vocab") ? model["vocab"] : json::object();
  m["merges"] = model.contains("merges") ? model["merges"] : json::array();
  j["model"] = std::move(m);
  json decoders = json::array();
  if (cls.pipeline == P::ByteLevel) {
    j["normalizer"] = cls.nfc ? json{{"type", "NFC"}} : json();
    if (cls.split_regex.empty()) {
      j["pre_tokenizer"] = byte_level_step(cls.add_prefix_space, true);
    } else {
      json split = {{"type", "Split"}, {"pattern", {{"Regex", cls.split_regex}}}, {"behavior", "Isolated"}, {"invert", false}};
      j["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers", json::array({split, byte_level_step(cls.add_prefix_space, false)})}};
    }
    j["decoder"] = byte_level_step(true, true);
    return;
  }
  if (cls.pipeline == P::Gemma) {
    j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMeta}};
    j["pre_tokenizer"] = nullptr;  // its Split(" ") finds no space left after the normalizer
  } else {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kMeta},
                          {"prepend_scheme", cls.prepend_scheme}, {"split", false}};
  }
  decoders.push_back({{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}});
  decoders.push_back({{"type", "ByteFallback"}});
  decoders.push_back({{"type", "Fuse"}});
  if (cls.pipeline == P::CodeLlama || (cls.pipeline == P::Llama && cls.add_prefix_space))
    decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1u}, {"stop", 0u}});
  j["decoder"] = {{"type", "Sequence"}, {"decoders", std::move(decoders)}};
}

static std::string describe_class(const TransformersClass& cls) {
  using P = TransformersClass::Pipeline;
  switch (cls.pipeline) {
    case P::Json:  // say so where a named class is not the one transformers uses
      return cls.declared.empty() || without_fast(cls.declared) == cls.resolved
                 ? ""
                 : cls.resolved + " (the json as it is: model_type '" + cls.model_type + "' overrides " + cls.declared + ")";
    case P::Llama:
    case P::CodeLlama: return cls.resolved + " (Metaspace, prepend " + cls.prepend_scheme + ")";
    case P::Gemma: return cls.resolved + " (Replace ' ' -> '" + kMeta + "')";
    case P::ByteLevel:
      return cls.resolved + " (" + (cls.nfc ? "NFC, " : "") + (cls.split_regex.empty() ? "" : "its Split regex, ") +
             "ByteLevel" + (cls.add_prefix_space ? " with a prefix space" : "") + ")";
  }
  return "";
}

std::string describe_pipeline(const TransformersClass& cls) {
  const std::string d = describe_class(cls);
  if (!cls.split_special_tokens) return d;
  return (d.empty() ? cls.resolved + " (" : d.substr(0, d.size() - 1) + ", ") + "special tokens split as text)";
}

}  // namespace statecut
