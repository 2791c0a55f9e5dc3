// A SentencePiece checkpoint end to end: the shipped byte model with assets/spm_pydocs256/tokenizer.model beside it
// (vocab 256, so its ids fit the embedding; the numbers mean nothing, the plumbing does). `eval` divides by the
// bytes the scored pieces stand for, `prune` calibrates on the pieces and keeps the tokenizer, and a broken
// tokenizer.model stops both with one line. The ids come from statecut-spm next to the statecut binary.
#include "tests/cli/prune_cli_util.h"

using namespace pipeline_cli;
using nlohmann::json;

namespace {

const fs::path kSpm = kRoot / "assets" / "spm_pydocs256";
const fs::path kHelper = fs::path(STATECUT_CLI).parent_path() / "statecut-spm";

/// The shipped model with tokenizer.model copied in.
void model_with_tokenizer(const fs::path& dst, const fs::path& tokenizer) {
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(kModel)) fs::copy_file(e.path(), dst / e.path().filename());
  fs::copy_file(tokenizer, dst / "tokenizer.model");
}

/// statecut-spm's ids of `text` and each piece's bytes.
void helper_ids(const fs::path& text, std::vector<int64_t>& ids, std::vector<int64_t>& piece_bytes) {
  TempDir io("spm");
  const std::string model = (kSpm / "tokenizer.model").string();
  ASSERT_EQ(std::system((kHelper.string() + " " + model + " encode < " + text.string() + " > " + (io / "ids")).c_str()), 0);
  ASSERT_EQ(std::system((kHelper.string() + " " + model + " info > " + (io / "info")).c_str()), 0);
  std::istringstream is(slurp(io / "ids"));
  for (int64_t id; is >> id;) ids.push_back(id);
  std::istringstream in(slurp(io / "info"));
  std::string word, kind;
  int64_t n = 0, id = 0, b = 0;
  in >> word >> n;
  while (in >> id >> b >> kind) piece_bytes.push_back(b);
  ASSERT_EQ(static_cast<int64_t>(piece_bytes.size()), n);
}

}  // namespace

TEST(Cli_SentencePiece, evalDividesByTheBytesOfTheScoredPieces) {
  if (!fs::exists(kHelper)) GTEST_SKIP() << "built without libsentencepiece: no statecut-spm";
  TempDir d("spmeval");
  model_with_tokenizer(d.path / "model", kSpm / "tokenizer.model");
  std::vector<int64_t> ids, pb;
  helper_ids(kSpm / "sample.txt", ids, pb);
  ASSERT_EQ(ids.size(), 745u);
  const CliRun r = run_statecut("eval --json --quiet --window 256 --checkpoint " + (d / "model") + " --text " +
                                (kSpm / "sample.txt").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const json x = json::parse(r.out)["results"][0];
  const int64_t tokens = x["tokens"], bytes = x["bytes"];
  EXPECT_EQ(tokens, 744) << "every id but the first is scored once";
  EXPECT_EQ(bytes, 1471 - pb[ids[0]]) << "the text's UTF-8 bytes minus the unscored first piece";
  // bits/byte = NLL / (ln 2 · bytes) and ppl = exp(NLL / tokens): both from one f64 NLL.
  const double nll_from_ppl = std::log(x["token_perplexity"].get<double>()) * static_cast<double>(tokens);
  EXPECT_NEAR(x["bits_per_byte"].get<double>() * std::log(2.0) * static_cast<double>(bytes), nll_from_ppl, 1e-9 * nll_from_ppl);
}

TEST(Cli_SentencePiece, pruneCalibratesOnThePiecesAndKeepsTheTokenizer) {
  if (!fs::exists(kHelper)) GTEST_SKIP() << "built without libsentencepiece: no statecut-spm";
  TempDir d("spmprune");
  model_with_tokenizer(d.path / "model", kSpm / "tokenizer.model");
  const CliRun r = run_statecut("prune --json --quiet --method drrqr --ratio 0.5 --calib-seqs 2 --calib-len 128 --checkpoint " +
                                (d / "model") + " --calib " + (kSpm / "sample.txt").string() + " --out " + (d / "pruned"));
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["calibration"]["tokenizer"], "sentencepiece:" + (d / "model") + "/tokenizer.model");
  EXPECT_EQ(j["calibration"]["stream_tokens"], 745);
  EXPECT_EQ(j["new_head_k_dim"], 32);
  EXPECT_EQ(slurp(d.path / "pruned" / "tokenizer.model"), slurp(kSpm / "tokenizer.model"));
  const CliRun e = run_statecut("eval --json --quiet --window 256 --checkpoint " + (d / "pruned") + " --text " +
                                (kSpm / "sample.txt").string());
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(json::parse(e.out)["results"][0]["tokens"], 744);
}

TEST(BadInput_SentencePiece, brokenTokenizerModelStopsEvalAndPruneWithOneLine) {
  TempDir d("spmbad");
  std::ofstream(d / "garbage.model") << "this is not a SentencePiece model\n";
  model_with_tokenizer(d.path / "model", d.path / "garbage.model");
  const std::string tm = (d / "model") + "/tokenizer.model: ";
  const CliRun e = run_statecut("eval --quiet --checkpoint " + (d / "model") + " --text " + (kSpm / "sample.txt").string());
  EXPECT_EQ(e.code, 1);
  ASSERT_EQ(lines(e.err).size(), 1u) << e.err;
  EXPECT_NE(e.err.find(tm), std::string::npos) << e.err;
  EXPECT_TRUE(e.out.empty());
  const CliRun p = run_statecut("prune --quiet --method drrqr --ratio 0.5 --calib-seqs 2 --calib-len 128 --checkpoint " +
                                (d / "model") + " --calib " + (kSpm / "sample.txt").string() + " --out " + (d / "pruned"));
  EXPECT_EQ(p.code, 1);
  ASSERT_EQ(lines(p.err).size(), 1u) << p.err;
  EXPECT_NE(p.err.find(tm), std::string::npos) << p.err;
  EXPECT_FALSE(fs::exists(d.path / "pruned")) << "no output folder after a failed run";
}
