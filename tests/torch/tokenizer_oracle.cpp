/// The checkpoint-folder tokenizer (Tokenizer::for_checkpoint: tokenizer.json read in C++, or tokenizer.model through
/// statecut-spm beside a json that converts it) against HF tokenizers 0.23.2 on the real tokenizers of other models,
/// and against transformers 5's AutoTokenizer where the folder's tokenizer_config.json names a class transformers builds
/// its own pipeline for (phi-3-mini-transformers: LlamaTokenizer).
///
/// Every folder under tests/data/tokenizers/ holds a tokenizer and golden.jsonl ({"text", "ids", "decoded"}: HF's
/// encode(text, add_special_tokens=False).ids and decode(ids, skip_special_tokens=False), made by
/// tools/tokenizer_oracle from its texts: whitespace runs, digit groups, contractions, many scripts, combining marks
/// NFC composes, emoji sequences, controls, code, corpus windows, random strings over many Unicode blocks, and each
/// file's added tokens in context). The byte-level BPE files there are trimmed by tools/make_small_bpe_tokenizer.cpp
/// to the merges their texts fire (its header says why the ids stay exact); folders/README.md names each source.
/// The decoded ids are also streamed a token at a time as `statecut generate` prints them (text_stream.h), which must
/// add up to the same text. $STATECUT_TOKENIZER_ORACLE names another root of such folders (the untrimmed files, texts of any length).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <fstream>
#include <string>
#include <vector>

#include "optimized/generate/text_stream.h"
#include "optimized/text/tokenizer.h"

namespace fs = std::filesystem;
using statecut::Tokenizer;

namespace {

std::vector<fs::path> oracle_folders() {
  std::vector<fs::path> roots = {fs::path(STATECUT_SOURCE_DIR) / "tests" / "data" / "tokenizers"};
  if (const char* env = std::getenv("STATECUT_TOKENIZER_ORACLE"); env && *env) roots.emplace_back(env);
  std::vector<fs::path> out;
  for (const auto& r : roots) {
    if (!fs::is_directory(r)) continue;
    for (const auto& e : fs::directory_iterator(r))
      if (fs::is_regular_file(e.path() / "golden.jsonl")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string show(const std::string& s) { return nlohmann::json(s).dump().substr(0, 160); }

}  // namespace

TEST(Golden_Tokenizers, realTokenizersOfOtherModelsGiveHfIdsAndDecodes) {
#ifdef STATECUT_SPM_PATH
  ::setenv("STATECUT_SPM", STATECUT_SPM_PATH, 1);
#endif
  const auto folders = oracle_folders();
  ASSERT_FALSE(folders.empty()) << "no tests/data/tokenizers/*/golden.jsonl";
  for (const auto& dir : folders) {
    SCOPED_TRACE(dir.string());
    const Tokenizer tok = Tokenizer::for_checkpoint(dir.string());
    ASSERT_TRUE(tok.available()) << tok.unavailable_reason();
    std::ifstream in(dir / "golden.jsonl");
    int lines = 0, bad_ids = 0, bad_decodes = 0, bad_streams = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line);
      const std::string text = j.at("text");
      const auto want = j.at("ids").get<std::vector<int64_t>>();
      ++lines;
      const std::vector<int64_t> got = tok.encode(text);
      if (got != want) {
        if (++bad_ids <= 3)
          ADD_FAILURE() << "ids of " << show(text) << "\n  HF   " << nlohmann::json(want).dump().substr(0, 200)
                        << "\n  ours " << nlohmann::json(got).dump().substr(0, 200);
        continue;
      }
      const std::string dec = tok.decode(want);
      if (dec != j.at("decoded").get<std::string>() && ++bad_decodes <= 3)
        ADD_FAILURE() << "decode of the ids of " << show(text) << "\n  HF   " << show(j.at("decoded"))
                      << "\n  ours " << show(dec);
      // generate's streamed text, a token at a time, adds up to the same decode.
      statecut::TextStream stream(tok);
      std::string streamed;
      for (int64_t id : want) streamed += stream.push(id);
      streamed += stream.finish();
      if (streamed != dec && ++bad_streams <= 3)
        ADD_FAILURE() << "streamed decode of the ids of " << show(text) << "\n  decode   " << show(dec)
                      << "\n  streamed " << show(streamed);
    }
    EXPECT_EQ(bad_ids, 0) << "of " << lines << " texts (" << tok.describe() << ")";
    EXPECT_EQ(bad_decodes, 0) << "of " << lines << " texts (" << tok.describe() << ")";
    EXPECT_EQ(bad_streams, 0) << "of " << lines << " texts (" << tok.describe() << ")";
    EXPECT_GT(lines, 0);
    std::cout << dir.filename().string() << ": " << lines << " texts, " << tok.describe() << "\n";
  }
}

/// Random id sequences, byte-fallback pieces among them (a run of <0xHH> pieces decodes as a whole: valid UTF-8, else
/// one U+FFFD per byte), streamed a token at a time as `statecut generate` prints them, add up to decode() of the
/// whole sequence, and never to invalid UTF-8 (audit 26 D1: a stream printed "s<" before the run turned out
/// invalid). Seed STATECUT_SEED (default 26).
TEST(Golden_Tokenizers, aStreamedDecodeOfRandomIdsAddsUpToTheDecode) {
#ifdef STATECUT_SPM_PATH
  ::setenv("STATECUT_SPM", STATECUT_SPM_PATH, 1);
#endif
  const char* env = std::getenv("STATECUT_SEED");
  const uint64_t seed = env && *env ? std::strtoull(env, nullptr, 10) : 26;
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  int with_bytes = 0;
  for (const auto& dir : oracle_folders()) {
    SCOPED_TRACE(dir.string());
    const Tokenizer tok = Tokenizer::for_checkpoint(dir.string());
    std::vector<int64_t> pool, bytes;
    std::ifstream in(dir / "golden.jsonl");
    for (std::string line; std::getline(in, line);)
      if (!line.empty())
        for (int64_t id : nlohmann::json::parse(line).at("ids").get<std::vector<int64_t>>()) pool.push_back(id);
    for (int64_t id = 0; id < tok.vocab_size(); ++id)
      if (tok.byte_piece(id)) bytes.push_back(id);
    if (pool.empty()) continue;
    with_bytes += !bytes.empty();
    for (int seq = 0; seq < 50; ++seq) {
      std::vector<int64_t> ids;
      for (int i = 0; i < 24; ++i) {
        const bool byte = !bytes.empty() && rng() % 2 == 0;  // half byte pieces, in runs
        ids.push_back(byte ? bytes[rng() % bytes.size()] : pool[rng() % pool.size()]);
      }
      statecut::TextStream stream(tok);
      std::string streamed;
      for (int64_t id : ids) streamed += stream.push(id);
      streamed += stream.finish();
      const std::string dec = tok.decode(ids);
      ASSERT_EQ(streamed, dec) << "ids " << nlohmann::json(ids).dump();
    }
  }
  EXPECT_GT(with_bytes, 0) << "no folder has byte-fallback pieces";
}
