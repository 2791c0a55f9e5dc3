/// The decoder of a tokenizer.json whose model works on characters (SentencePiece converted to BPE: Llama 2, Mistral,
/// Phi-3, Gemma), as HF tokenizers 0.23.2 decodes: every id's token string (an added token's content, else its vocab
/// string) goes through each step's decode_chain in order, and the resulting strings are joined.
///   Replace(String p, c)  in every token, each p -> c                     ("▁" -> " ")
///   ByteFallback          each run of byte tokens <0xHH> -> their bytes as one string when valid UTF-8, else one
///                         U+FFFD per byte
///   Fuse                  all tokens -> one
///   Strip(c, start, stop) in every token, up to `start` leading and `stop` trailing characters c removed
///   Metaspace(r, scheme)  in every token r -> " ", except that the first token loses every r when the scheme is not
///                         "never" (HF's quirk, kept)
/// A Sequence of these, or one alone; null (no decoder): the token strings joined by " ", as tokenizers does. Byte-level
/// BPE keeps its own ByteLevel decoder (bpe_tokenizer.h).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace statecut {

/// A Metaspace step's (pre-tokenizer or decoder) prepend scheme, "always", "first" or "never", as tokenizers reads
/// it: prepend_scheme when given, else from the older add_prefix_space (default true: "always"); add_prefix_space
/// false with any scheme but "never" is a file tokenizers refuses, and so is a replacement that is not one
/// character. Throws std::runtime_error "<path>: <what> ...".
std::string metaspace_scheme(const nlohmann::json& step, const std::string& path, const std::string& what);
/// The step's replacement (one character); throws as above.
std::string metaspace_replacement(const nlohmann::json& step, const std::string& path, const std::string& what);

class BpeDecoder {
 public:
  /// Reads the "decoder" object; throws std::runtime_error "<path>: unsupported decoder '<type>' ..." for any other.
  static BpeDecoder from_json(const nlohmann::json& decoder, const std::string& path);
  std::string decode(std::vector<std::string> tokens) const;

 private:
  enum class Kind { Replace, ByteFallback, Fuse, Strip, Metaspace };
  struct Step {
    Kind kind;
    std::string from, to;   // Replace: pattern, content; Strip: the character; Metaspace: the replacement
    size_t start = 0, stop = 0;
    bool first_drops = true;  // Metaspace: the first token drops its replacements (scheme not "never")
  };
  std::vector<Step> steps_;
  std::string joiner_;  // " " without a decoder
};

}  // namespace statecut
