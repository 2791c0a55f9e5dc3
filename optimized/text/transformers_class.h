/// The tokenizer class transformers 5's AutoTokenizer picks for a checkpoint folder, and the pipeline it builds for it
/// from tokenizer.json.
///
/// Which class (models/auto/tokenization_auto.py, 5.x after PR #44127): `hub` is tokenizer_config.json's
/// tokenizer_class (else config.json's), "Fast" dropped; `registered` is the class its mapping gives config.json's
/// model_type (table in transformers_class.cpp: gpt_neox/mamba/mamba2 GPTNeoXTokenizer, qwen2/qwen3/qwen3_next
/// Qwen2Tokenizer, qwen3_5 Qwen3_5Tokenizer, gpt2/phi GPT2Tokenizer; mistral, mixtral, phi3 and the other types it
/// routes to TokenizersBackend; llama, delta_net, gated_deltanet and unknown types have none).
///   hub and registered both known and different: registered when it is TokenizersBackend (the json as it is) or the
///     type is qwen2 (whose hub class transformers overrides); else hub
///   hub only: hub            registered only: registered            neither: TokenizersBackend
///
/// What it builds: TokenizersBackend (alias PreTrainedTokenizerFast) and any class statecut does not know read
/// tokenizer.json as it is. A class with its own `__init__` takes only the json's vocab, merges and added tokens
/// (tokenization_utils_tokenizers.py, convert_to_native_format) and builds the rest itself:
///   LlamaTokenizer     BPE(fuse_unk, byte_fallback, no unk), no normalizer, Metaspace("▁", split=false) with
///                      prepend_scheme "never" when add_prefix_space is false, else "always" when legacy is true,
///                      else "first" (legacy false, null or unset: 5.x's default); decoder Replace("▁" -> " "),
///                      ByteFallback, Fuse, then Strip(" ", 1 leading) when add_prefix_space (unset: true)
///   CodeLlamaTokenizer the same with unk "<unk>", prepend "first"/"never" from add_prefix_space alone, Strip always
///   GemmaTokenizer     BPE(fuse_unk, byte_fallback, unk "<unk>"), normalizer Replace(" " -> "▁"), no prepend;
///                      decoder Replace, ByteFallback, Fuse
///   GPT2Tokenizer, RobertaTokenizer, CodeGenTokenizer, WhisperTokenizer
///                      BPE (no unk, no byte_fallback, ignore_merges false), no normalizer, ByteLevel(add_prefix_space
///                      (unset: false), GPT-2's regex), decoder ByteLevel
///   GPTNeoXTokenizer   the same with an NFC normalizer
///   Qwen2Tokenizer, Qwen3_5Tokenizer  NFC, Split(its regex, isolated), ByteLevel(add_prefix_space, no regex); Qwen3.5's
///                      regex joins combining marks (\p{M}) to letters, the json Qwen3.5 ships has Qwen2's
/// On Phi-3-mini's json (Llama 2's form: Prepend + Replace) without a config.json, transformers 5.17 gave other ids
/// than tokenizers on 114 of 683 texts (bench/README, 41st wave); with model_type mistral it read Mistral's json as it
/// is. On 31 edited variants of the real folders (legacy, add_prefix_space, tokenizer_class, model_type) transformers
/// 5.17 picked the class this table gives every time, and statecut's ids equal its ids on all 40 folders statecut
/// reads (42nd wave). statecut gives transformers' ids: they are what the model sees in a user's pipeline
/// (AutoTokenizer, lm-eval).
/// A class that does not fit the json (a Metaspace class over a ByteLevel json, or the reverse) is refused: transformers
/// would give ids the model was not trained on, and statecut does not guess which of the two the model saw.
/// Added tokens: where tokenizer_config.json has added_tokens_decoder, its entries (in id order, with their own
/// flags) are added after the json's when the json is read as it is, and replace them when the class rebuilds the
/// tokenizer; then each named special token (bos_token ... mask_token, additional/extra_special_tokens) not among
/// them is added as a special token; ids as tokenizers assigns them (bpe_added_tokens.h). split_special_tokens true
/// (every class: TokenizersBackend sets tokenizers' encode_special_tokens from it) makes the special ones text when
/// encoding: their ids still decode to their content, but no text is cut into them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace statecut {

struct TransformersClass {
  enum class Pipeline { Json, Llama, CodeLlama, Gemma, ByteLevel };
  std::string declared;     // tokenizer_config.json's tokenizer_class, else config.json's; "" without one
  std::string model_type;   // config.json's; "" without one
  std::string resolved;     // the class AutoTokenizer picks, "Fast" dropped
  std::string config_path;  // the tokenizer_config.json read ("" when absent)
  Pipeline pipeline = Pipeline::Json;
  bool add_prefix_space = false;
  std::string prepend_scheme;  // Metaspace classes: "always", "first" or "never"
  bool nfc = false;            // ByteLevel classes: an NFC normalizer
  std::string split_regex;     // ByteLevel classes: a Split(isolated) before ByteLevel(use_regex false); "" = GPT-2's regex
  nlohmann::json added_tokens_decoder = nlohmann::json::object();  // tokenizer_config.json's, when it has one
  std::vector<nlohmann::json> named_special_tokens;  // its bos/eos/unk/sep/pad/cls/mask and extra special tokens
  bool split_special_tokens = false;                  // tokenizer_config.json's (null: false)
  std::string auto_tokenizer;       // auto_map's AutoTokenizer class ("module.Class"), "" without one
  std::string auto_tokenizer_file;  // the file whose auto_map names it (tokenizer_config.json, else config.json)
};

/// A JSON file as HF's readers take it: a UTF-8 byte order mark refused (nlohmann would skip it). Throws
/// std::runtime_error "<path>: cannot open", "...: starts with a UTF-8 byte order mark, which <reader> refuses" or
/// "...: malformed JSON: ...".
nlohmann::json read_hf_json(const std::string& path, const std::string& reader);

/// "" unless the folder's tokenizer is its own Python code, and then why statecut does not read it:
/// tokenizer_config.json (or config.json) maps AutoTokenizer to a class of the checkpoint's (auto_map, e.g. ChatGLM's
/// "tokenization_chatglm.ChatGLMTokenizer"), and transformers has no class of its own for the folder (tokenizer_class
/// names none statecut knows transformers has, and model_type none transformers registers). transformers then runs
/// that code only with trust_remote_code, and it may build any ids (ChatGLM's adds its own prefix tokens to
/// SentencePiece's): read as a plain tokenizer.json or tokenizer.model, the ids would be wrong with no sign. A
/// configuration file that does not read leaves this "" (the tokenizer's own reading names it).
std::string remote_tokenizer_code(const std::string& dir);

/// The class AutoTokenizer picks for `declared` (tokenizer_class, with or without "Fast") and `model_type` (rules above).
std::string resolve_tokenizer_class(const std::string& declared, const std::string& model_type);

/// The folder's class and pipeline, from dir/tokenizer_config.json and dir/config.json (either may be absent). Throws
/// std::runtime_error "<file>: <problem>" for a file transformers could not read (not a regular file, malformed JSON,
/// a byte order mark, not an object, tokenizer_class or model_type not a string, legacy or add_prefix_space not true,
/// false or null where the class reads them, split_special_tokens not true, false or null, added_tokens_decoder not
/// an object of id -> token).
TransformersClass read_transformers_class(const std::string& dir);

/// Rewrites `tokenizer_json` (the parsed tokenizer.json at `path`) into the pipeline of `cls` (nothing for Json).
/// Throws std::runtime_error "<path>: ..." when the class does not fit the file.
void apply_transformers_class(nlohmann::json& tokenizer_json, const TransformersClass& cls, const std::string& path);

/// "" for the json as it is under the class named (or none); else e.g. "LlamaTokenizer (Metaspace, prepend first)",
/// or "TokenizersBackend (the json as it is: model_type 'mistral' overrides LlamaTokenizer)".
std::string describe_pipeline(const TransformersClass& cls);

}  // namespace statecut
