// `statecut rank` end to end: a report for every layer and head of the shipped model, u in [0, 1] with u(0) = 0, the
// pruned dk after pruning, Qwen (packed, grouped values) and Mamba-2 (SSD state, --gated), the table, progress and
// --quiet, --help, warnings for options that do nothing, three SVG plots, and one-line errors for bad input.
#include "tests/cli/prune_cli_util.h"
#include "tests/test_env.h"

using namespace pipeline_cli;
using nlohmann::json;

TEST(Cli_Rank, jsonCoversEveryLayerAndHead) {
  const CliRun r = run_statecut("rank --json --checkpoint " + kModel.string() + " --text " + (kCorpora / "pydocs_valid.txt").string() +
                         " --len 257");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["tokens"], 257);
  ASSERT_EQ(j["layers"].size(), 4u);
  double mean_of_layers = 0;
  for (const auto& L : j["layers"]) {
    EXPECT_EQ(L["dk"], 64);
    ASSERT_EQ(L["heads"].size(), 4u);
    double m = 0;
    for (size_t hi = 0; hi < L["heads"].size(); ++hi) {
      const auto& h = L["heads"][hi];
      EXPECT_FALSE(h.contains("min")) << "min over t is u(0) = 0 by definition: not reported";
      EXPECT_EQ(h["key_head"], hi) << "no grouped values in the shipped model";
      EXPECT_LE(h["max"].get<double>(), 1.0);
      EXPECT_GE(h["mean"].get<double>(), 0.0);
      EXPECT_LE(h["mean"].get<double>(), h["max"].get<double>());
      EXPECT_EQ(h["spectrum"].size(), 64u);
      m += h["mean"].get<double>() / 4;
    }
    EXPECT_NEAR(L["mean"].get<double>(), m, 1e-12);
    mean_of_layers += m / 4;
  }
  EXPECT_NEAR(j["mean_u"].get<double>(), mean_of_layers, 1e-12);
  EXPECT_EQ(j["curve"][0], 0.0) << "u(0) is the zero state";
  EXPECT_EQ(j["state"], "delta");
  EXPECT_EQ(j["model_type"], "delta_net");
  EXPECT_GT(j["mean_u"].get<double>(), 0.0);
}

TEST(Cli_Rank, prunedModelIsAnalysedAtItsNewKeyDim) {
  TempDir d("rankpruned");
  ASSERT_EQ(run_statecut("prune --quiet --checkpoint " + kModel.string() + " --method l1 --keep 16 --out " + (d / "p")).code, 0);
  const CliRun r = run_statecut("rank --json --checkpoint " + (d / "p") + " --text " + (kCorpora / "fortunes.txt").string() + " --len 100");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  for (const auto& L : j["layers"]) {
    EXPECT_EQ(L["dk"], 16);
    for (const auto& h : L["heads"]) EXPECT_EQ(h["spectrum"].size(), 16u) << "min(dk, dv) singular values";
  }
}

// The packed Qwen3-Next layout (q/k rows interleaved per key head in in_proj_qkvz): rank reports the three linear-
// attention layers (not the full-attention one), per value head (GVA: 4 value heads share 2 key heads), at dk 32,
// and at the new dk after a prune of the same layout.
TEST(Cli_Rank, packedQwenNextReportsItsLinearAttentionLayers) {
  const fs::path ck = kFixtures / "hf_qwen3_next";
  if (!fs::exists(ck / "config.json")) GTEST_SKIP() << "fixture hf_qwen3_next not found under " << kFixtures;
  TempDir d("rankqwen");
  ASSERT_EQ(run_statecut("prune --quiet --checkpoint " + ck.string() + " --method l1 --keep 8 --out " + (d / "p")).code, 0);
  for (const auto& [dir, dk] : {std::pair<std::string, int>{ck.string(), 32}, {d / "p", 8}}) {
    const CliRun r = run_statecut("rank --json --checkpoint " + dir + " --text " + (kCorpora / "fortunes.txt").string() +
                                  " --len 100");
    ASSERT_EQ(r.code, 0) << dir << ": " << r.err;
    const json j = json::parse(r.out);
    ASSERT_EQ(j["layers"].size(), 3u) << dir;
    for (int i = 0; i < 3; ++i) {
      const auto& L = j["layers"][i];
      EXPECT_EQ(L["layer"], i) << dir;
      EXPECT_EQ(L["dk"], dk) << dir;
      ASSERT_EQ(L["heads"].size(), 4u) << dir;
      for (const auto& h : L["heads"]) EXPECT_EQ(h["spectrum"].size(), std::min<size_t>(dk, 16)) << "min(dk, dv)";
    }
    EXPECT_GT(j["mean_u"].get<double>(), 0.0) << dir;
  }
}

// --baseline is the unpruned form of the same model: another family (or other layers / heads) is refused naming the
// baseline, and no plot folder is left (it was drawn as "before pruning" behind the panels).
TEST(Cli_Rank, aBaselineOfAnotherModelIsRefused) {
  const std::string other = statecut::test::fixture_dir("hf_mamba2");
  if (other.empty()) GTEST_SKIP() << "fixture hf_mamba2 not found";
  TempDir d("svg-other");
  const CliRun r = run_statecut("rank --checkpoint " + kModel.string() + " --text " + (kCorpora / "wordnet.txt").string() +
                                " --len 200 --quiet --svg " + (d / "plots") + " --baseline " + other);
  EXPECT_EQ(r.code, 1) << r.err;
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(other + ": --baseline is mamba2, "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not the unpruned form of " + kModel.string()), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d.path / "plots"));
}

TEST(Cli_Rank, svgFolderHoldsThreePlots) {
  TempDir d("svg");
  const CliRun r = run_statecut("rank --checkpoint " + kModel.string() + " --text " + (kCorpora / "wordnet.txt").string() +
                         " --len 200 --svg " + (d / "plots") + " --baseline " + kModel.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("mean u:"), std::string::npos) << r.out;
  for (const std::string f : {"u_curves.svg", "heatmap.svg", "spectra.svg"}) {
    const std::string s = slurp(d.path / "plots" / f);
    EXPECT_EQ(s.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << f;
    EXPECT_NE(s.find("</svg>"), std::string::npos) << f;
  }
  EXPECT_NE(slurp(d.path / "plots" / "spectra.svg").find("stroke-dasharray"), std::string::npos) << "baseline drawn";
  EXPECT_NE(slurp(d.path / "plots" / "heatmap.svg").find("layer 3 head 3"), std::string::npos);
  // titles name the checkpoint's folder, not its absolute path
  for (const std::string f : {"u_curves.svg", "heatmap.svg", "spectra.svg"}) {
    const std::string s = slurp(d.path / "plots" / f);
    EXPECT_NE(s.find(">byte_delta_net_4L: "), std::string::npos) << f;
    EXPECT_EQ(s.find(kModel.string()), std::string::npos) << f << " shows the absolute path";
  }
  EXPECT_NE(slurp(d.path / "plots" / "spectra.svg").find(">before pruning: byte_delta_net_4L<"), std::string::npos);
}

TEST(BadInput_Rank, missingOrTooShortText) {
  TempDir d("rankbad");
  head_bytes(kCorpora / "fortunes.txt", d / "one.txt", 1);
  for (const std::string& t : {d / "none.txt", d / "one.txt"}) {
    const CliRun r = run_statecut("rank --checkpoint " + kModel.string() + " --text " + t);
    EXPECT_EQ(r.code, 1) << t;
    const auto l = lines(r.err);
    ASSERT_EQ(l.size(), 1u) << r.err;
    EXPECT_NE(l[0].find(t), std::string::npos) << l[0];
  }
  const CliRun s = run_statecut("rank --checkpoint " + kModel.string() + " --text " + (kCorpora / "wordnet.txt").string() +
                         " --len 50 --svg /proc/statecut-svg");
  EXPECT_EQ(s.code, 1);
  EXPECT_EQ(lines(s.err).size(), 1u) << s.err;
}

// A Qwen3.5 of full-attention layers only (the fixture's layer 3 alone) has no state to analyse: one line naming its
// config, before the forward (it said "rank: no linear-attention layer ..." with no file).
TEST(BadInput_Rank, aModelWithoutLinearAttentionNamesItsConfig) {
  const fs::path src = kFixtures / "hf_qwen3_5";
  if (!fs::exists(src / "config.json")) GTEST_SKIP() << "fixture hf_qwen3_5 not found under " << kFixtures;
  TempDir d("rank_noattn");
  const fs::path ck = d.path / "ck";
  fs::create_directories(ck);
  json c = json::parse(std::ifstream(src / "config.json"));
  c["num_hidden_layers"] = 1;
  c["layer_types"] = json::array({"full_attention"});
  std::ofstream(ck / "config.json") << c.dump(2);
  const auto f = statecut::io::SafetensorsFile::open((src / "model.safetensors").string());
  statecut::io::SafetensorsWriter w;
  const std::string from = "model.layers.3.";
  for (const auto& n : f.names()) {
    const auto& t = f.tensor(n);
    if (n.rfind("model.layers.", 0) != 0) w.add(n, t.dtype, t.shape, t.data, t.nbytes);
    else if (n.rfind(from, 0) == 0) w.add("model.layers.0." + n.substr(from.size()), t.dtype, t.shape, t.data, t.nbytes);
  }
  w.write((ck / "model.safetensors").string());
  const CliRun r = run_statecut("rank --checkpoint " + ck.string() + " --text " + (kCorpora / "wordnet.txt").string() +
                                " --len 50");
  EXPECT_EQ(r.code, 1) << r.err;
  const auto l = lines(r.err);
  ASSERT_EQ(l.size(), 1u) << r.err;
  EXPECT_NE(l[0].find((ck / "config.json").string() + ": no linear-attention layer to analyse in this model (qwen3_5_text)"),
            std::string::npos) << l[0];
}

// An existing --svg folder is refused by its own option's name (it said "choose another --out"), before the analysis.
TEST(BadInput_Rank, existingSvgFolderIsNamedAsSvg) {
  TempDir d("ranksvg");
  fs::create_directories(d.path / "plots");
  const CliRun r = run_statecut("rank --checkpoint " + kModel.string() + " --text " + (kCorpora / "wordnet.txt").string() +
                                " --len 50 --svg " + (d / "plots"));
  EXPECT_EQ(r.code, 1);
  const auto l = lines(r.err);
  ASSERT_EQ(l.size(), 1u) << r.err;
  EXPECT_NE(l[0].find((d / "plots") + ": --svg already exists (remove it or choose another --svg)"),
            std::string::npos) << l[0];
  EXPECT_EQ(l[0].find("--out"), std::string::npos) << l[0];
  EXPECT_TRUE(r.out.empty()) << "refused before the analysis: " << r.out;
}

// Mamba-2 (transformers Mamba2ForCausalLM): key = B, query = C, value = dt·x, per head of its group; the default
// drops the decay exp(dt·A) (the paper's gate-free state), --gated keeps it. Golden values: tests/torch/golden_rank_mamba2.cpp.
TEST(Cli_Rank, mamba2IsAnalysedAsItsSsdState) {
  const fs::path ck = kFixtures / "hf_mamba2";
  if (!fs::exists(ck / "config.json")) GTEST_SKIP() << "fixture hf_mamba2 not found under " << kFixtures;
  for (const bool gated : {false, true}) {
    const CliRun r = run_statecut("rank --json --quiet --checkpoint " + ck.string() + " --text " +
                                  (kCorpora / "fortunes.txt").string() + " --len 100" + (gated ? " --gated" : ""));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(r.err.empty()) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["model_type"], "mamba2");
    EXPECT_EQ(j["state"], gated ? "ssd" : "ssd_ungated");
    EXPECT_EQ(j["gated"], gated);
    ASSERT_EQ(j["layers"].size(), 2u);
    for (const auto& L : j["layers"]) {
      EXPECT_EQ(L["dk"], 32) << "d_state";
      EXPECT_EQ(L["dv"], 32) << "head_dim";
      EXPECT_EQ(L["key_heads"], 1) << "n_groups";
      ASSERT_EQ(L["heads"].size(), 4u);
      for (const auto& h : L["heads"]) {
        EXPECT_EQ(h["key_head"], 0);
        EXPECT_GT(h["mean"].get<double>(), 0.0);
        EXPECT_LE(h["max"].get<double>(), 1.0);
        EXPECT_EQ(h["spectrum"].size(), 32u);
      }
    }
    EXPECT_EQ(j["curve"][0], 0.0);
  }
  const CliRun t = run_statecut("rank --quiet --checkpoint " + ck.string() + " --text " +
                                (kCorpora / "fortunes.txt").string() + " --len 100");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("over 100 tokens (Mamba-2 SSD state without its decay)"), std::string::npos) << t.out;
}

// The table: no min column (min over t is u(0) = 0 by definition), and the first-1024 figure only when the sequence is
// longer than 1024 tokens.
TEST(Cli_Rank, tableShowsWhatCarriesInformation) {
  const std::string args = "rank --quiet --checkpoint " + kModel.string() + " --text " + (kCorpora / "pydocs_valid.txt").string();
  const CliRun s = run_statecut(args + " --len 256");
  ASSERT_EQ(s.code, 0) << s.err;
  const auto l = lines(s.out);
  ASSERT_GE(l.size(), 3u);
  EXPECT_EQ(l[1].find("min"), std::string::npos) << l[1];
  EXPECT_NE(l[1].find("mean u"), std::string::npos) << l[1];
  EXPECT_EQ(s.out.find("first 1024"), std::string::npos) << s.out;
  EXPECT_EQ(l.back().rfind("mean u: ", 0), 0u) << l.back();
  const CliRun g = run_statecut(args + " --len 1100");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_NE(g.out.find("over 1100 tokens"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("(first 1024 positions: "), std::string::npos) << g.out;
}

// Progress on stderr (one line when stderr is not a terminal), none with --quiet; stdout is the same either way.
TEST(Cli_Rank, progressBarAndQuiet) {
  const std::string args = "rank --checkpoint " + kModel.string() + " --text " + (kCorpora / "fortunes.txt").string() + " --len 64";
  const CliRun p = run_statecut(args);
  ASSERT_EQ(p.code, 0) << p.err;
  const auto l = lines(p.err);
  ASSERT_EQ(l.size(), 1u) << p.err;
  EXPECT_EQ(l[0].rfind("rank: 16/16 done in ", 0), 0u) << l[0];
  const CliRun q = run_statecut(args + " --quiet");
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_TRUE(q.err.empty()) << q.err;
  EXPECT_EQ(p.out, q.out);
}

// --help defines u and says which state each family is analysed in, with and without --gated.
TEST(Cli_Rank, helpDefinesUAndTheGatedState) {
  const CliRun r = run_statecut("rank --help");
  ASSERT_EQ(r.code, 0);
  for (const char* needle : {"u(t) = er(S_{t-1}) / min(dk, dv)", "er(S) = ||S||_F^2 / ||S||_2^2", "u(0) = 0",
                             "--gated", "Mamba-2 (key B, value dt*x per head)", "a_t = exp(dt_t A)",
                             "ungated delta state", "--quiet", "Exit codes"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " not in:\n" << r.out;
}

// Options that would change nothing get one warning line each; the run itself is unchanged.
TEST(Cli_Rank, optionsThatDoNothingAreWarned) {
  const std::string args = "rank --quiet --checkpoint " + kModel.string() + " --text " + (kCorpora / "fortunes.txt").string() + " --len 64";
  const CliRun plain = run_statecut(args);
  ASSERT_EQ(plain.code, 0) << plain.err;
  const struct {
    std::string extra, needle;
  } cases[] = {
      {" --gated", "statecut rank: warning: --gated: delta_net has no decay gate"},
      {" --baseline " + kModel.string(), "statecut rank: warning: --baseline is drawn only in the --svg plots"},
      {" --curves", "statecut rank: warning: --curves adds u(t) to the --json object"},
  };
  for (const auto& c : cases) {
    const CliRun r = run_statecut(args + c.extra);
    ASSERT_EQ(r.code, 0) << c.extra << ": " << r.err;
    const auto l = lines(r.err);
    ASSERT_EQ(l.size(), 1u) << c.extra << ": " << r.err;
    EXPECT_EQ(l[0].rfind(c.needle, 0), 0u) << l[0];
    if (c.extra == " --gated") EXPECT_EQ(r.out, plain.out) << "the same state either way";
  }
}
