// `statecut eval` end to end: bits/byte from fla's own logits (fixture golden) reproduced, the JSON shape of
// DESIGN.md §2, the shipped model near its recorded held-out bits/byte, one-line errors.
#include "tests/cli/overflow_checkpoint.h"
#include "tests/cli/prune_cli_util.h"

using namespace pipeline_cli;
using nlohmann::json;

TEST(Cli_Eval, bitsPerByteEqualsFlasLogits) {
  if (!fs::exists(kFixtures / "fla_delta_net")) GTEST_SKIP() << "no fixtures (../shared/fixtures or tests/data/fixtures)";
  TempDir d("evalgold");
  const std::string gold = (kFixtures / "fla_delta_net" / "golden.safetensors").string();
  std::vector<int64_t> shape;
  const auto ids = read_tensor(gold, "run0.input_ids", &shape);
  const auto lg = read_tensor(gold, "run0.logits");
  const int64_t T = shape[1], V = 256;
  // NLL of row 0 from fla's logits: targets ids[1..T-1].
  double nll = 0;
  for (int64_t t = 0; t + 1 < T; ++t) {
    const double* row = lg.data() + t * V;
    double mx = row[0], s = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, row[v]);
    for (int64_t v = 0; v < V; ++v) s += std::exp(row[v] - mx);
    nll += mx + std::log(s) - row[static_cast<int64_t>(ids[t + 1])];
  }
  const double want = nll / std::log(2.0) / static_cast<double>(T - 1);
  write_tokens(d / "row0.safetensors", std::vector<int64_t>(ids.begin(), ids.begin() + T), 1, T);
  const CliRun r = run_statecut("eval --json --quiet --checkpoint " + (kFixtures / "fla_delta_net").string() + " --text " +
                         (d / "row0.safetensors") + " --window " + std::to_string(T));
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 1u);
  const json& x = j["results"][0];
  EXPECT_EQ(x["tokens"], T - 1);
  // fp32 logits on both sides; the NLL sums T−1 terms: relative error ~ eps_f32 · |logits| per term.
  EXPECT_NEAR(x["bits_per_byte"].get<double>(), want, 1e-5 * want);
  EXPECT_NEAR(x["token_perplexity"].get<double>(), std::exp(nll / (T - 1)), 1e-4 * std::exp(nll / (T - 1)));
}

TEST(Cli_Eval, jsonListsEveryFileAndTheShippedModelIsNearItsRecordedBitsPerByte) {
  const CliRun r = run_statecut("eval --json --quiet --checkpoint " + kModel.string() + " --max-tokens 4097 --text " +
                         (kCorpora / "pydocs_valid.txt").string() + " " + (kCorpora / "fortunes.txt").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 2u);
  for (const auto& x : j["results"]) {
    for (const char* k : {"file", "bits_per_byte", "token_perplexity", "tokens"}) EXPECT_TRUE(x.contains(k)) << k;
    EXPECT_EQ(x["tokens"], 4096);  // two full 2048-token windows
    // byte-level: perplexity per token = 2^(bits per byte)
    EXPECT_NEAR(x["token_perplexity"].get<double>(), std::pow(2.0, x["bits_per_byte"].get<double>()), 1e-9);
  }
  // metrics.json (fla, fp32, the full 600 KB): pydocs_valid 1.3608, fortunes 3.1898. A 4 KB prefix in bf16 lands
  // within a few tenths (measured 1.328 / 3.200; 8 KB: 1.296 / 3.390); far off would mean a broken model,
  // tokenizer or window.
  EXPECT_NEAR(j["results"][0]["bits_per_byte"].get<double>(), 1.36, 0.35);
  EXPECT_NEAR(j["results"][1]["bits_per_byte"].get<double>(), 3.19, 0.6);
}

TEST(BadInput_Eval, missingOrEmptyFileIsOneLine) {
  TempDir d("evalbad");
  std::ofstream(d / "empty.txt").close();
  for (const std::string& t : {d / "none.txt", d / "empty.txt"}) {
    const CliRun r = run_statecut("eval --checkpoint " + kModel.string() + " --text " + t);
    EXPECT_EQ(r.code, 1);
    const auto l = lines(r.err);
    ASSERT_EQ(l.size(), 1u) << r.err;
    EXPECT_EQ(l[0].rfind("statecut eval: error: " + t, 0), 0u) << l[0];
    EXPECT_TRUE(r.out.empty()) << "no partial table on stdout";
  }
}

// A tokenizer.json or tokenizer.model that is a directory: one line naming it (it was libstdc++'s "basic_filebuf::
// underflow error reading the file: Is a directory", or the SentencePiece helper's abort).
TEST(BadInput_Eval, tokenizerPathThatIsADirectoryIsOneLineNamingIt) {
  for (const std::string name : {"tokenizer.json", "tokenizer.model"}) {
    TempDir d("evaltokdir");
    const fs::path m = d.path / "m";
    fs::copy(kModel, m, fs::copy_options::recursive);
    fs::create_directories(m / name);
    const CliRun r = run_statecut("eval --checkpoint " + m.string() + " --text " + (kCorpora / "fortunes.txt").string());
    EXPECT_EQ(r.code, 1) << name;
    EXPECT_EQ(r.err, "statecut eval: error: " + (m / name).string() +
                         ": not a regular file (a directory?); expected the tokenizer file\n");
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// A negative norm epsilon in config.json is the config's error, named there (the forward's NaN was blamed on the
// text: "its forward overflows on this text").
TEST(BadInput_Eval, negativeNormEpsilonIsAConfigError) {
  TempDir d("evaleps");
  const fs::path m = d.path / "m";
  fs::copy(kModel, m, fs::copy_options::recursive);
  auto cfg = json::parse(slurp(m / "config.json"));
  cfg["norm_eps"] = -1;
  std::ofstream(m / "config.json") << cfg.dump();
  const CliRun r = run_statecut("eval --checkpoint " + m.string() + " --text " + (kCorpora / "fortunes.txt").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "statecut eval: error: " + (m / "config.json").string() +
                       ": 'norm_eps': a norm epsilon must be finite and >= 0, got -1.000000\n");
}

// Negative counts were accepted (exit 0, a table): a usage error naming the option and the bound. bench --repeats 0
// (no prefill measured), rank --len and prune --keep below 1 likewise.
TEST(BadInput_Eval, negativeCountsAreUsageErrorsNamingTheBound) {
  const std::string text = (kCorpora / "fortunes.txt").string();
  for (const std::string opt : {"--stride", "--max-tokens", "--batch"}) {
    const CliRun r = run_statecut("eval --checkpoint " + kModel.string() + " --text " + text + " " + opt + " -1");
    EXPECT_EQ(r.code, 2) << opt;
    const auto l = lines(r.err);
    ASSERT_EQ(l.size(), 1u) << r.err;
    EXPECT_EQ(l[0], "statecut eval: usage: " + opt + ": must be an integer >= 0, got -1; see 'statecut eval --help'");
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  const CliRun b = run_statecut("bench --checkpoint " + kModel.string() + " --repeats 0");
  EXPECT_EQ(b.code, 2);
  EXPECT_EQ(b.err, "statecut bench: usage: --repeats: must be an integer >= 1, got 0; see 'statecut bench --help'\n");
  // rank --len -3 said "cannot create std::vector larger than max_size()"; prune --keep 0 "give exactly one of ..."
  const CliRun rk = run_statecut("rank --checkpoint " + kModel.string() + " --text " + text + " --len -3");
  EXPECT_EQ(rk.code, 2);
  EXPECT_EQ(rk.err, "statecut rank: usage: --len: must be an integer >= 2, got -3; see 'statecut rank --help'\n");
  // --len 1 is as much a usage error (the analysis needs two tokens); it said "error: rank: needs one sequence ..."
  const CliRun r1 = run_statecut("rank --checkpoint " + kModel.string() + " --text x.txt --len 1");
  EXPECT_EQ(r1.code, 2);
  EXPECT_EQ(r1.err, "statecut rank: usage: --len: must be an integer >= 2, got 1; see 'statecut rank --help'\n");
  const CliRun pk = run_statecut("prune --checkpoint " + kModel.string() + " --method l1 --keep 0 --out x");
  EXPECT_EQ(pk.code, 2);
  EXPECT_EQ(pk.err, "statecut prune: usage: --keep: must be an integer >= 1, got 0; see 'statecut prune --help'\n");
}

TEST(BadInput_Eval, failureAfterTheFilesAreReadPrintsNoTableHeader) {
  TempDir d("evalbad2");
  std::ofstream(d / "one.txt") << "x";  // one byte: one token, nothing to predict
  // one token is a failure (exit 1), --window 0 a usage error (exit 2) found once the model is loaded
  for (const auto& [args, code] : {std::pair<std::string, int>{" --text " + (d / "one.txt"), 1},
                                   {" --window 0 --text " + (kCorpora / "fortunes.txt").string(), 2}}) {
    const CliRun r = run_statecut("eval --quiet --checkpoint " + kModel.string() + args);
    EXPECT_EQ(r.code, code) << args << ": " << r.err;
    EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(r.out.empty()) << args << ": a table header before the failure: " << r.out;
  }
}

// A model whose forward overflows on the text (finite weights, Inf logits) has no bits/byte: one line naming the
// text and the problem, exit 1, no table — not a "nan" row with exit 0.
TEST(BadInput_Eval, overflowingForwardIsAnErrorNotANaNRow) {
  TempDir d("evaloverflow");
  const std::string ck = statecut::test::overflowing_checkpoint(kModel, d / "ck");
  const std::string t = d / "t.txt";
  head_bytes(kCorpora / "pydocs_valid.txt", t, 600);
  const CliRun r = run_statecut("eval --quiet --checkpoint " + ck + " --text " + t);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("statecut eval: error: " + t + ": the model's logits are not finite", 0), 0u) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(Cli_Eval, windowBeyondTheTrainedLengthWarnsOnce) {
  TempDir d("evalwarn");
  const std::string t = d / "t.txt";
  head_bytes(kCorpora / "pydocs_valid.txt", t, 3000);
  CliRun r = run_statecut("eval --quiet --checkpoint " + kModel.string() + " --window 2500 --text " + t);
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("warning: --window 2500 is beyond max_position_embeddings 2048"), std::string::npos) << r.err;
  r = run_statecut("eval --quiet --checkpoint " + kModel.string() + " --window 2048 --text " + t);
  EXPECT_TRUE(r.err.empty()) << r.err;
}

// A checkpoint without tokenizer files (vocab 128, one of tests/data/variants) scored on a token file: the token
// perplexity, with bits/byte reported unavailable and why — the tool used to refuse with "give pre-tokenised
// .safetensors/.bin files", the very input it had been given. Text files are still refused (no way to tokenise them).
TEST(Cli_Eval, tokenFileWithoutATokenizerGivesPerplexityAndSaysWhyNoBitsPerByte) {
  const std::string ck = (fs::path(STATECUT_SOURCE_DIR) / "tests/data/variants/hf_mamba2_groups2").string();
  TempDir d("evalnotok");
  std::vector<int64_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 37 + 11) % 128);
  write_tokens(d / "ids.safetensors", ids, 1, static_cast<int64_t>(ids.size()));
  const std::string ids_file = d / "ids.safetensors";
  const CliRun r = run_statecut("eval --json --quiet --checkpoint " + ck + " --window 128 --text " + ids_file);
  ASSERT_EQ(r.code, 0) << r.err;
  const json x = json::parse(r.out)["results"][0];
  EXPECT_TRUE(x["bits_per_byte"].is_null());
  EXPECT_NE(x["bits_per_byte_unavailable"].get<std::string>().find("bits per byte need a tokenizer"),
            std::string::npos);
  // not the advice for text ("give pre-tokenised files"): a token file is what was given (audit 22b #14)
  EXPECT_EQ(x["bits_per_byte_unavailable"].get<std::string>().find("pre-tokenised"), std::string::npos)
      << x["bits_per_byte_unavailable"];
  EXPECT_EQ(x["tokens"], 299);
  const double ppl = x["token_perplexity"].get<double>();
  EXPECT_TRUE(std::isfinite(ppl) && ppl > 1.0 && ppl < 1e4) << ppl;  // a random model over 128 tokens: ~128
  const CliRun table = run_statecut("eval --quiet --checkpoint " + ck + " --window 128 --text " + ids_file);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("bits/byte: "), std::string::npos) << table.out;
  std::ofstream(d / "text.txt") << "plain text cannot be tokenised here";
  const CliRun text = run_statecut("eval --quiet --checkpoint " + ck + " --text " + (d / "text.txt"));
  EXPECT_EQ(text.code, 1);
  EXPECT_NE(text.err.find("no tokenizer.model or tokenizer.json"), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("give pre-tokenised .safetensors/.bin files, or --tokenizer bytes"), std::string::npos)
      << text.err;
}
