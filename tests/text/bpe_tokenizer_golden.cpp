/// BpeTokenizer against HF `tokenizers` 0.23.2: ids of encode(text, add_special_tokens=False) and the text of
/// decode(ids, skip_special_tokens=False), line by line of a golden.jsonl ({"text", "ids", "decoded"}).
///
/// Data:
///   ../shared/fixtures/tokenizer_qwen3/{tokenizer.json, golden.jsonl} (156 texts; $STATECUT_SHARED replaces
///     ../shared): the full Qwen3 tokenizer; those tests skip when it is absent.
///   tests/data/tokenizer_bpe/ (always): a 40 KB tokenizer.json made from the Qwen3 one by
///     tools/make_small_bpe_tokenizer.cpp (its header gives the command and why the ids stay exact): the 64 golden
///     lines it keeps are 0..17 of the full golden (whitespace runs, numbers, contractions, CJK, emoji, special
///     tokens, CRLF, code), its corpus excerpts of 2..16 tokens, and hf_extra.jsonl: 6 lines whose ids HF 0.23.2
///     (npm `tokenizers`) gave on the full Qwen3 tokenizer for cases the golden lacks (NFC input, letters and
///     numbers of Unicode 15-16, U+180E, case-folded contractions, partial special tokens, U+FFFD). Its vocab keeps
///     the original sparse ids; only the 651 merges that fire on those texts remain.
///   Invalid UTF-8 cannot be written in JSON: HF only sees decoded text, so the tests check that bytes are read as
///   Rust's from_utf8_lossy reads them (each maximal invalid subpart -> U+FFFD), then encoded like that text.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "optimized/text/bpe_tokenizer.h"

namespace fs = std::filesystem;
using statecut::BpeTokenizer;

namespace {

/// The build's STATECUT_SOURCE_DIR, else $STATECUT_SOURCE_DIR, else the folder above this file (when __FILE__ is
/// relative, that holds only when run from the folder it was compiled in).
fs::path repo_root() {
#ifdef STATECUT_SOURCE_DIR
  return fs::path(STATECUT_SOURCE_DIR);
#else
  if (const char* env = std::getenv("STATECUT_SOURCE_DIR"); env && *env) return fs::path(env);
  return fs::path(__FILE__).parent_path().parent_path().parent_path();  // tests/text/<file>
#endif
}

fs::path shared_root() {
  if (const char* env = std::getenv("STATECUT_SHARED"); env && *env) return fs::path(env);
  return repo_root() / ".." / "shared";
}

fs::path small_dir() { return repo_root() / "tests" / "data" / "tokenizer_bpe"; }
fs::path qwen3_dir() { return shared_root() / "fixtures" / "tokenizer_qwen3"; }

struct GoldenLine {
  std::string text, decoded;
  std::vector<int64_t> ids;
};

std::vector<GoldenLine> read_golden(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path << ": cannot open";
  std::vector<GoldenLine> lines;
  for (std::string l; std::getline(in, l);) {
    if (l.empty()) continue;
    const auto j = nlohmann::json::parse(l);
    lines.push_back({j.at("text").get<std::string>(), j.at("decoded").get<std::string>(),
                     j.at("ids").get<std::vector<int64_t>>()});
  }
  return lines;
}

std::string show(const std::vector<int64_t>& ids) {
  std::ostringstream o;
  for (size_t i = 0; i < ids.size(); ++i) o << (i ? "," : "") << ids[i];
  return "[" + o.str() + "]";
}

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

/// Expects encode == golden ids on every line; prints each failing text with both id lists.
void expect_encodes_golden(const BpeTokenizer& tok, const std::vector<GoldenLine>& golden) {
  int ok = 0;
  for (const auto& g : golden) {
    const auto got = tok.encode(g.text);
    if (got == g.ids) {
      ++ok;
      continue;
    }
    ADD_FAILURE() << "text " << quoted(g.text) << "\n  expected " << show(g.ids) << "\n  got      " << show(got);
  }
  std::printf("%d/%zu golden texts encode like HF tokenizers\n", ok, golden.size());
}

void expect_decodes_golden(const BpeTokenizer& tok, const std::vector<GoldenLine>& golden) {
  for (const auto& g : golden)
    EXPECT_EQ(tok.decode(g.ids), g.decoded) << "ids " << show(g.ids) << " of text " << quoted(g.text);
}

const BpeTokenizer& small() {
  static const BpeTokenizer tok = BpeTokenizer::from_file((small_dir() / "tokenizer.json").string());
  return tok;
}

#define SKIP_WITHOUT_QWEN3()                                                                  \
  if (!fs::exists(qwen3_dir() / "tokenizer.json"))                                           \
  GTEST_SKIP() << qwen3_dir() << " is absent (set STATECUT_SHARED to the shared folder)"

const BpeTokenizer& qwen3() {
  static const BpeTokenizer tok = BpeTokenizer::from_file((qwen3_dir() / "tokenizer.json").string());
  return tok;
}

}  // namespace

TEST(Golden_BpeTokenizer, encodesEveryGoldenTextLikeHfTokenizers) {
  SKIP_WITHOUT_QWEN3();
  const auto golden = read_golden(qwen3_dir() / "golden.jsonl");
  ASSERT_EQ(golden.size(), 156u);
  expect_encodes_golden(qwen3(), golden);
}

TEST(Golden_BpeTokenizer, decodesEveryGoldenIdListLikeHfTokenizers) {
  SKIP_WITHOUT_QWEN3();
  expect_decodes_golden(qwen3(), read_golden(qwen3_dir() / "golden.jsonl"));
}

TEST(Golden_BpeTokenizer, encodesTheExtraHfCasesWithTheFullTable) {
  SKIP_WITHOUT_QWEN3();
  const auto extra = read_golden(small_dir() / "hf_extra.jsonl");
  expect_encodes_golden(qwen3(), extra);
  expect_decodes_golden(qwen3(), extra);
}

TEST(Golden_BpeTokenizer, qwen3VocabSizeCoversTheAddedTokens) {
  SKIP_WITHOUT_QWEN3();
  EXPECT_EQ(qwen3().vocab_size(), 151669);  // 151643 BPE entries + 26 added tokens
}

TEST(Golden_BpeTokenizer, smallTokenizerEncodesItsGoldenLikeHfTokenizers) {
  const auto golden = read_golden(small_dir() / "golden.jsonl");
  ASSERT_GE(golden.size(), 40u);
  expect_encodes_golden(small(), golden);
}

TEST(Golden_BpeTokenizer, smallTokenizerDecodesItsGoldenLikeHfTokenizers) {
  expect_decodes_golden(small(), read_golden(small_dir() / "golden.jsonl"));
}

TEST(Golden_BpeTokenizer, decodeInvertsEncode) {
  // Up to NFC: HF's decoded text is the NFC form (equal to the text on every line but one of hf_extra.jsonl).
  for (const auto& g : read_golden(small_dir() / "golden.jsonl"))
    EXPECT_EQ(small().decode(small().encode(g.text)), g.decoded) << quoted(g.text);
}

TEST(Golden_BpeTokenizer, tokenBytesConcatenateToTheText) {
  for (const auto& g : read_golden(small_dir() / "golden.jsonl")) {
    std::string bytes;
    for (int64_t id : small().encode(g.text)) bytes += small().token_bytes(id);
    EXPECT_EQ(bytes, g.decoded);
  }
  EXPECT_EQ(small().token_bytes(151644), "<|im_start|>");
  EXPECT_EQ(small().token_bytes(220), " ");  // "Ġ"
  EXPECT_EQ(small().token_bytes(-1), "");
  EXPECT_EQ(small().token_bytes(small().vocab_size()), "");
}

TEST(Golden_BpeTokenizer, vocabSizeIsMaxIdPlusOneOverVocabAndAddedTokens) {
  EXPECT_EQ(small().vocab_size(), 151669);  // sparse vocab, added tokens up to 151668
}

TEST(Golden_BpeTokenizer, decomposedTextEncodesLikeItsNfcForm) {
  // golden line 12 is "ﬁligature café naïve"; NFC composes e + U+0301 and i + U+0308.
  const std::string composed = "\xEF\xAC\x81ligature caf\xC3\xA9 na\xC3\xAFve";
  const std::string decomposed = "\xEF\xAC\x81ligature cafe\xCC\x81 nai\xCC\x88ve";
  EXPECT_EQ(small().encode(decomposed), small().encode(composed));
  EXPECT_EQ(small().decode(small().encode(decomposed)), composed);
}

TEST(Golden_BpeTokenizer, invalidUtf8IsReadAsLossyReplacement) {
  const std::string fffd = "\xEF\xBF\xBD";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a\xFF" "b", "a" + fffd + "b"},                       // a byte that never starts a character
      {"\xC3(", fffd + "("},                                  // a lead byte without its continuation
      {"x\xE2\x82", "x" + fffd},                              // truncated at the end: one U+FFFD for the subpart
      {"\xF0\x9F\x98 ok", fffd + " ok"},                     // truncated 4-byte sequence
      {"\xED\xA0\x80", fffd + fffd + fffd},                   // a surrogate: ED admits 80..9F only
      {"\xC0\xAF", fffd + fffd},                              // overlong
      {"<|im_start|>\x80<|im_end|>", "<|im_start|>" + fffd + "<|im_end|>"},
  };
  for (const auto& [bad, repaired] : cases)
    EXPECT_EQ(small().encode(bad), small().encode(repaired)) << quoted(repaired);
}

TEST(Golden_BpeTokenizer, decodeOfAnIncompleteCharacterGivesReplacement) {
  int64_t byte_ff = -1;  // the token of the single byte 0xFF ("ÿ" in the byte-level alphabet)
  for (int64_t id = 0; id < small().vocab_size() && byte_ff < 0; ++id)
    if (small().token_bytes(id) == "\xFF") byte_ff = id;
  ASSERT_GE(byte_ff, 0);
  EXPECT_EQ(small().decode({byte_ff}), "\xEF\xBF\xBD");
  EXPECT_EQ(small().decode({9707, -5, 999999999, 11}), "Hello,");  // unknown ids are skipped, as in HF
}

TEST(Golden_BpeTokenizer, threadsEncodingAtOnceGetTheGoldenIds) {
  // Each thread has its own word cache and regex scratch; the tokenizer itself is read-only.
  const auto golden = read_golden(small_dir() / "golden.jsonl");
  std::vector<int> wrong(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < wrong.size(); ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep)
        for (const auto& g : golden) wrong[t] += small().encode(g.text) != g.ids;
    });
  for (auto& th : threads) th.join();
  for (int w : wrong) EXPECT_EQ(w, 0);
}

TEST(Golden_BpeTokenizer, specialTokensSplitTheTextEvenInsideWords) {
  EXPECT_EQ(small().encode("hi<|im_end|> there"), (std::vector<int64_t>{6023, 151645, 1052}));
  EXPECT_EQ(small().encode("<|im_end|>"), std::vector<int64_t>{151645});
  EXPECT_TRUE(small().encode("").empty());
}
