/// The normalizer of a tokenizer.json, as HF tokenizers 0.23.2 applies it to each piece of text between the added
/// tokens that are not normalized (and to the content of those that are, to match them):
///   NFC                   Unicode NFC (unicode_nfc.h)
///   Prepend(p)            p before a non-empty piece                     (Llama 2's "▁")
///   Replace(String p, c)  each p -> c, left to right, not overlapping  (Llama 2's " " -> "▁")
/// null, one of these, or a Sequence of them in order. Anything else is refused naming it (a Regex Replace, NFKC,
/// Lowercase, Precompiled: those change text statecut would then read differently).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace statecut {

/// `s` with each `from` replaced by `to`, left to right, not overlapping (Rust's str::replace: tokenizers' Replace
/// normalizer and decoder alike); an empty `from` leaves s as it is (the normalizer refuses one at load).
std::string replace_all(std::string_view s, const std::string& from, const std::string& to);

class BpeNormalizer {
 public:
  /// Reads the "normalizer" value; throws std::runtime_error "<path>: unsupported normalizer '<type>' ...".
  static BpeNormalizer from_json(const nlohmann::json& normalizer, const std::string& path);
  /// No step: the text stays as it is.
  bool identity() const { return steps_.empty(); }
  /// False when normalize() may change `s` (NFC steps are skipped where the quick check says NFC leaves s alone).
  bool leaves(std::string_view s) const;
  std::string normalize(std::string_view s) const;

 private:
  enum class Kind { Nfc, Prepend, Replace };
  struct Step {
    Kind kind;
    std::string a, b;  // Prepend: a; Replace: a -> b
  };
  std::vector<Step> steps_;
};

}  // namespace statecut
