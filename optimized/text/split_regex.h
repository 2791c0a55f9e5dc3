/// A pre-tokenizer regex as HF `tokenizers` runs it (Oniguruma), run by PCRE2 (UTF, UCP, JIT), and the split it
/// makes with behavior Isolated: the matches and the non-empty gaps between them, in order, cover the text.
///   split("ab  12", /\p{L}+|\p{N}+/) = ["ab", "  ", "12"]
/// Matching starts where the last match ended (lookbehind sees the whole text); an empty match matches nothing and
/// moves one character on, as Oniguruma's find_iter does.
///
/// Where PCRE2 10.42 (Unicode 14) and HF's Oniguruma (Unicode 16) disagree, the pattern is rewritten to read as
/// Oniguruma does: \p{L} and \p{N} take the letters and numbers assigned in Unicode 15.0-16.0, and \s (and \S
/// outside a class) is Unicode White_Space, without U+180E that PCRE2 adds. Both lists were found by matching every
/// code point with tokenizers 0.23.2 and with PCRE2. Other property escapes (\p{Lu}, \w, \d) are left as PCRE2
/// reads them.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace statecut {

class SplitRegex {
 public:
  /// Compiles `pattern`; throws std::runtime_error "<path>: ..." (path names the file it came from).
  SplitRegex(const std::string& pattern, const std::string& path);
  SplitRegex(SplitRegex&&) noexcept;
  SplitRegex& operator=(SplitRegex&&) noexcept;
  ~SplitRegex();

  /// Appends the pieces of `text` (valid UTF-8) to `pieces`.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

  /// `pattern` as compiled (see the header comment).
  static std::string widen(const std::string& pattern);

 private:
  struct Code;
  std::unique_ptr<Code> code_;
  std::string path_;
};

/// `s` with the regex metacharacters escaped (a Split pattern given as {"String": s}).
std::string regex_escape(const std::string& s);

/// GPT-2's pre-tokenizer regex (HF's ByteLevel with use_regex).
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace statecut
