/// A tiny valid byte-level BPE tokenizer.json (the 256 byte symbols, id = byte; "ab" 256 and "abc" 257 from the merges
/// a+b and ab+c; the special added token "<eos>" 258) for tests that change one part of it, a temp-file writer and a
/// loader.
/// One definition for every file of tests/text (they share a unity build in CI).
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "optimized/text/bpe_tokenizer.h"
#include "tests/text/gpt2_byte_symbol.h"

namespace statecut::test {

/// A ByteLevel step with every field tokenizers requires (add_prefix_space, trim_offsets).
inline nlohmann::json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", use_regex}};
}

/// An added token with every field tokenizers requires.
inline nlohmann::json added(const std::string& content, int64_t id, bool rstrip = false, bool lstrip = false) {
  return {{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", false}, {"special", true}};
}

inline nlohmann::json tiny_tokenizer() {
  using nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_symbol(b)] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  return {{"version", "1.0"},
          {"added_tokens", json::array({added("<eos>", 258)})},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level(true)},
          {"post_processor", nullptr},
          {"decoder", byte_level(true)},
          {"model",
           {{"type", "BPE"},
            {"vocab", vocab},
            {"merges", json::array({json::array({"a", "b"}), json::array({"ab", "c"})})}}}};
}

/// Writes `text` to a fresh file in the temp folder and returns its path (the caller removes it).
inline std::string write_temp(const std::string& text) {
  static std::atomic<int> counter{0};
  const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                  ("statecut_bpe_test_" + std::to_string(::getpid()) + "_" +
                                   std::to_string(counter++) + ".json");
  std::ofstream(p) << text;
  return p.string();
}

/// BpeTokenizer::from_file of `j` written to a temp file, which is removed whether the load succeeds or throws.
inline BpeTokenizer load_json(const nlohmann::json& j) {
  const std::string path = write_temp(j.dump());
  struct Remove {
    std::string p;
    ~Remove() { std::filesystem::remove(p); }
  } remove{path};
  return BpeTokenizer::from_file(path);
}

}  // namespace statecut::test
