/// BpeTokenizer's rules that no real tokenizer of the goldens exercises, each on tests/text/tiny_bpe.h's tiny
/// tokenizer with one part changed. The expected ids follow HF tokenizers' semantics (its source, model/bpe and
/// added_vocabulary.rs), worked out by hand in each comment. Each test was seen to fail with the rule broken
/// (tools' mutation run over optimized/text, 2026-12-06: these rules were the survivors).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "optimized/text/bpe_tokenizer.h"
#include "optimized/text/unicode_nfc.h"
#include "optimized/text/utf8.h"
#include "tests/text/tiny_bpe.h"

using nlohmann::json;
using statecut::BpeTokenizer;
using Ids = std::vector<int64_t>;
using statecut::test::load_json;

namespace {

/// The tiny tokenizer without its added token: tokenizers gives an added token that is not in the vocab the id
/// "vocab entries so far" (bpe_added_tokens.h), which tests that add vocab entries would otherwise collide with.
json without_added() {
  json j = statecut::test::tiny_tokenizer();
  j["added_tokens"] = json::array();
  return j;
}

/// The tiny tokenizer as a character-level BPE (no pre-tokenizer, decoder Fuse) with "<unk>" (id 300) as its
/// unk_token: a character outside the vocab ("€" is not one of the 256 byte symbols) is unknown.
json character_bpe(bool fuse_unk) {
  json j = without_added();
  j["pre_tokenizer"] = nullptr;
  j["decoder"] = {{"type", "Fuse"}};
  j["model"]["vocab"]["<unk>"] = 300;
  j["model"]["unk_token"] = "<unk>";
  j["model"]["fuse_unk"] = fuse_unk;
  return j;
}

const std::string kEuro = "\xE2\x82\xAC";

}  // namespace

TEST(Unit_BpeRules, aMergeListedTwiceKeepsItsLaterRank) {
  // merges: a+b (rank 0), b+c (1), a+b again (2). tokenizers builds its merge map by inserting in list order, so a+b
  // ranks 2 and b+c merges first in "abc": a, bc. The earlier rank would give ab, c.
  json j = without_added();
  j["model"]["vocab"]["bc"] = 259;
  j["model"]["merges"] = json::array({json::array({"a", "b"}), json::array({"b", "c"}), json::array({"a", "b"})});
  EXPECT_EQ(load_json(j).encode("abc"), (Ids{'a', 259}));
  EXPECT_EQ(load_json(j).encode("ab"), (Ids{256}));  // the pair still merges
}

TEST(Unit_BpeRules, unknownCharactersAreOneUnkEachUnlessFused) {
  // "a€€b": a, unk, unk, b; fuse_unk joins the run of unknowns into one unk.
  const std::string text = "a" + kEuro + kEuro + "b";
  EXPECT_EQ(load_json(character_bpe(false)).encode(text), (Ids{'a', 300, 300, 'b'}));
  EXPECT_EQ(load_json(character_bpe(true)).encode(text), (Ids{'a', 300, 'b'}));
  EXPECT_EQ(load_json(character_bpe(false)).encode(kEuro + "ab" + kEuro), (Ids{300, 256, 300}));
}

TEST(Unit_BpeRules, byteFallbackSpellsAnUnknownCharacterWithItsByteTokensWhateverTheirIds) {
  // "€" (E2 82 AC) is not in the vocab; with byte_fallback its three <0xHH> tokens stand for it, the first of them at
  // id 0 (the byte symbol that held 0 moved to 262). A byte without its token makes the character unk.
  json j = character_bpe(false);
  j["model"]["byte_fallback"] = true;
  j["model"]["vocab"][statecut::test::byte_symbol(0)] = 262;
  j["model"]["vocab"]["<0xE2>"] = 0;
  j["model"]["vocab"]["<0x82>"] = 263;
  j["model"]["vocab"]["<0xAC>"] = 264;
  EXPECT_EQ(load_json(j).encode("a" + kEuro), (Ids{'a', 0, 263, 264}));
  j["model"]["vocab"].erase("<0xAC>");
  EXPECT_EQ(load_json(j).encode("a" + kEuro), (Ids{'a', 300}));
}

TEST(Unit_BpeRules, characterDecodeSkipsIdsOutsideTheVocabulary) {
  // tokenizers' decode drops ids it has no token for; the rest are fused.
  const BpeTokenizer tok = load_json(character_bpe(false));
  EXPECT_EQ(tok.decode({'a', -1, 5000, 'b', 299, 257}), "ababc");  // 299: a gap in the sparse ids
}

TEST(Unit_BpeRules, byteFallbackDecodesTheZeroByteAndMetaspaceEveryToken) {
  // ByteFallback turns a run of <0xHH> tokens into its bytes, <0x00> too; the Metaspace decoder turns every "▁" into
  // " ", except in the first token, where (prepend_scheme always) each "▁" is dropped.
  const std::string meta = "\xE2\x96\x81";
  json j = character_bpe(false);
  j["model"]["vocab"]["<0x00>"] = 260;
  j["model"]["vocab"][meta] = 261;
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({{{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}};
  EXPECT_EQ(load_json(j).decode({260, 'a', 260}), std::string("\0a\0", 3));
  j["model"]["vocab"]["<0x41]"] = 262;  // six characters from "<0x" but no byte token: itself
  EXPECT_EQ(load_json(j).decode({262, 260}), std::string("<0x41]\0", 7));
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", meta}, {"prepend_scheme", "always"}, {"split", true}};
  const BpeTokenizer tok = load_json(j);
  EXPECT_EQ(tok.decode({261, 'a', 261, 'b', 261}), "a b ");
  EXPECT_EQ(tok.decode({'a', 261, 261, 'b'}), "a  b");
}

TEST(Unit_BpeRules, aReplaceNormalizerRewritesEveryPieceHoldingItsPattern) {
  // Replace("x" -> "ab") alone: "xc" normalizes to "abc", one token by the merges a+b, ab+c; left as it is, "x" and
  // "c" would be two byte tokens.
  json j = statecut::test::tiny_tokenizer();
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", "x"}}}, {"content", "ab"}};
  const BpeTokenizer tok = load_json(j);
  EXPECT_EQ(tok.encode("xc"), (Ids{257}));
  EXPECT_EQ(tok.encode("c<eos>xc"), (Ids{'c', 258, 257}));  // each piece between added tokens
  EXPECT_EQ(tok.encode("c"), (Ids{'c'}));
}

TEST(Unit_BpeRules, anLstripTokenTakesInEveryWhiteSpaceCharacterBeforeIt) {
  // lstrip takes the chars before the token for which Rust's char::is_whitespace holds (White_Space: tab, LF, VT,
  // FF, CR, space, NBSP, U+3000, ...), back to the previous token; what is taken is no token of its own.
  json j = statecut::test::tiny_tokenizer();
  j["added_tokens"][0] = statecut::test::added("<eos>", 258, false, true);
  const BpeTokenizer tok = load_json(j);
  EXPECT_EQ(tok.encode("ab\t<eos>"), (Ids{256, 258}));
  EXPECT_EQ(tok.encode("ab \t\n\r\x0B\x0C<eos>"), (Ids{256, 258}));
  EXPECT_EQ(tok.encode("ab\xE3\x80\x80<eos>"), (Ids{256, 258}));      // U+3000
  EXPECT_EQ(tok.encode("ab\x1F<eos>"), (Ids{256, 0x1F, 258}));         // U+001F is no White_Space
  EXPECT_EQ(tok.encode("<eos>\t<eos>"), (Ids{258, 258}));
}

TEST(Unit_Nfc, aHangulSyllableWithAFinalIsRecomposedBesideAMark) {
  // A mark after 한 (U+D55C: L U+1112, V U+1161, T U+11AB) opens the syllable's segment: NFC decomposes it into
  // its jamo and composes them back (Unicode's algorithm; no composite of U+D55C and U+0301 exists).
  EXPECT_EQ(statecut::nfc("\xED\x95\x9C\xCC\x81"), "\xED\x95\x9C\xCC\x81");
  EXPECT_EQ(statecut::nfc("\xEA\xB0\x81\xCC\x81"), "\xEA\xB0\x81\xCC\x81");  // 각 U+AC01 (T U+11A8, the first)
}

TEST(Unit_Utf8, rstripStopsAtBytesThatEndNoCharacter) {
  using statecut::utf8::rstrip_python_space;
  EXPECT_EQ(rstrip_python_space("ab \t\n\r\x0B\x0C\x1C\x1F"), 2u);
  EXPECT_EQ(rstrip_python_space("ab\xE3\x80\x80\xC2\xA0"), 2u);  // U+3000, U+00A0
  EXPECT_EQ(rstrip_python_space("   "), 0u);
  EXPECT_EQ(rstrip_python_space(""), 0u);
  // Continuation bytes only: no character ends the text, so nothing is stripped (and the scan back stays inside).
  EXPECT_EQ(rstrip_python_space("\x80\x80\x80\x80\x80"), 5u);
  EXPECT_EQ(rstrip_python_space("\x80\x80 "), 2u);
  EXPECT_EQ(rstrip_python_space("a\xE3\x80"), 3u);  // a truncated U+3000
}
