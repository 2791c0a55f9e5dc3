/// The pipeline transformers 5 builds for the tokenizer class a folder's tokenizer_config.json names
/// (optimized/text/transformers_class.h), on a tiny character-level BPE in Llama 2's form: normalizer Prepend("▁") +
/// Replace(" " -> "▁"), no pre-tokenizer, vocab {<unk> 0, <s> 1, </s> 2, ▁ 3, a 4, b 5, ▁a 6}, merge "▁ a", the three
/// specials as added tokens. The expected ids follow HF tokenizers' semantics, worked out by hand in each comment:
///   the json as it is (tokenizers): every piece between added tokens gets "▁" prepended, spaces become "▁"
///   LlamaTokenizer, legacy false (5.x's default): Metaspace "first": only the piece at offset 0 of the text gets "▁",
///     and not when it already starts with one (after " " -> "▁")
///   legacy true: Metaspace "always": every piece, unless it starts with "▁"
///   add_prefix_space false: "never"
/// Byte-level classes on a tiny byte-level BPE (the 256 byte symbols, id = byte): GPT2Tokenizer's add_prefix_space, and
/// Qwen3_5Tokenizer's regex, which keeps a combining mark with its letter where Qwen2's cuts them apart.
/// Which class AutoTokenizer picks from tokenizer_class and model_type: a table read from transformers' source.
/// The real files (Phi-3-mini, Mistral) are held to transformers 5.17's ids by tests/torch/tokenizer_oracle.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "optimized/text/bpe_tokenizer.h"
#include "optimized/text/transformers_class.h"
#include "tests/text/gpt2_byte_symbol.h"

namespace fs = std::filesystem;
using nlohmann::json;
using statecut::BpeTokenizer;
using statecut::TransformersClass;
using statecut::test::byte_symbol;
using Ids = std::vector<int64_t>;

namespace {

const std::string kMeta = "\xE2\x96\x81";  // ▁

json special_token(const std::string& content, int64_t id) {
  return {{"id", id},       {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

/// Llama 2's tokenizer.json form, tiny.
json llama2_form() {
  return {{"version", "1.0"},
          {"added_tokens", json::array({special_token("<unk>", 0), special_token("<s>", 1), special_token("</s>", 2)})},
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

/// A byte-level BPE in Qwen's form (NFC, Split(Qwen2's regex, isolated), ByteLevel without its regex): the 256 byte
/// symbols with id = byte, "ab" 256, "abc" 257, and a chain of merges that joins the six bytes of Devanagari
/// KA + VIRAMA (E0 A4 95 E0 A5 8D; the virama is a combining mark, \p{M}) into 261, through "KA" 258.
json byte_level_form() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_symbol(b)] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  const std::vector<int> bytes = {0xE0, 0xA4, 0x95, 0xE0, 0xA5, 0x8D};
  json merges = json::array({"a b", "ab c"});
  std::string left = byte_symbol(bytes[0]);
  for (size_t i = 1; i < bytes.size(); ++i) {
    merges.push_back(left + " " + byte_symbol(bytes[i]));
    left += byte_symbol(bytes[i]);
    if (i >= 2) vocab[left] = 256 + static_cast<int>(i);  // 258 (KA), 259, 260, 261 (KA + VIRAMA)
    else vocab[left] = 300;
  }
  const json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  const std::string qwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             json::array({{{"type", "Split"}, {"pattern", {{"Regex", qwen2}}}, {"behavior", "Isolated"}, {"invert", false}},
                          bl})}}},
          {"post_processor", nullptr},
          {"decoder", bl},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

/// A folder holding `tokenizer` as tokenizer.json and, unless null, `config` as tokenizer_config.json (or the text
/// `config_text` verbatim); its files are removed at the end of the scope.
struct Folder {
  fs::path dir;
  Folder(const json& tokenizer, const json& config, const std::string& config_text = "",
         const std::string& model_type = "") {
    static std::atomic<int> n{0};
    dir = fs::temp_directory_path() / ("statecut-transformers-class-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(n++));
    fs::create_directories(dir);
    std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
    if (!config_text.empty())
      std::ofstream(dir / "tokenizer_config.json") << config_text;
    else if (!config.is_null())
      std::ofstream(dir / "tokenizer_config.json") << config.dump();
    if (!model_type.empty()) std::ofstream(dir / "config.json") << json{{"model_type", model_type}}.dump();
  }
  ~Folder() {
    std::error_code ec;
    fs::remove(dir / "tokenizer.json", ec);
    fs::remove(dir / "tokenizer_config.json", ec);
    fs::remove(dir / "config.json", ec);
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

/// `act` must throw one std::runtime_error line that starts with "<file>: " and contains every needle.
void expect_one_line_error(const std::function<void()>& act, const std::string& file,
                           const std::vector<std::string>& needles) {
  try {
    act();
    ADD_FAILURE() << "no error; expected one naming " << file;
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(file + ": ", 0), 0u) << msg;
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << n << " in " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
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

TEST(TransformersClass, aByteLevelJsonUnderLlamaTokenizerIsRefusedNamingTheClass) {
  json j = llama2_form();
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}};
  const Folder f(j, {{"tokenizer_class", "LlamaTokenizer"}});
  expect_one_line_error([&] { f.load(); }, f.json_path(), {"ByteLevel", "tokenizer_class 'LlamaTokenizer'"});
}

TEST(TransformersClass, aTokenizerConfigTransformersCannotReadIsOneLineErrorNamingIt) {
  struct Case {
    std::string text, needle;
  };
  for (const Case& c : std::vector<Case>{
           {"{\"tokenizer_class\": ", "malformed JSON"},
           {"[1, 2]", "not a JSON object"},
           {"\xEF\xBB\xBF{}", "byte order mark"},
           {"{\"tokenizer_class\": 5}", "tokenizer_class is not a string"},
           {"{\"tokenizer_class\": \"LlamaTokenizer\", \"legacy\": \"yes\"}", "legacy is \"yes\""},
           {"{\"tokenizer_class\": \"LlamaTokenizer\", \"add_prefix_space\": 1}", "add_prefix_space is 1"},
           {"{\"added_tokens_decoder\": [1]}", "added_tokens_decoder is not an object"}}) {
    const Folder f(llama2_form(), json(), c.text);
    const std::string cfg = (f.dir / "tokenizer_config.json").string();
    expect_one_line_error([&] { statecut::read_transformers_class(f.dir.string()); }, cfg, {c.needle});
  }
  // A folder in the file's place: named, not a stream error (nor a FIFO's endless read).
  const Folder f(llama2_form(), json());
  fs::create_directories(f.dir / "tokenizer_config.json" / "x");
  expect_one_line_error([&] { statecut::read_transformers_class(f.dir.string()); },
                        (f.dir / "tokenizer_config.json").string(), {"not a regular file"});
  fs::remove(f.dir / "tokenizer_config.json" / "x");
}

TEST(TransformersClass, aFlagOnlyAnotherClassReadsIsNotChecked) {
  // transformers passes legacy on to TokenizersBackend unread: the file loads there, and here.
  EXPECT_EQ(Folder(llama2_form(), {{"legacy", "yes"}}).load().encode(" a"), (Ids{3, 6}));
}

TEST(TransformersClass, theConfigsAddedTokensTakeTheirFlagsAndIds) {
  json rstrip_s = {{"1", {{"content", "<s>"}, {"lstrip", false}, {"rstrip", true}, {"normalized", false},
                          {"single_word", false}, {"special", true}}},
                   {"7", {{"content", "<x>"}, {"special", true}}}};
  // LlamaTokenizer rebuilds the tokenizer: only the config's tokens, <s> taking the space after it ("first": no ▁ then).
  json cfg = llama_config(false, json());
  EXPECT_EQ(Folder(llama2_form(), cfg).load().encode("<s> a"), (Ids{1, 6}));  // the json's <s>: " a" -> "▁a"
  cfg["added_tokens_decoder"] = rstrip_s;
  const BpeTokenizer t = Folder(llama2_form(), cfg).load();
  EXPECT_EQ(t.encode("<s> a"), (Ids{1, 4}));
  EXPECT_EQ(t.encode("<x>"), (Ids{7}));           // a token only the config has: the next id after the vocab's 7
  EXPECT_NE(t.encode("</s>"), (Ids{2}));           // the json's </s> is not among the config's: text now
  // The json as it is keeps its tokens and takes the config's flags for the same content.
  json plain = {{"added_tokens_decoder", rstrip_s}};
  const BpeTokenizer u = Folder(llama2_form(), plain).load();
  EXPECT_EQ(Folder(llama2_form(), json::object()).load().encode("<s> a"), (Ids{1, 3, 6}));  // Prepend + Replace: "▁▁a"
  EXPECT_EQ(u.encode("<s> a"), (Ids{1, 6}));  // rstrip took the space: "a" -> "▁a"
  EXPECT_EQ(u.encode("</s>"), (Ids{2}));      // the json's own, kept
  // A named special token neither list has is added too, as a special token with the next id.
  EXPECT_EQ(Folder(llama2_form(), {{"pad_token", "<pad>"}}).load().encode("a<pad>"), (Ids{6, 7}));
  EXPECT_EQ(Folder(llama2_form(), {{"pad_token", {{"content", "<s>"}, {"rstrip", true}}}}).load().encode("<s> a"),
            (Ids{1, 3, 6}));  // already an added token: its json flags stay (no rstrip)
}

TEST(TransformersClass, autoTokenizerPicksTheClassAsTransformers5Does) {
  struct Case {
    const char *declared, *model_type, *resolved;
  };
  for (const Case& c : std::vector<Case>{
           {"LlamaTokenizer", "", "LlamaTokenizer"},                 // no config.json: the class named
           {"LlamaTokenizerFast", "delta_net", "LlamaTokenizer"},    // fla-hub: a type transformers has no entry for
           {"LlamaTokenizer", "gated_deltanet", "LlamaTokenizer"},
           {"LlamaTokenizer", "llama", "LlamaTokenizer"},            // llama has no entry either
           {"LlamaTokenizer", "mistral", "TokenizersBackend"},       // registered TokenizersBackend: the json as it is
           {"LlamaTokenizer", "phi3", "TokenizersBackend"},
           {"", "mistral", "TokenizersBackend"},
           {"", "mamba2", "GPTNeoXTokenizer"},                       // no class named: the registered one
           {"GPTNeoXTokenizerFast", "mamba2", "GPTNeoXTokenizer"},
           {"", "qwen3_5", "Qwen3_5Tokenizer"},
           {"", "qwen3_5_moe", "Qwen3_5Tokenizer"},
           {"", "mamba", "GPTNeoXTokenizer"},                         // one type of each row of the mapping
           {"", "qwen3", "Qwen2Tokenizer"},
           {"", "qwen3_next", "Qwen2Tokenizer"},
           {"", "gpt2", "GPT2Tokenizer"},
           {"", "codegen", "GPT2Tokenizer"},
           {"", "code_llama", "CodeLlamaTokenizer"},
           {"", "gemma3", "GemmaTokenizer"},
           {"", "olmo2", "TokenizersBackend"},
           {"Qwen2Tokenizer", "qwen3_5", "Qwen2Tokenizer"},          // a specific class named wins...
           {"LlamaTokenizer", "qwen2", "Qwen2Tokenizer"},            // ...except for qwen2, which transformers overrides
           {"PreTrainedTokenizerFast", "qwen3", "TokenizersBackend"},
           {"", "delta_net", "TokenizersBackend"},
           {"", "", "TokenizersBackend"},
           {"ChatGLMTokenizer", "", "ChatGLMTokenizer"}}) {          // unknown to statecut: read as the json
    EXPECT_EQ(statecut::resolve_tokenizer_class(c.declared, c.model_type), c.resolved)
        << c.declared << " / " << c.model_type;
  }
}

TEST(TransformersClass, aModelTypeRoutingToTheBackendReadsTheJsonAsItIs) {
  // Mistral's and Phi-3's checkpoints name LlamaTokenizer, but their model types read the json as it is.
  EXPECT_EQ(Folder(llama2_form(), llama_config(false, json()), "", "phi3").load().encode(" a"), (Ids{3, 6}));
  EXPECT_EQ(Folder(llama2_form(), llama_config(false, json()), "", "delta_net").load().encode(" a"), (Ids{6}));
}

TEST(TransformersClass, gpt2TokenizerTakesAddPrefixSpaceFromTheConfig) {
  EXPECT_EQ(Folder(byte_level_form(), {{"tokenizer_class", "GPT2Tokenizer"}}).load().encode("abc"), (Ids{257}));
  const BpeTokenizer t = Folder(byte_level_form(), {{"tokenizer_class", "GPT2Tokenizer"}, {"add_prefix_space", true}}).load();
  EXPECT_EQ(t.encode("abc"), (Ids{32, 257}));  // " abc" cut by GPT-2's regex into one word: the space byte, then abc
  EXPECT_EQ(t.decode({32, 257}), " abc");      // the ByteLevel decoder keeps the space
}

TEST(TransformersClass, qwen35KeepsACombiningMarkWithItsLetter) {
  const std::string ka_virama = "\xE0\xA4\x95\xE0\xA5\x8D";  // U+0915 U+094D
  // The json's (Qwen2's) regex: \p{L}+ takes KA, the virama (\p{M}) falls to the punctuation branch, a piece apart.
  EXPECT_EQ(Folder(byte_level_form(), json()).load().encode(ka_virama), (Ids{258, 0xE0, 0xA5, 0x8D}));
  EXPECT_EQ(Folder(byte_level_form(), json(), "", "qwen3").load().encode(ka_virama), (Ids{258, 0xE0, 0xA5, 0x8D}));
  // Qwen3_5Tokenizer's [\p{L}\p{M}]+ keeps them one piece, which the merges join whole.
  EXPECT_EQ(Folder(byte_level_form(), json(), "", "qwen3_5").load().encode(ka_virama), (Ids{261}));
  EXPECT_EQ(Folder(byte_level_form(), {{"tokenizer_class", "Qwen2Tokenizer"}}, "", "qwen3_5").load().encode(ka_virama),
            (Ids{258, 0xE0, 0xA5, 0x8D}));
}

TEST(TransformersClass, aByteLevelClassOverACharacterJsonIsRefused) {
  const Folder f(llama2_form(), {{"tokenizer_class", "GPT2Tokenizer"}});
  expect_one_line_error([&] { f.load(); }, f.json_path(), {"GPT2Tokenizer"});
}

// split_special_tokens (every class reads it: TokenizersBackend sets tokenizers' encode_special_tokens): a special
// token's text is encoded as text, a non-special added token is still cut out, and the special id still decodes.
// Byte-level form, no merges across the pieces: "a<|s|>b" is the bytes a < | s | > b (Qwen2's regex cuts it into
// a, <|, s, |>, b; no merge applies).
TEST(TransformersClass, splitSpecialTokensEncodesSpecialTokensAsText) {
  json j = byte_level_form();
  j["added_tokens"] = json::array({special_token("<|s|>", 263)});
  j["added_tokens"].push_back({{"id", 264}, {"content", "<y>"}, {"single_word", false}, {"lstrip", false},
                               {"rstrip", false}, {"normalized", false}, {"special", false}});
  const BpeTokenizer plain = Folder(j, json::object()).load();
  const Ids s = plain.encode("<|s|>"), y = plain.encode("<y>");
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(plain.encode("a<|s|>b<y>"), (Ids{97, s[0], 98, y[0]}));
  const Folder split(j, {{"split_special_tokens", true}});
  const BpeTokenizer t = split.load();
  EXPECT_EQ(t.encode("a<|s|>b<y>"), (Ids{97, '<', '|', 's', '|', '>', 98, y[0]}));
  EXPECT_EQ(t.decode(s), "<|s|>");
  EXPECT_EQ(Folder(j, {{"split_special_tokens", false}}).load().encode("a<|s|>b"), (Ids{97, s[0], 98}));
  EXPECT_EQ(Folder(j, {{"split_special_tokens", nullptr}}).load().encode("a<|s|>b"), (Ids{97, s[0], 98}));
  // Named in what statecut reports, whatever the class.
  const std::string d = statecut::describe_pipeline(statecut::read_transformers_class(split.dir.string()));
  EXPECT_NE(d.find("special tokens split as text"), std::string::npos) << d;
  const Folder llama(llama2_form(), {{"tokenizer_class", "LlamaTokenizer"}, {"split_special_tokens", true}});
  EXPECT_EQ(statecut::describe_pipeline(statecut::read_transformers_class(llama.dir.string())),
            "LlamaTokenizer (Metaspace, prepend first, special tokens split as text)");
  EXPECT_NE(llama.load().encode("<s>"), (Ids{1}));
  const Folder bad(j, {{"split_special_tokens", "yes"}});
  expect_one_line_error([&] { bad.load(); }, (bad.dir / "tokenizer_config.json").string(), {"split_special_tokens"});
}

// A tokenizer that is the checkpoint's own Python code (ChatGLM's: auto_map's AutoTokenizer names the folder's
// module, and transformers has no class of its own for it) is refused: transformers runs it only with
// trust_remote_code, and its ids need not be the json's. Where transformers has its own class (tokenizer_class one it
// knows, or a model_type it registers) it uses that without the remote code, and so does statecut.
TEST(TransformersClass, aTokenizerThatIsTheCheckpointsOwnCodeIsRefusedNamingIt) {
  const json chatglm = {
      {"tokenizer_class", "ChatGLMTokenizer"},
      {"auto_map", {{"AutoTokenizer", json::array({"tokenization_chatglm.ChatGLMTokenizer", nullptr})}}}};
  {
    const Folder f(llama2_form(), chatglm);
    const std::string cfg = (f.dir / "tokenizer_config.json").string();
    const std::string why = statecut::remote_tokenizer_code(f.dir.string());
    EXPECT_EQ(why.rfind(cfg + ": ", 0), 0u) << why;
    for (const char* needle : {"auto_map", "tokenization_chatglm.ChatGLMTokenizer", "trust_remote_code"})
      EXPECT_NE(why.find(needle), std::string::npos) << needle << " in " << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  // No class named, the fast slot only, the string form: refused; a model type transformers registers, or a class it
  // has, takes its own class; auto_map without AutoTokenizer (fla-hub's AutoModelForCausalLM) or none: read.
  const json fast_only = {{"auto_map", {{"AutoTokenizer", json::array({nullptr, "m.MyTokenizerFast"})}}}};
  const json string_form = {{"auto_map", {{"AutoTokenizer", "m.MyTokenizer"}}}};
  EXPECT_NE(statecut::remote_tokenizer_code(Folder(llama2_form(), fast_only).dir.string()), "");
  EXPECT_NE(statecut::remote_tokenizer_code(Folder(llama2_form(), string_form, "", "delta_net").dir.string()), "");
  EXPECT_EQ(statecut::remote_tokenizer_code(Folder(llama2_form(), string_form, "", "qwen2").dir.string()), "");
  for (const char* own : {"LlamaTokenizerFast", "GemmaTokenizer", "PreTrainedTokenizerFast"}) {
    json named = chatglm;
    named["tokenizer_class"] = own;
    EXPECT_EQ(statecut::remote_tokenizer_code(Folder(llama2_form(), named).dir.string()), "") << own;
  }
  EXPECT_EQ(statecut::remote_tokenizer_code(
                Folder(llama2_form(), {{"auto_map", {{"AutoModelForCausalLM", "m.Model"}}}}).dir.string()),
            "");
  const json named_only = {{"tokenizer_class", "ChatGLMTokenizer"}};  // no auto_map: read as the json, as before
  EXPECT_EQ(statecut::remote_tokenizer_code(Folder(llama2_form(), named_only).dir.string()), "");
  // config.json's auto_map counts too (transformers reads both), and is named.
  const Folder f(llama2_form(), json());
  std::ofstream(f.dir / "config.json")
      << json{{"model_type", "chatglm"}, {"auto_map", {{"AutoTokenizer", "t.T"}}}}.dump();
  const std::string why = statecut::remote_tokenizer_code(f.dir.string());
  EXPECT_EQ(why.rfind((f.dir / "config.json").string() + ": ", 0), 0u) << why;
}
