/// The tokenizer class a checkpoint folder names, and the pipeline transformers 5 builds for it from tokenizer.json.
///
/// transformers 5's AutoTokenizer reads tokenizer.json as it is only for classes without their own `__init__`
/// (TokenizersBackend, PreTrainedTokenizerFast, GPT2Tokenizer, ...). A class with one takes just the json's vocab,
/// merges, added tokens and post-processor and builds the rest itself (tokenization_utils_tokenizers.py,
/// convert_to_native_format). LlamaTokenizer (alias LlamaTokenizerFast; the class of Llama 2, Mistral, Phi-3 and of
/// fla-hub's DeltaNet/Gated DeltaNet checkpoints, which ship Mistral's tokenizer) builds (models/llama/
/// tokenization_llama.py):
///   model        BPE(vocab, merges, fuse_unk=true, byte_fallback=true), no unk token, no dropout
///   normalizer   none                      (the json's Prepend("▁") + Replace(" ", "▁") are dropped)
///   pre_tokenizer Metaspace("▁", prepend_scheme, split=false), prepend_scheme
///                  "never"  when add_prefix_space is false,
///                  "first"  when it is true or unset and legacy is false, null or unset (5.x's default),
///                  "always" when it is true or unset and legacy is true
///   decoder      Replace("▁" -> " "), ByteFallback, Fuse, then Strip(" ", 1 leading) when add_prefix_space
/// add_prefix_space and legacy come from tokenizer_config.json. On a json in Llama 2's form (Prepend + Replace
/// normalizers) this gives other ids than tokenizers on the same json for a text that starts with a space or follows an
/// added token ("first" vs the json's "▁" before every piece): 114 of 683 texts on Phi-3-mini, measured with
/// transformers 5.17 (bench/README, 41st wave). statecut gives transformers' ids: they are what the model sees in a
/// user's pipeline (AutoTokenizer, lm-eval).
///
/// A json whose pre-tokenizer or decoder is ByteLevel under LlamaTokenizer is refused: transformers would read a
/// byte-level vocabulary through Metaspace and give ids the model was not trained on, and statecut does not guess
/// which of the two the model saw.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace statecut {

struct TransformersClass {
  std::string name;            // tokenizer_config.json's tokenizer_class; "" without one
  std::string config_path;     // the tokenizer_config.json read; "" when absent
  bool llama = false;          // LlamaTokenizer / LlamaTokenizerFast: the pipeline above
  bool add_prefix_space = true;
  std::string prepend_scheme;  // llama: "always", "first" or "never"
};

/// dir/tokenizer_config.json's class (none when the file is absent). Throws std::runtime_error
/// "<dir>/tokenizer_config.json: <problem>" for a file transformers could not read (malformed JSON, not an object,
/// tokenizer_class not a string, legacy or add_prefix_space not true, false or null).
TransformersClass read_transformers_class(const std::string& dir);

/// Rewrites `tokenizer_json` (the parsed tokenizer.json at `path`) into the pipeline transformers builds for `cls`
/// (nothing for a class that reads the json as it is). Throws std::runtime_error "<path>: ..." when the class does not
/// fit the file (a model other than BPE, a ByteLevel pre-tokenizer or decoder).
void apply_transformers_class(nlohmann::json& tokenizer_json, const TransformersClass& cls, const std::string& path);

/// "" for a class that reads the json as it is; else e.g. "LlamaTokenizer (Metaspace, prepend first)".
std::string describe_pipeline(const TransformersClass& cls);

}  // namespace statecut
