/// The pipeline transformers 5 builds for the tokenizer class a folder's tokenizer_config.json names
/// (optimized/text/transformers_class.h), on a tiny character-level BPE in Llama 2's form: normalizer Prepend("▁") +
/// Replace(" " -> "▁"), no pre-tokenizer, vocab {<unk> 0, <s> 1, </s> 2, ▁ 3, a 4, b 5, ▁a 6}, merge "▁ a", the three
/// specials as added tokens. The expected ids follow HF tokenizers' semantics, worked out by hand in each comment:
///   the json as it is (tokenizers): every piece between added tokens gets "▁" prepended, spaces become "▁"
///   LlamaTokenizer, legacy false (5.x's default): Metaspace "first": only the piece at offset 0 of the text gets "▁",
///     and not when it already starts with one (after " " -> "▁")
///   legacy true: Metaspace "always": every piece, unless it starts with "▁"
///   add_prefix_space false: "never"
/// The real files (Phi-3-mini, Mistral) are held to transformers 5.17's ids by tests/torch/tokenizer_oracle.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "optimized/text/bpe_tokenizer.h"
#include "optimized/text/transformers_class.h"

namespace fs = std::filesystem;
using nlohmann::json;
using statecut::BpeTokenizer;
using statecut::TransformersClass;
using Ids = std::vector<int64_t>;

namespace {

const std::string kMeta = "\xE2\x96\x81";  // ▁

json added(const std::string& content, int64_t id) {
  return {{"id", id},       {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

/// Llama 2's tokenizer.json form, tiny.
json llama2_form() {
  return {{"version", "1.0"},
          {"added_tokens", json::array({added("<unk>", 0), added("<s>", 1), added("</s>", 2)})},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", kMeta}},
                                         {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMeta}}})}}},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
                                      {{"type", "ByteFallback"}},
                                      {{"type", "Fuse"}},
                                      {{"type", "Strip"}, {"content", " "}, {"start", 1u}, {"stop", 0u}}})}}},
          {"model",
           {{"type", "BPE"},
            {"unk_token", "<unk>"},
            {"fuse_unk", true},
            {"byte_fallback", true},
            {"vocab", {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {kMeta, 3}, {"a", 4}, {"b", 5}, {kMeta + "a", 6}}},
            {"merges", json::array({kMeta + " a"})}}}};
}

/// A folder holding `tokenizer` as tokenizer.json and, unless null, `config` as tokenizer_config.json (or the text
/// `config_text` verbatim); its files are removed at the end of the scope.
struct Folder {
  fs::path dir;
  Folder(const json& tokenizer, const json& config, const std::string& config_text = "") {
    static std::atomic<int> n{0};
    dir = fs::temp_directory_path() / ("statecut-transformers-class-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(n++));
    fs::create_directories(dir);
    std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
    if (!config_text.empty())
      std::ofstream(dir / "tokenizer_config.json") << config_text;
    else if (!config.is_null())
      std::ofstream(dir / "tokenizer_config.json") << config.dump();
  }
  ~Folder() {
    std::error_code ec;
    fs::remove(dir / "tokenizer.json", ec);
    fs::remove(dir / "tokenizer_config.json", ec);
    fs::remove(dir, ec);
  }
  std::string json_path() const { return (dir / "tokenizer.json").string(); }
  /// The tokenizer as statecut reads the folder: the class's pipeline when it names one.
  BpeTokenizer load() const {
    const TransformersClass cls = statecut::read_transformers_class(dir.string());
    return BpeTokenizer::from_file(json_path(), &cls);
  }
};

json llama_config(const json& legacy, const json& add_prefix_space) {
  json c = {{"tokenizer_class", "LlamaTokenizer"}};
  if (!legacy.is_null()) c["legacy"] = legacy;
  if (!add_prefix_space.is_null()) c["add_prefix_space"] = add_prefix_space;
  return c;
}

}  // namespace

TEST(TransformersClass, withoutAConfigTheJsonIsReadAsItIs) {
  const BpeTokenizer t = Folder(llama2_form(), json()).load();
  EXPECT_EQ(t.encode("a"), (Ids{6}));        // "▁a"
  EXPECT_EQ(t.encode(" a"), (Ids{3, 6}));    // Prepend then Replace: "▁▁a" -> ▁, ▁a
  EXPECT_EQ(t.encode("<s>a"), (Ids{1, 6}));  // the piece after <s> gets its "▁" too
}

TEST(TransformersClass, llamaTokenizerPrependsOnlyAtTheStartOfTheText) {
  json explicit_null = llama_config(json(), json());
  explicit_null["legacy"] = nullptr;
  for (const json& cfg : {llama_config(false, json()), llama_config(json(), json()), explicit_null,
                          llama_config(false, true)}) {  // legacy false, unset or null: "first"
    const Folder f(llama2_form(), cfg);
    const BpeTokenizer t = f.load();
    EXPECT_EQ(t.encode("a"), (Ids{6})) << cfg.dump();
    EXPECT_EQ(t.encode(" a"), (Ids{6})) << cfg.dump();      // " a" -> "▁a" already starts with ▁: nothing prepended
    EXPECT_EQ(t.encode("<s>a"), (Ids{1, 4})) << cfg.dump();  // "a" is not at offset 0
    EXPECT_EQ(t.encode("ab"), (Ids{6, 5})) << cfg.dump();
    EXPECT_EQ(t.decode({6, 5}), "ab") << cfg.dump();  // "▁ab" -> " ab", then Strip takes the one leading space
  }
}

TEST(TransformersClass, legacyTrueLlamaTokenizerPrependsToEveryPiece) {
  const BpeTokenizer t = Folder(llama2_form(), llama_config(true, json())).load();
  EXPECT_EQ(t.encode(" a"), (Ids{6}));       // Metaspace does not prepend to a piece starting with ▁ (Prepend does)
  EXPECT_EQ(t.encode("<s>a"), (Ids{1, 6}));  // after the added token too
}

TEST(TransformersClass, llamaTokenizerWithoutPrefixSpaceNeverPrependsNorStrips) {
  const BpeTokenizer t = Folder(llama2_form(), llama_config(json(), false)).load();
  EXPECT_EQ(t.encode("a"), (Ids{4}));
  EXPECT_EQ(t.encode(" a"), (Ids{6}));
  EXPECT_EQ(t.decode({6}), " a");  // no Strip step
}

TEST(TransformersClass, theFastAliasIsTheSameClassAndOtherClassesReadTheJson) {
  EXPECT_EQ(Folder(llama2_form(), {{"tokenizer_class", "LlamaTokenizerFast"}}).load().encode(" a"), (Ids{6}));
  for (const json& cfg : {json{{"tokenizer_class", "PreTrainedTokenizerFast"}}, json{{"tokenizer_class", nullptr}},
                          json::object(), json{{"legacy", false}}})
    EXPECT_EQ(Folder(llama2_form(), cfg).load().encode(" a"), (Ids{3, 6})) << cfg.dump();
}

TEST(TransformersClass, aByteLevelJsonUnderLlamaTokenizerIsRefusedNamingBothFiles) {
  json j = llama2_form();
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}};
  const Folder f(j, {{"tokenizer_class", "LlamaTokenizer"}});
  try {
    f.load();
    ADD_FAILURE() << "a byte-level json was read as LlamaTokenizer";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(f.json_path() + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find("ByteLevel"), std::string::npos) << msg;
    EXPECT_NE(msg.find((f.dir / "tokenizer_config.json").string()), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(TransformersClass, aTokenizerConfigTransformersCannotReadIsOneLineErrorNamingIt) {
  struct Case {
    std::string text, needle;
  };
  for (const Case& c : std::vector<Case>{{"{\"tokenizer_class\": ", "malformed JSON"},
                                         {"[1, 2]", "not a JSON object"},
                                         {"{\"tokenizer_class\": 5}", "tokenizer_class is not a string"},
                                         {"{\"legacy\": \"yes\"}", "legacy is \"yes\""},
                                         {"{\"add_prefix_space\": 1}", "add_prefix_space is 1"}}) {
    const Folder f(llama2_form(), json(), c.text);
    const std::string cfg = (f.dir / "tokenizer_config.json").string();
    try {
      statecut::read_transformers_class(f.dir.string());
      ADD_FAILURE() << "read " << c.text;
    } catch (const std::runtime_error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(cfg + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}
