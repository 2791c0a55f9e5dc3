// `statecut rank` end to end on the shipped model: a report for every layer and head, u in [0, 1] with u(0) = 0,
// the pruned dk after pruning, three SVG plots, and one-line errors for bad input.
#include "tests/cli/prune_cli_util.h"

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
    for (const auto& h : L["heads"]) {
      EXPECT_GE(h["min"].get<double>(), 0.0);
      EXPECT_LE(h["max"].get<double>(), 1.0);
      EXPECT_LE(h["min"].get<double>(), h["mean"].get<double>());
      EXPECT_LE(h["mean"].get<double>(), h["max"].get<double>());
      EXPECT_EQ(h["spectrum"].size(), 64u);
      m += h["mean"].get<double>() / 4;
    }
    EXPECT_NEAR(L["mean"].get<double>(), m, 1e-12);
    mean_of_layers += m / 4;
  }
  EXPECT_NEAR(j["mean_u"].get<double>(), mean_of_layers, 1e-12);
  EXPECT_EQ(j["curve"][0], 0.0) << "u(0) is the zero state";
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
