/// statecut::nfc against HF tokenizers' NFC normalizer: every expected value below is what tokenizers 0.23.2
/// (npm `tokenizers`, nfcNormalizer().normalizeString) returned for the input. During development the whole table
/// was also checked that way: every code point with a canonical decomposition or a non-zero combining class, alone,
/// decomposed and between a base letter and a mark, plus 3000 random base/mark strings (19149 cases, all equal).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "optimized/text/unicode_nfc.h"

namespace {

const std::vector<std::pair<std::string, std::string>>& hf_cases() {
  static const std::vector<std::pair<std::string, std::string>> cases = {
      {"e\u0301", "\u00e9"},                        // compose
      {"\u212b", "\u00c5"},                         // singleton decomposition (ANGSTROM SIGN)
      {"\u212a", "K"},                              // singleton (KELVIN SIGN)
      {"a\u0323\u0302", "\u1ead"},                  // two marks compose in canonical order
      {"a\u0302\u0323", "\u1ead"},                  // ... after reordering by combining class
      {"\u1100\u1161\u11a8", "\uac01"},             // Hangul L V T
      {"\uac00\u11a8", "\uac01"},                   // Hangul LV + T
      {"\u0958", "\u0915\u093c"},                   // composition exclusion stays decomposed
      {"\u0f73", "\u0f71\u0f72"},                   // non-starter decomposition
      {"\u0344", "\u0308\u0301"},                   // singleton-like non-starter decomposition
      {"\u1e0b\u0323", "\u1e0d\u0307"},             // recompose around a lower-class mark
      {"\ufb01", "\ufb01"},                         // compatibility only: NFC keeps it
      {"A\u030a\u0301", "\u01fa"},                  // composite of a composite
      {"\u0b47\u0b3e", "\u0b4b"},                   // two starters compose
      {"x\u0301\u0301", "x\u0301\u0301"},           // no composite: unchanged
      {"\u0301a", "\u0301a"},                       // a leading mark has no starter
      {"a\u0308\u0301\u0323", "\u1ea1\u0308\u0301"},  // the blocked mark stays after the composed one
      // Unicode 9.0 tables, as in HF: U+0898 (Unicode 14) has class 0 there, U+11938 (13.0) does not compose.
      {"a\u0898\u0316", "a\u0898\u0316"},
      {"\U00011935\U00011930", "\U00011935\U00011930"},
  };
  return cases;
}

}  // namespace

TEST(Golden_UnicodeNfc, matchesHfTokenizersNfc) {
  for (const auto& [in, want] : hf_cases()) EXPECT_EQ(statecut::nfc(in), want) << "input " << in;
}

TEST(Golden_UnicodeNfc, nfcIsIdempotent) {
  for (const auto& [in, want] : hf_cases()) EXPECT_EQ(statecut::nfc(want), want) << "input " << want;
}

TEST(Golden_UnicodeNfc, normalizesOnlyAroundUnstableCharactersOfLongText) {
  // Segments are cut before stable characters: the result equals normalizing each case on its own.
  std::string in, want;
  for (int rep = 0; rep < 50; ++rep)
    for (const auto& [i, w] : hf_cases()) in += i + " text \u65e5\u672c ", want += w + " text \u65e5\u672c ";
  EXPECT_EQ(statecut::nfc(in), want);
}

TEST(Golden_UnicodeNfc, quickCheckPassesTextWithoutUnstableCharacters) {
  EXPECT_TRUE(statecut::nfc_quick_check("plain ASCII, Latin-1 caf\u00e9, CJK \u65e5\u672c\u8a9e, emoji \U0001F642"));
  EXPECT_FALSE(statecut::nfc_quick_check("cafe\u0301"));
  EXPECT_FALSE(statecut::nfc_quick_check("\u212b"));
  EXPECT_EQ(statecut::nfc(""), "");
}
