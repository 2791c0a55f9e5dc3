/// The added tokens of a tokenizer.json: read as HF tokenizers assigns them on load, and cut out of text as its
/// AddedVocabulary does (bpe_tokenizer.h steps 1 and 2).
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "optimized/text/utf8.h"

namespace statecut::bpe {

/// One entry of "added_tokens" with the id tokenizers gives it.
struct AddedEntry {
  std::string content;
  int32_t id;
  bool normalized, lstrip, rstrip;
  bool special;  // tokenizers' special_tokens_set: once a content is added as special it stays so
};

/// The file's added tokens with the ids tokenizers gives them on load (AddedVocabulary::add_tokens), not the ones
/// the file writes (it only logs a warning when they differ): a content already added keeps its id (the later
/// entry's options win, but special stays once set), a content in the model's vocab takes that id, any other the
/// next id from the vocab's entry count up. The fields are required as tokenizers' AddedToken requires them (it has
/// no defaults); empty contents are skipped. Throws std::runtime_error "<path>: ..." naming the token.
std::vector<AddedEntry> read_added_tokens(const nlohmann::json& file, const std::unordered_map<std::string, int32_t>& vocab,
                                          const std::string& path);

/// A token to cut out of text: its pattern (as matched), id and whitespace options. as_text: a special token under
/// tokenizers' encode_special_tokens (transformers' split_special_tokens): its match is passed over and its text stays
/// text, as AddedVocabulary::find_matches skips it (the matches after it are found as before).
struct AddedToken {
  std::string pattern;  // content, normalized by the file's normalizer when the token is normalized
  int32_t id;
  bool lstrip, rstrip;
  bool as_text = false;
};

/// Added tokens matched leftmost-longest; candidates indexed by first byte, longest first.
struct AddedSet {
  std::vector<AddedToken> tokens;
  std::array<std::vector<int32_t>, 256> by_first{};

  void finish() {
    for (size_t i = 0; i < tokens.size(); ++i)
      by_first[static_cast<unsigned char>(tokens[i].pattern[0])].push_back(static_cast<int32_t>(i));
    for (auto& v : by_first)
      std::stable_sort(v.begin(), v.end(),
                       [&](int32_t a, int32_t b) { return tokens[a].pattern.size() > tokens[b].pattern.size(); });
  }

  /// Calls text(piece) for the text between tokens and token(id) for each token, in order (HF's find_matches: the
  /// leftmost-longest matches on the raw text, each then widened by its lstrip/rstrip, never back past the previous).
  template <class Text, class Token>
  void split(std::string_view s, Text&& text, Token&& token) const {
    size_t done = 0, pos = 0;
    while (pos < s.size()) {
      const AddedToken* hit = nullptr;
      for (int32_t i : by_first[static_cast<unsigned char>(s[pos])]) {
        if (s.compare(pos, tokens[i].pattern.size(), tokens[i].pattern) == 0) {
          hit = &tokens[i];
          break;
        }
      }
      if (!hit) {
        ++pos;
        continue;
      }
      if (hit->as_text) {
        pos += hit->pattern.size();
        continue;
      }
      size_t start = pos, stop = pos + hit->pattern.size(), bad = 0;
      while (hit->lstrip && start > done) {  // take in the White_Space before, not past the previous token
        size_t k = start - 1;
        while (k > done && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        size_t j = k;
        if (!utf8::white_space(utf8::next(s, j))) break;
        start = k;
      }
      while (hit->rstrip && stop < s.size()) {
        size_t j = stop;
        if (!utf8::white_space(utf8::next(s, j))) break;
        stop += utf8::valid_seq(s, stop, bad);
      }
      if (start > done) text(s.substr(done, start - done));
      token(hit->id);
      // The next match is searched from this match's end, not from past its rstrip: tokenizers finds every match
      // on the raw text first (Aho-Corasick) and strips after, so a token may start inside the whitespace the last
      // one took ("<X> <Y>" with <X> rstrip and " <Y>" a token: both, audit 26 D2).
      pos += hit->pattern.size();
      done = stop;
    }
    if (done < s.size()) text(s.substr(done));
  }
};

}  // namespace statecut::bpe
