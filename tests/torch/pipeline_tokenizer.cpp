// SentencePiece checkpoints: Tokenizer::for_checkpoint runs the statecut-spm helper (tools/spm_main.cpp). Golden:
// assets/spm_pydocs256/sample.ids is Debian's `spm_encode --output_format=id` of sample.txt (README there); our
// whole-text ids must equal its lines joined by the id of "\n". The pieces' byte lengths must sum to the text's
// UTF-8 length (the model keeps every byte in exactly one piece). Broken models and a missing helper: one line.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "optimized/analysis/evaluation.h"
#include "optimized/text/token_stream.h"
#include "optimized/text/tokenizer.h"
#include "tests/torch/pipeline_util.h"

namespace fs = std::filesystem;
using statecut::Tokenizer;
using pipeline_test::slurp;
using pipeline_test::TempDir;

namespace {

const fs::path kPipelineRoot = fs::path(STATECUT_SOURCE_DIR);
const fs::path kPipelineSpm = kPipelineRoot / "assets" / "spm_pydocs256";

class SentencePiece : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef STATECUT_SPM_PATH
    GTEST_SKIP() << "built without libsentencepiece: no statecut-spm";
#else
    ::setenv("STATECUT_SPM", STATECUT_SPM_PATH, 1);
#endif
  }
};

}  // namespace

using Golden_SentencePiece = SentencePiece;
using BadInput_SentencePiece = SentencePiece;

TEST_F(Golden_SentencePiece, idsEqualSpmEncodeLinesJoinedByTheNewlinePiece) {
  const Tokenizer tok = Tokenizer::for_checkpoint(kPipelineSpm.string());
  ASSERT_FALSE(tok.byte_level());
  EXPECT_EQ(tok.vocab_size(), 256);
  const std::vector<int64_t> nl = tok.encode("\n");
  ASSERT_EQ(nl.size(), 1u) << "\"\\n\" is one user-defined piece";
  std::vector<int64_t> want;
  std::istringstream gold(slurp(kPipelineSpm / "sample.ids"));
  for (std::string line; std::getline(gold, line);) {
    std::istringstream ls(line);
    for (int64_t id; ls >> id;) want.push_back(id);
    want.push_back(nl[0]);
  }
  const std::vector<int64_t> got = tok.encode(slurp(kPipelineSpm / "sample.txt"));
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(got, want);
  EXPECT_LT(got.size(), 1471u / 1.5) << "a real subword model, not one piece per byte";
}

TEST_F(Golden_SentencePiece, pieceBytesSumToTheUtf8LengthOfTheText) {
  const Tokenizer tok = Tokenizer::for_checkpoint(kPipelineSpm.string());
  // The sample holds U+2013 (3 bytes, one piece); the 90 KB prefix is the model's whole training text.
  const std::string prefix = slurp(kPipelineRoot / "assets" / "corpora" / "pydocs_train.txt").substr(0, 90000);
  for (const std::string& text : {slurp(kPipelineSpm / "sample.txt"), prefix, std::string("\xE2\x80\x93 x\n")}) {
    int64_t sum = 0;
    for (int64_t id : tok.encode(text)) sum += tok.bytes_of(id);
    EXPECT_EQ(sum, static_cast<int64_t>(text.size())) << text.substr(0, 40);
  }
  // read_tokens (what eval and calibration read) carries the same byte count.
  const auto s = statecut::read_tokens((kPipelineSpm / "sample.txt").string(), tok, 256);
  EXPECT_EQ(s.bytes, 1471);
  EXPECT_EQ(tok.bytes_of(0), 0) << "<unk> stands for no bytes";
}

/// The message of the std::runtime_error that `f` throws ("" when it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return {};
}

// Beside a tokenizer.model, a tokenizer.json statecut cannot read is an error naming the json, even one that converts
// the model (a byte_fallback BPE, here without a decoder): SentencePiece's own ids differ from the json's, which
// transformers reads (a dummy "▁" before a leading space, special tokens read as text; audit 26 D3). Without the
// json the model is used.
TEST_F(BadInput_SentencePiece, anUnreadableJsonBesideTheModelIsAnErrorNotASwitchToTheModel) {
  TempDir d("spm_json");
  fs::copy_file(kPipelineSpm / "tokenizer.model", d.path / "tokenizer.model");
  std::ofstream(d.path / "tokenizer.json")
      << R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {}, "merges": []},
             "added_tokens": [{"id": 0, "content": "<unk>", "special": true},
                              {"id": 300, "content": "<|im_start|>", "special": true}]})";
  const std::string msg = error_of([&] { Tokenizer::for_checkpoint(d.path.string()); });
  EXPECT_EQ(msg.rfind((d.path / "tokenizer.json").string() + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find("does not fall back to the tokenizer.model"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  fs::remove(d.path / "tokenizer.json");
  EXPECT_EQ(Tokenizer::for_checkpoint(d.path.string()).describe(), "sentencepiece:" + (d.path / "tokenizer.model").string());
}

TEST_F(BadInput_SentencePiece, brokenModelFileIsOneLineNamingIt) {
  TempDir d("spm");
  const std::string model = (d.path / "tokenizer.model").string();
  const std::string good = slurp(kPipelineSpm / "tokenizer.model");
  for (const std::string& bytes : {std::string("not a protobuf\n"), good.substr(0, good.size() / 2), std::string()}) {
    std::ofstream(model, std::ios::binary) << bytes;
    const std::string msg = error_of([&] { Tokenizer::for_checkpoint(d.path.string()); });
    ASSERT_FALSE(msg.empty()) << bytes.size() << " bytes loaded as a model";
    EXPECT_EQ(msg.rfind(model + ": ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST_F(BadInput_SentencePiece, missingHelperIsOneLineNamingTheModel) {
  ::setenv("STATECUT_SPM", "/nonexistent/statecut-spm", 1);
  const std::string msg = error_of([&] { Tokenizer::for_checkpoint(kPipelineSpm.string()); });
  EXPECT_EQ(msg.rfind((kPipelineSpm / "tokenizer.model").string() + ": cannot run /nonexistent/statecut-spm", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(Unit_Tokenizer, folderWithoutTokenizerModelIsByteLevel) {
  const Tokenizer tok = Tokenizer::for_checkpoint((kPipelineRoot / "assets" / "byte_delta_net_4L").string());
  EXPECT_TRUE(tok.byte_level());
  EXPECT_EQ(tok.encode("\xE2\x80\x93" "a"), (std::vector<int64_t>{0xE2, 0x80, 0x93, 'a'}));
  EXPECT_EQ(tok.bytes_of(0x93), 1);
}

// The rule of tokenizer.h: byte-level only when the checkpoint says so (vocab 256, or --tokenizer bytes).
TEST(Unit_Tokenizer, otherVocabularyWithoutTokenizerIsRefusedNotReadAsBytes) {
  TempDir d("vocab");
  std::ofstream(d.path / "config.json") << R"({"model_type": "delta_net", "vocab_size": 32000})";
  const Tokenizer tok = Tokenizer::for_checkpoint(d.path.string());
  EXPECT_FALSE(tok.available());
  EXPECT_FALSE(tok.byte_level());
  const std::string msg = error_of([&] { tok.encode("hello"); });
  EXPECT_EQ(msg.rfind(d.path.string() + ": no tokenizer.model or tokenizer.json, and vocab_size 32000", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  std::ofstream(d.path / "calib.txt") << "some text";
  EXPECT_EQ(error_of([&] { statecut::read_tokens((d.path / "calib.txt").string(), tok, 32000); }), msg);
}

TEST(Unit_Tokenizer, tokenFilesStillWorkWithoutATokenizer) {
  TempDir d("vocab");
  std::ofstream(d.path / "config.json") << R"({"model_type": "delta_net", "vocab_size": 32000})";
  const Tokenizer tok = Tokenizer::for_checkpoint(d.path.string());
  const std::vector<uint16_t> ids = {31999, 7, 1234};
  std::ofstream(d.path / "ids.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 2));
  const auto s = statecut::read_tokens((d.path / "ids.bin").string(), tok, 32000);
  EXPECT_EQ(s.ids, (std::vector<int64_t>{31999, 7, 1234}));
  EXPECT_EQ(s.bytes, -1) << "bytes are unknown without a tokenizer";
}

TEST(Unit_Tokenizer, forcedBytesAndNestedByteVocabularyAreByteLevel) {
  TempDir d("vocab");
  std::ofstream(d.path / "config.json") << R"({"model_type": "delta_net", "vocab_size": 32000})";
  EXPECT_TRUE(Tokenizer::for_checkpoint(d.path.string(), statecut::TokenizerChoice::Bytes).byte_level());
  std::ofstream(d.path / "config.json") << R"({"model_type": "qwen3_5", "text_config": {"vocab_size": 256}})";
  EXPECT_TRUE(Tokenizer::for_checkpoint(d.path.string()).byte_level());
}

TEST(Unit_Tokenizer, brokenTokenizerJsonIsOneLineNamingItNeverBytes) {
  TempDir d("tokjson");
  std::ofstream(d.path / "config.json") << R"({"model_type": "delta_net", "vocab_size": 256})";
  std::ofstream(d.path / "tokenizer.json") << "{ not json";
  const std::string msg = error_of([&] { Tokenizer::for_checkpoint(d.path.string()).encode("x"); });
  EXPECT_EQ(msg.rfind((d.path / "tokenizer.json").string() + ": ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// A checkpoint folder with tokenizer.json and no tokenizer.model (every Qwen3.5 / Qwen3-Next release) is read with
// its byte-level BPE, never as raw bytes. Golden: HF tokenizers' ids (tests/data/tokenizer_bpe/golden.jsonl).
TEST(Unit_Tokenizer, tokenizerJsonCheckpointUsesItsBpe) {
#ifndef STATECUT_HAVE_BPE_TOKENIZER
  GTEST_SKIP() << "built without PCRE2: no tokenizer.json support";
#else
  TempDir d("bpe");
  std::ofstream(d.path / "config.json") << R"({"model_type": "qwen3_5_text", "vocab_size": 151936})";
  fs::copy_file(kPipelineRoot / "tests" / "data" / "tokenizer_bpe" / "tokenizer.json", d.path / "tokenizer.json");
  const Tokenizer tok = Tokenizer::for_checkpoint(d.path.string());
  EXPECT_FALSE(tok.byte_level());
  EXPECT_EQ(tok.describe(), "bpe:" + (d.path / "tokenizer.json").string());
  EXPECT_EQ(tok.encode("Hello, world!"), (std::vector<int64_t>{9707, 11, 1879, 0}));
  // bytes_of sums to the text's UTF-8 length (bits per byte divide by it).
  int64_t bytes = 0;
  for (int64_t id : tok.encode("Hello, world!")) bytes += tok.bytes_of(id);
  EXPECT_EQ(bytes, 13);
#endif
}

namespace {
/// Uniform logits over a vocabulary of V: every scored token costs ln V.
class UniformVocabLM : public statecut::CausalLM {
 public:
  explicit UniformVocabLM(int64_t v) : v_(v) {}
  statecut::ForwardResult forward(const torch::Tensor& ids, const statecut::ForwardOptions&) override {
    statecut::ForwardResult r;
    r.logits = torch::zeros({ids.size(0), ids.size(1), v_});
    return r;
  }
  const std::string& model_type() const override { return type_; }
  int64_t vocab_size() const override { return v_; }
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() override { return {}; }

 private:
  int64_t v_;
  std::string type_ = "uniform";
};
}  // namespace

// Both files: tokenizer.json wins, as in transformers' fast tokenizer (it once lost to tokenizer.model).
TEST(Unit_Tokenizer, tokenizerJsonBesideATokenizerModelIsTheOneRead) {
#ifndef STATECUT_HAVE_BPE_TOKENIZER
  GTEST_SKIP() << "built without PCRE2: no tokenizer.json support";
#else
  TempDir d("both");
  fs::copy_file(kPipelineSpm / "tokenizer.model", d.path / "tokenizer.model");
  fs::copy_file(kPipelineRoot / "tests" / "data" / "tokenizer_bpe" / "tokenizer.json", d.path / "tokenizer.json");
  const Tokenizer tok = Tokenizer::for_checkpoint(d.path.string());
  EXPECT_EQ(tok.describe(), "bpe:" + (d.path / "tokenizer.json").string());
  EXPECT_EQ(tok.encode("Hello, world!"), (std::vector<int64_t>{9707, 11, 1879, 0}));
#endif
}

// A byte-level tokenizer.json statecut cannot read (here an NFKC normalizer) is its own tokenizer, not a conversion of
// the tokenizer.model beside it: its error, never the model's other ids in silence (audit 24 D1).
// Meta's original Llama 3 folder names its tiktoken rank file tokenizer.model: named as such, not as a protobuf
// SentencePiece failed to parse.
TEST_F(BadInput_SentencePiece, aTiktokenFileNamedTokenizerModelIsNamedAsTiktoken) {
  TempDir d("tiktoken");
  std::ofstream(d.path / "tokenizer.model") << "IQ== 0\nIg== 1\nIw== 2\nJA== 3\n";
  const std::string msg = error_of([&] { Tokenizer::for_checkpoint(d.path.string()); });
  EXPECT_EQ(msg.rfind((d.path / "tokenizer.model").string() + ": a tiktoken rank file", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST_F(BadInput_SentencePiece, anUnreadableJsonOfItsOwnIsAnErrorNotASwitchToTheModel) {
  TempDir d("both");
  fs::copy_file(kPipelineSpm / "tokenizer.model", d.path / "tokenizer.model");
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kPipelineRoot / "tests" / "data" / "tokenizer_bpe" / "tokenizer.json"));
  j["normalizer"] = {{"type", "NFKC"}};
  std::ofstream(d.path / "tokenizer.json") << j.dump();
  const std::string msg = error_of([&] { Tokenizer::for_checkpoint(d.path.string()); });
  EXPECT_EQ(msg.rfind((d.path / "tokenizer.json").string() + ": ", 0), 0u) << msg;
#ifdef STATECUT_HAVE_BPE_TOKENIZER
  EXPECT_NE(msg.find("NFKC"), std::string::npos) << msg;
#endif
  // The same unreadable json marked as a SentencePiece conversion (Metaspace) is refused the same way.
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}};
  std::ofstream(d.path / "tokenizer.json") << j.dump();
  const std::string again = error_of([&] { Tokenizer::for_checkpoint(d.path.string()); });
  EXPECT_EQ(again.rfind((d.path / "tokenizer.json").string() + ": ", 0), 0u) << again;
}

// Tokenizer files of a format statecut does not read (GPT-2's slow vocab.json + merges.txt) make text unreadable,
// naming the file, even where vocab_size 256 would otherwise mean raw bytes (audit 24 D5).
TEST(Unit_Tokenizer, aSlowTokenizersFilesAreNamedNeverReadAsBytes) {
  TempDir d("slow");
  std::ofstream(d.path / "config.json") << R"({"model_type": "delta_net", "vocab_size": 256})";
  std::ofstream(d.path / "vocab.json") << R"({"a": 0})";
  std::ofstream(d.path / "merges.txt") << "#version: 0.2\n";
  const Tokenizer tok = Tokenizer::for_checkpoint(d.path.string());
  EXPECT_FALSE(tok.available());
  const std::string msg = error_of([&] { tok.encode("hello"); });
  EXPECT_EQ(msg.rfind((d.path / "vocab.json").string() + ": a tokenizer file statecut does not read", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_TRUE(Tokenizer::for_checkpoint(d.path.string(), statecut::TokenizerChoice::Bytes).byte_level());
}

// A tokenizer that is the checkpoint's own code (auto_map, transformers_class.h remote_tokenizer_code) makes text
// unreadable, naming the file, beside a tokenizer.json and beside a tokenizer.model alike (ChatGLM-6B ships the model
// and a class that adds its own prefix tokens to SentencePiece's ids); token files and --tokenizer bytes still work.
TEST(Unit_Tokenizer, aTokenizerThatIsTheCheckpointsOwnCodeIsNamedNeverRead) {
#ifndef STATECUT_HAVE_BPE_TOKENIZER
  GTEST_SKIP() << "built without PCRE2: the check reads tokenizer_config.json with the tokenizer.json code";
#else
  for (const char* file : {"tokenizer.json", "tokenizer.model"}) {
    TempDir d("remote");
    const fs::path src = std::string(file) == "tokenizer.json"
                             ? kPipelineRoot / "tests" / "data" / "tokenizer_bpe" / "tokenizer.json"
                             : kPipelineSpm / "tokenizer.model";
    fs::copy_file(src, d.path / file);
    std::ofstream(d.path / "tokenizer_config.json")
        << R"({"tokenizer_class": "ChatGLMTokenizer",)"
        << R"( "auto_map": {"AutoTokenizer": ["tokenization_chatglm.ChatGLMTokenizer", null]}})";
    const Tokenizer tok = Tokenizer::for_checkpoint(d.path.string());
    EXPECT_FALSE(tok.available()) << file;
    const std::string msg = error_of([&] { tok.encode("hello"); });
    const std::string named = (d.path / "tokenizer_config.json").string() + ": the tokenizer is the checkpoint's own";
    EXPECT_EQ(msg.rfind(named, 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_TRUE(Tokenizer::for_checkpoint(d.path.string(), statecut::TokenizerChoice::Bytes).byte_level());
  }
#endif
}

// Bits per byte divide by the file's own bytes (lm-eval: the document's UTF-8 length), not by the bytes of what the
// tokenizer made of it: Qwen3's tokenizer.json normalises NFD "cafe" + U+0301 (6 bytes) to NFC "café" (5), so its
// tokens stand for 20 bytes fewer than the 140-byte file. Invalid UTF-8 (read lossily as U+FFFD) is refused.
TEST(Unit_Tokenizer, bitsPerByteDivideByTheFilesOwnBytesNotTheNormalisedTexts) {
#ifndef STATECUT_HAVE_BPE_TOKENIZER
  GTEST_SKIP() << "built without PCRE2: no tokenizer.json support";
#else
  const Tokenizer tok =
      Tokenizer::for_tokenizer_json((kPipelineRoot / "tests" / "data" / "tokenizer_bpe" / "tokenizer.json").string());
  TempDir d("bpb");
  std::string nfd;
  for (int i = 0; i < 20; ++i) nfd += "cafe\xCC\x81 ";
  const std::string path = (d.path / "nfd.txt").string();
  std::ofstream(path, std::ios::binary) << nfd;
  const int64_t V = 151936;
  const statecut::TokenStream s = statecut::read_tokens(path, tok, V);
  ASSERT_EQ(s.text_bytes, 140);
  EXPECT_EQ(s.bytes, 120) << "the tokens stand for the NFC text";
  UniformVocabLM m(V);
  const auto r = statecut::evaluate_stream(m, s, tok, statecut::EvalOptions{});
  EXPECT_EQ(r.bytes, 140 - tok.bytes_of(s.ids[0])) << "the file less its unscored first token";
  statecut::EvalOptions cut;
  cut.max_tokens = 5;  // a cut stream keeps the scored tokens' own bytes
  int64_t first5 = 0;
  for (int i = 1; i < 5; ++i) first5 += tok.bytes_of(s.ids[static_cast<size_t>(i)]);
  EXPECT_EQ(statecut::evaluate_stream(m, s, tok, cut).bytes, first5);

  const std::string bad = (d.path / "bad.txt").string();
  std::ofstream(bad, std::ios::binary) << "ab\xFF\xFE cd ef";
  try {
    statecut::read_tokens(bad, tok, V);  // eval, prune, rank, logits, verify and train all read text through it
    FAIL() << "invalid UTF-8 tokenised";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), bad + ": invalid UTF-8 at byte 2: the tokenizer would read its repair (U+FFFD), "
                                           "not these bytes (only a byte-level model reads any bytes)");
  }
  // Byte-level ids are the file's bytes whatever they are: nothing to refuse.
  const statecut::TokenStream raw = statecut::read_tokens(bad, Tokenizer::bytes(), 256);
  EXPECT_EQ(statecut::evaluate_stream(m, raw, Tokenizer::bytes(), statecut::EvalOptions{}).bytes, 10 - 1);
#endif
}
