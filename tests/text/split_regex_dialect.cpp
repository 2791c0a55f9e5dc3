// SplitRegex reads a pre-tokenizer pattern as HF `tokenizers` (Oniguruma, Ruby syntax, Unicode 16) reads it, or
// refuses it: each expected split below is what tokenizers 0.23 makes (the split rules of rust-onig's find_iter and
// HF's Split, Isolated), each refusal a construct PCRE2 would silently read another way.
// Inputs have meaning: U+1FA77 (pink heart, So since Unicode 15), U+11F04 (Kawi letter, Lo since 15), U+0301 (a
// combining mark Oniguruma's \w takes and PCRE2's leaves out), "ab\ncd" (line against subject anchors), "abx" (\h is
// a hex digit in Oniguruma, so it stops before the x), empty-matching patterns (they cut before every character).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "optimized/text/split_regex.h"

namespace statecut {
namespace {

std::vector<std::string> dialect_split(const std::string& pattern, const std::string& text) {
  const SplitRegex re(pattern, "tokenizer.json");
  std::vector<std::string_view> pieces;
  re.split(text, pieces);
  return {pieces.begin(), pieces.end()};
}

using DialectPieces = std::vector<std::string>;

TEST(Dialect_SplitRegex, symbolsAssignedAfterUnicode14AreSymbols) {
  // DeepSeek-V3's punctuation-and-symbols branch: " 🩷" is one piece, as Oniguruma (Unicode 16) has U+1FA77 as So
  EXPECT_EQ(dialect_split(R"( ?[\p{P}\p{S}]+)", "love \xF0\x9F\xA9\xB7!"), (DialectPieces{"love", " \xF0\x9F\xA9\xB7!"}));
  EXPECT_EQ(dialect_split(R"(\p{So})", "a\xF0\x9F\xA9\xB7" "b"), (DialectPieces{"a", "\xF0\x9F\xA9\xB7", "b"}));
}

TEST(Dialect_SplitRegex, lettersAssignedAfterUnicode14AreLetters) {
  EXPECT_EQ(dialect_split(R"(\p{Lo}+)", "a\xF0\x91\xBC\x84"), (DialectPieces{"a", "\xF0\x91\xBC\x84"}));  // U+11F04 Kawi
  EXPECT_EQ(dialect_split(R"([^\p{Lo}]+)", "a\xF0\x91\xBC\x84"), (DialectPieces{"a", "\xF0\x91\xBC\x84"}));
  EXPECT_EQ(dialect_split(R"(\P{Lo}+)", "a\xF0\x91\xBC\x84"), (DialectPieces{"a", "\xF0\x91\xBC\x84"}));
}

TEST(Dialect_SplitRegex, wordClassTakesCombiningMarks) {
  const std::string nfd_cafe = "cafe\xCC\x81";  // e + U+0301
  EXPECT_EQ(dialect_split(R"(\w+|[^\w\s]+|\s+)", nfd_cafe + " x"), (DialectPieces{nfd_cafe, " ", "x"}));
  EXPECT_EQ(dialect_split(R"(\b)", nfd_cafe + " x"), (DialectPieces{nfd_cafe, " ", "x"}));  // boundaries by the same class
  EXPECT_EQ(dialect_split(R"(\W+)", nfd_cafe + "!?"), (DialectPieces{nfd_cafe, "!?"}));
}

// Inside a character class PCRE2 takes a bare class body only: an escape whose Unicode 16 class removes code points
// from PCRE2's (\p{Mn}, \p{C}) or a negated one that adds some (\P{L}, \W) cannot be written there and is refused,
// naming the escape as the pattern spells it; the forms that can (an addition, a negation with nothing to add) still
// split as tokenizers does: U+A7CB is Lu since Unicode 16, U+01C5 is Lt.
TEST(Dialect_SplitRegex, classEscapesPcre2CannotReadAsOnigurumaAreRefusedByName) {
  for (const auto& [pattern, spelled] : std::vector<std::pair<std::string, std::string>>{
           {R"([\p{Mn}]+)", R"(\p{Mn})"}, {R"([a\p{C}])", R"(\p{C})"}, {R"([\P{L}x])", R"(\P{L})"},
           {R"([^\W])", R"(\W)"}, {R"([\p{^Lu}])", R"(\p{^Lu})"}}) {
    try {
      const SplitRegex re(pattern, "tokenizer.json");
      ADD_FAILURE() << pattern << " was accepted";
    } catch (const std::runtime_error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("uses " + spelled + " inside a character class"), std::string::npos) << pattern << ": " << msg;
      EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(dialect_split(R"([\p{Lu}]+)", "x\xEA\x9F\x8B" "Yz"), (DialectPieces{"x", "\xEA\x9F\x8B" "Y", "z"}));
  EXPECT_EQ(dialect_split(R"([\P{Lt}]+)", "a\xC7\x85" "b"), (DialectPieces{"a", "\xC7\x85", "b"}));
}

TEST(Dialect_SplitRegex, caretAndDollarAreLineAnchors) {
  EXPECT_EQ(dialect_split(R"(^[a-z]+)", "ab\ncd"), (DialectPieces{"ab", "\n", "cd"}));
  EXPECT_EQ(dialect_split(R"(\s+$)", "a  \nb"), (DialectPieces{"a", "  ", "\nb"}));
}

TEST(Dialect_SplitRegex, escapesTakeOnigurumasMeaning) {
  EXPECT_EQ(dialect_split(R"(\h+)", "abx zz"), (DialectPieces{"ab", "x zz"}));     // hex digits, not horizontal space
  EXPECT_EQ(dialect_split(R"(\v)", "a\x0B\nb"), (DialectPieces{"a", "\x0B", "\nb"}));  // the vertical tab alone
  EXPECT_EQ(dialect_split(R"(\u0041+)", "xAAy"), (DialectPieces{"x", "AA", "y"}));
  EXPECT_EQ(dialect_split(R"(\.1234)", "x.1234y"), (DialectPieces{"x", ".1234", "y"}));  // hex digits after \.: no \u
  EXPECT_EQ(dialect_split(R"(a{,2})", "aaab"), (DialectPieces{"aa", "a", "b"}));   // {,n} = {0,n}
}

TEST(Dialect_SplitRegex, emptyMatchesCutTheText) {
  // rust-onig yields an empty match unless it sits where the last match ended; HF cuts there
  EXPECT_EQ(dialect_split("x*", "hello"), (DialectPieces{"h", "e", "l", "l", "o"}));
  EXPECT_EQ(dialect_split("a*", "baab"), (DialectPieces{"b", "aa", "b"}));
  EXPECT_EQ(dialect_split("x*", ""), DialectPieces{});
}

std::vector<std::string> behavior_split(const std::string& pattern, const std::string& text, SplitBehavior b,
                                        bool invert = false) {
  const SplitRegex re(pattern, "tokenizer.json");
  std::vector<std::string_view> pieces;
  re.split(text, pieces, b, invert);
  return {pieces.begin(), pieces.end()};
}

// HF's SplitDelimiterBehavior on its own documentation's example, "the-final--countdown" split on "-" (a run of two
// delimiters shows where the behaviors part ways); invert makes the matches the content and the gaps the delimiters
// (OLMo-2's and CLIP's Split: Removed with invert keeps only what the regex matches).
TEST(Dialect_SplitRegex, everySplitBehaviorJoinsOrDropsTheDelimitersAsTokenizersDoes) {
  const std::string t = "the-final--countdown";
  EXPECT_EQ(behavior_split("-", t, SplitBehavior::Isolated), (DialectPieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(behavior_split("-", t, SplitBehavior::Removed), (DialectPieces{"the", "final", "countdown"}));
  EXPECT_EQ(behavior_split("-", t, SplitBehavior::MergedWithPrevious), (DialectPieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(behavior_split("-", t, SplitBehavior::MergedWithNext), (DialectPieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(behavior_split("-", t, SplitBehavior::Contiguous), (DialectPieces{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(behavior_split("-", t, SplitBehavior::Removed, true), (DialectPieces{"-", "-", "-"}));
  EXPECT_EQ(behavior_split("-", t, SplitBehavior::MergedWithPrevious, true),
            (DialectPieces{"the", "-final", "-", "-countdown"}));
  // A regex that does not cover the text: the uncovered spaces go with Removed + invert.
  EXPECT_EQ(behavior_split(R"(\p{L}+|\p{N})", "ab  12 c", SplitBehavior::Removed, true),
            (DialectPieces{"ab", "1", "2", "c"}));
  // An empty match where the last match ended is not one (rust-onig): "a*" on "baab" has no delimiter at 3.
  EXPECT_EQ(behavior_split("a*", "baab", SplitBehavior::MergedWithNext), (DialectPieces{"b", "aab"}));
  SplitBehavior b;
  EXPECT_TRUE(parse_split_behavior("MergedWithNext", b));
  EXPECT_EQ(b, SplitBehavior::MergedWithNext);
  EXPECT_FALSE(parse_split_behavior("mergedWithNext", b));
}

TEST(Dialect_SplitRegex, gpt2AndQwenPatternsSplitAsBefore) {
  EXPECT_EQ(dialect_split(kGpt2Pattern, "Hello world's 123  !"),
            (DialectPieces{"Hello", " world", "'s", " 123", " ", " !"}));
  const std::string qwen =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(dialect_split(qwen, "I'LL pay 42\n\n ok"), (DialectPieces{"I", "'LL", " pay", " ", "4", "2", "\n\n", " ok"}));
}

TEST(Dialect_SplitRegex, constructsReadDifferentlyAreRefused) {
  for (const std::string p : {R"(\pL+)", R"(\p{Han}+)", R"([a[bc]])", R"([a-z&&[^c]])", R"([[:alpha:]]+)", "(?m).",
                              R"((a)\1)", R"(\R)", R"(\X)", R"(\K)", R"([\W])", R"([\p{Cn}])", R"([\P{L}])"}) {
    try {
      SplitRegex(p, "dir/tokenizer.json");
      ADD_FAILURE() << p << " was accepted";
    } catch (const std::runtime_error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("dir/tokenizer.json: pre_tokenizer regex uses ", 0), 0u) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace statecut
