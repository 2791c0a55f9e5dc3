// Tokenizer::decode (ids → text) for the three tokenizers and the streaming detokenizer of `generate`
// (optimized/generate/text_stream.h):
//   - tokenizer.json: HF tokenizers' decoded text of every golden case (tests/data/tokenizer_bpe/golden.jsonl,
//     invalid UTF-8 and special tokens included);
//   - SentencePiece (statecut-spm): decode(encode(text)) = text on the shipped sample (identity normalisation, no
//     dummy prefix), several sequences in one helper call, an id outside the vocabulary is one line;
//   - byte-level: the bytes, an id >= 256 refused;
//   - TextStream: the pieces it emits one token at a time concatenate to decode(all ids), and it never emits half a
//     character.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "optimized/generate/text_stream.h"
#include "optimized/text/tokenizer.h"
#include "tests/torch/pipeline_util.h"

using namespace statecut;
namespace fs = std::filesystem;

namespace {

const fs::path kDecodeRoot = fs::path(STATECUT_SOURCE_DIR);
const fs::path kBpe = kDecodeRoot / "tests" / "data" / "tokenizer_bpe";
const fs::path kDecodeSpm = kDecodeRoot / "assets" / "spm_pydocs256";

/// statecut-spm as the build places it (beside statecut); empty when this build has no libsentencepiece.
std::string spm_helper() {
  const fs::path p = fs::path(STATECUT_BINARY_DIR) / "cli" / "statecut-spm";
  return fs::exists(p) ? p.string() : std::string();
}

/// A SentencePiece checkpoint folder: config.json with the tokenizer's vocab and tokenizer.model.
struct SpmFolder {
  pipeline_test::TempDir dir{"spmdec"};
  SpmFolder() {
    std::ofstream(dir.path / "config.json") << R"({"model_type": "delta_net", "vocab_size": 256})";
    fs::copy_file(kDecodeSpm / "tokenizer.model", dir.path / "tokenizer.model");
  }
};

std::string streamed(const Tokenizer& tok, const std::vector<int64_t>& ids) {
  TextStream s(tok);
  std::string out;
  for (int64_t id : ids) {
    const std::string piece = s.push(id);
    out += piece;
  }
  return out + s.finish();
}

bool valid_utf8_prefix_pieces(const Tokenizer& tok, const std::vector<int64_t>& ids) {
  TextStream s(tok);
  for (int64_t id : ids) {
    const std::string piece = s.push(id);
    // A piece never ends inside a character: its last lead byte is followed by all of its continuation bytes.
    size_t i = piece.size();
    size_t cont = 0;
    while (i > 0 && (static_cast<unsigned char>(piece[i - 1]) & 0xC0) == 0x80) --i, ++cont;
    if (i == 0) continue;
    const unsigned char lead = static_cast<unsigned char>(piece[i - 1]);
    const size_t need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
    if (cont < need) return false;
  }
  return true;
}

/// `dir`'s tokenizer.json into *tok; false when this build cannot read tokenizer.json (no PCRE2). Other errors throw.
bool load_bpe(const fs::path& dir, Tokenizer* tok) {
  try {
    *tok = Tokenizer::for_tokenizer_json((dir / "tokenizer.json").string());
    return true;
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).find("PCRE2") != std::string::npos) return false;
    throw;
  }
}

}  // namespace

/// Every golden case of `dir` (tokenizer.json + golden.jsonl): decode = HF's "decoded", streaming = decode, no piece
/// ends inside a character. Returns the number of cases; -1 when this build cannot read tokenizer.json.
int check_bpe_golden(const fs::path& dir) {
  Tokenizer tok = Tokenizer::bytes();
  try {
    if (!load_bpe(dir, &tok)) return -1;
  } catch (const std::runtime_error& e) {
    ADD_FAILURE() << e.what();
    return 0;
  }
  std::ifstream in(dir / "golden.jsonl");
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    const auto ids = j.at("ids").get<std::vector<int64_t>>();
    const auto want = j.at("decoded").get<std::string>();
    EXPECT_EQ(tok.decode(ids), want) << dir << " text: " << j.at("text");
    EXPECT_EQ(streamed(tok, ids), want) << dir << " streamed, text: " << j.at("text");
    EXPECT_TRUE(valid_utf8_prefix_pieces(tok, ids)) << dir << " text: " << j.at("text");
    ++cases;
  }
  return cases;
}

TEST(Golden_TokenizerDecode, tokenizerJsonDecodesAsHfTokenizers) {
  const int n = check_bpe_golden(kBpe);
  if (n < 0) GTEST_SKIP() << "built without PCRE2: no tokenizer.json support";
  EXPECT_GE(n, 60);
  // The full Qwen3 tokenizer and its 156 cases, when ../shared is there.
  const fs::path shared = kDecodeRoot.parent_path() / "shared" / "fixtures" / "tokenizer_qwen3";
  if (fs::exists(shared / "golden.jsonl")) EXPECT_GE(check_bpe_golden(shared), 150);
  std::printf("%d repo cases%s\n", n, fs::exists(shared / "golden.jsonl") ? " + the shared Qwen3 cases" : "");
}

TEST(Unit_TextStream, idsEndingInsideACharacterFinishAsDecodeDoes) {
  // The golden lists end on whole characters, so finish() had nothing left to give. Here the last ids are the first
  // tokens of a character without its last: push() holds them back, finish() gives what decode gives (U+FFFD).
  Tokenizer tok = Tokenizer::bytes();
  if (!load_bpe(kBpe, &tok)) GTEST_SKIP() << "built without PCRE2: no tokenizer.json support";
  // A character the tokenizer spells with two tokens or more; its last token left off.
  std::vector<int64_t> half;
  for (const char* c : {"\xF0\x9F\xAA\xBC", "\xF0\x9F\x98\x80", "\xE6\x97\xA5", "\xE2\x82\xAC"})
    if (half = tok.encode(c); half.size() >= 2) break;
  ASSERT_GE(half.size(), 2u) << "every candidate character is one token";
  half.pop_back();
  std::vector<int64_t> ids = tok.encode("streamed a token at a time, then half of a character: ");
  const size_t whole = ids.size();
  ids.insert(ids.end(), half.begin(), half.end());
  TextStream s(tok);
  std::string out;
  for (int64_t id : ids) out += s.push(id);
  EXPECT_EQ(out, tok.decode(std::vector<int64_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(whole))));
  const std::string rest = s.finish();
  EXPECT_EQ(out + rest, tok.decode(ids));
  EXPECT_EQ(rest.substr(rest.size() - 3), "\xEF\xBF\xBD");
  EXPECT_EQ(s.finish(), "");  // nothing twice
}

TEST(Golden_TokenizerDecode, sentencePieceRoundTripsTheShippedSample) {
  const std::string helper = spm_helper();
  if (helper.empty()) GTEST_SKIP() << "built without libsentencepiece: no statecut-spm";
  setenv("STATECUT_SPM", helper.c_str(), 1);
  SpmFolder f;
  const Tokenizer tok = Tokenizer::for_checkpoint(f.dir.path.string());
  ASSERT_FALSE(tok.byte_level());
  const std::string text = pipeline_test::slurp(kDecodeSpm / "sample.txt");
  const auto ids = tok.encode(text);
  ASSERT_GT(ids.size(), 100u);
  EXPECT_EQ(tok.decode(ids), text);
  // Several sequences in one helper call, an empty one and one holding newlines among them.
  const std::vector<std::vector<int64_t>> seqs = {std::vector<int64_t>(ids.begin(), ids.begin() + 10), {}, ids};
  const auto texts = tok.decode_batch(seqs);
  ASSERT_EQ(texts.size(), 3u);
  EXPECT_EQ(texts[0], tok.decode(seqs[0]));
  EXPECT_EQ(texts[1], "");
  EXPECT_EQ(texts[2], text);
  // Streaming a prefix (one helper call a token) equals decoding it at once; the U+2013 line is in the sample.
  const std::vector<int64_t> head(ids.begin(), ids.begin() + 60);
  EXPECT_EQ(streamed(tok, head), tok.decode(head));
}

TEST(BadInput_TokenizerDecode, idOutsideTheVocabularyIsOneLineAndItsEdgesAreIds) {
  const std::string helper = spm_helper();
  if (!helper.empty()) {
    setenv("STATECUT_SPM", helper.c_str(), 1);
    SpmFolder f;
    const Tokenizer tok = Tokenizer::for_checkpoint(f.dir.path.string());
    try {
      tok.decode({5, 256});
      ADD_FAILURE() << "no error";
    } catch (const std::runtime_error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("tokenizer.model: token id 256 is outside the vocabulary [0, 256)"), m.npos) << m;
      EXPECT_EQ(m.find('\n'), m.npos);
    }
    // The vocabulary's edges are ids: 0 (<unk>) and 255 decode, and a character the model lacks encodes to them.
    EXPECT_NO_THROW(tok.decode({0, 5, 255}));
    EXPECT_EQ(tok.bytes_of(256), 0);  // no piece: no bytes
    EXPECT_EQ(tok.bytes_of(-1), 0);
    const std::vector<int64_t> unk = tok.encode("a\xE4\xB8\x80b");  // U+4E00: no piece of this English model
    EXPECT_NE(std::find(unk.begin(), unk.end(), 0), unk.end()) << "U+4E00 is no <unk> here";
  }
  EXPECT_THROW(Tokenizer::bytes().decode({65, 256}), std::runtime_error);
}

TEST(Unit_TokenizerDecode, byteLevelIdsAreTheirBytes) {
  const Tokenizer tok = Tokenizer::bytes();
  const std::string text = "caf\xC3\xA9 \xE2\x80\x93 \x01";
  const std::vector<int64_t> ids(reinterpret_cast<const unsigned char*>(text.data()),
                                 reinterpret_cast<const unsigned char*>(text.data()) + text.size());
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_EQ(streamed(tok, ids), text);
}
