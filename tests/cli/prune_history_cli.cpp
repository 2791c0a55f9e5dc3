// Pruning a pruned checkpoint (prune_record.h): the earlier step is kept in "history", the keep sets are composed back
// to the first source in "original" (and verify checks the weights against that source), --keep-from records the
// method of the file's own record and its absolute path, and statecut.json keeps each keep set on one line.
#include <algorithm>
#include <functional>
#include <regex>
#include <sstream>

#include "tests/cli/prune_cli_util.h"

using namespace pipeline_cli;
using nlohmann::json;

namespace {

json record_of(const std::string& dir) { return json::parse(slurp(fs::path(dir) / "statecut.json")); }

std::vector<std::vector<int64_t>> keep_of(const json& rec, int layer) {
  for (const auto& l : rec["selection"]["layers"])
    if (l["layer"] == layer) return l["keep"].get<std::vector<std::vector<int64_t>>>();
  ADD_FAILURE() << "no layer " << layer;
  return {};
}

TEST(Cli_PruneHistory, secondStepKeepsTheFirstAndComposesTheKeepSets) {
  TempDir d("prune-history");
  const std::string a = d / "a", b = d / "b";
  CliRun r = run_statecut("prune --quiet --checkpoint " + kModel.string() + " --method l1 --ratio 0.25 --out " + a);
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_statecut("prune --quiet --checkpoint " + a + " --method rand --ratio 0.5 --seed 3 --out " + b);
  ASSERT_EQ(r.code, 0) << r.err;
  const json ra = record_of(a), rb = record_of(b);
  EXPECT_FALSE(ra.contains("history")) << "a first step has no history";
  ASSERT_TRUE(rb.contains("history"));
  ASSERT_EQ(rb["history"].size(), 1u);
  EXPECT_EQ(rb["history"][0]["method"], "l1");
  EXPECT_EQ(rb["history"][0]["selection"], ra["selection"]);
  EXPECT_EQ(rb["head_k_dim"], 48);
  EXPECT_EQ(rb["new_head_k_dim"], 24);
  EXPECT_EQ(rb["source"]["checkpoint"], fs::absolute(a).lexically_normal().string());
  const json& o = rb["original"];
  EXPECT_EQ(o["head_k_dim"], 64);
  EXPECT_EQ(o["steps"], 2);
  EXPECT_EQ(o["checkpoint"], ra["source"]["checkpoint"]);
  ASSERT_EQ(o["layers"].size(), 4u);
  for (const auto& l : o["layers"]) {
    const int layer = l["layer"];
    const auto first = keep_of(ra, layer), second = keep_of(rb, layer);
    const auto composed = l["keep"].get<std::vector<std::vector<int64_t>>>();
    ASSERT_EQ(composed.size(), first.size());
    for (size_t h = 0; h < composed.size(); ++h) {
      ASSERT_EQ(composed[h].size(), 24u);
      for (size_t i = 0; i < 24; ++i)
        EXPECT_EQ(composed[h][i], first[h][static_cast<size_t>(second[h][i])]) << "layer " << layer << " head " << h;
    }
  }
  // One keep set a line (a one-step record of this model was 584 lines, one index a line): no line is a bare index.
  const std::string text = slurp(fs::path(b) / "statecut.json");
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    EXPECT_FALSE(std::regex_match(line, std::regex(R"(\s*\d+,?\s*)"))) << "an index on its own line: " << line;

  // verify against the FIRST source uses the composed sets; against the step's own source its selection.
  r = run_statecut("verify --quiet --json --only load,pruned --checkpoint " + b + " --source " + kModel.string());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  bool weights = false;
  const json report = json::parse(r.out);
  for (const auto& c : report["checks"]) {
    if (c["name"] == "pruned.weights") {
      weights = true;
      EXPECT_EQ(c["status"], "pass") << c.dump();
      EXPECT_NE(c["message"].get<std::string>().find("composed over 2"), std::string::npos) << c.dump();
    }
    if (c["name"] == "pruned.certificate") EXPECT_EQ(c["status"], "skip") << c.dump();
  }
  EXPECT_TRUE(weights);
  r = run_statecut("verify --quiet --only load,pruned --checkpoint " + b + " --source " + a);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

TEST(Cli_PruneHistory, keepFromRecordsTheFilesMethodAndAbsolutePath) {
  TempDir d("prune-keepfrom");
  const std::string a = d / "a", c = d / "c";
  ASSERT_EQ(run_statecut("prune --quiet --checkpoint " + kModel.string() + " --method l1 --ratio 0.5 --out " + a).code, 0);
  const CliRun r = run_statecut("prune --quiet --checkpoint " + kModel.string() + " --keep-from " + a +
                                "/statecut.json --out " + c);
  ASSERT_EQ(r.code, 0) << r.err;
  const json rc = record_of(c);
  EXPECT_EQ(rc["method"], "l1");
  EXPECT_EQ(rc["keep_from"], fs::absolute(a + "/statecut.json").lexically_normal().string());
  EXPECT_EQ(rc["selection"], record_of(a)["selection"]);
  EXPECT_EQ(slurp(fs::path(c) / "model.safetensors"), slurp(fs::path(a) / "model.safetensors"));
}

TEST(BadInput_PruneHistory, earlierRecordThatDoesNotComposeIsOneLineNamingIt) {
  TempDir d("prune-history-bad");
  const std::string a = d / "a";
  ASSERT_EQ(run_statecut("prune --quiet --checkpoint " + kModel.string() + " --method l1 --ratio 0.25 --out " + a).code, 0);
  // The earlier record claims 8 kept channels per head where the weights hold 48: this step keeps channel >= 8.
  json ra = record_of(a);
  for (auto& l : ra["selection"]["layers"])
    for (auto& h : l["keep"]) h = json::array({0, 1, 2, 3, 4, 5, 6, 7});
  std::ofstream(fs::path(a) / "statecut.json") << ra.dump();
  const CliRun r = run_statecut("prune --quiet --checkpoint " + a + " --method l1 --ratio 0.5 --out " + (d / "b"));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(a + "/statecut.json"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "b"));
}

}  // namespace

// After a pca step (a rotation: "original" is null) a later step's keep sets index the rotated model, not the first
// source; the chain (one rotation, then a subset) is one rotation of the first source, and verify checks it so (it
// was skipped before, and failed before that, "matches no source channel", blaming correct weights). Against the
// step's own source the subset is compared bit for bit.
TEST(Cli_PruneHistory, afterARotationVerifyChecksTheChainAsOneRotationOfTheFirstSource) {
  TempDir d("prune-history-pca");
  const std::string a = d / "a", b = d / "b", calib = d / "calib.txt";
  head_bytes(kCorpora / "pydocs_train.txt", calib, 4096);
  CliRun r = run_statecut("prune --quiet --checkpoint " + kModel.string() + " --method pca --ratio 0.25 --calib " +
                          calib + " --calib-seqs 2 --calib-len 128 --tokenizer bytes --out " + a);
  ASSERT_EQ(r.code, 0) << r.err;
  r = run_statecut("prune --quiet --checkpoint " + a + " --method l1 --ratio 0.5 --out " + b);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(record_of(b)["original"].is_null());
  const auto weights_row = [&](const std::string& source) {
    const CliRun v = run_statecut("verify --quiet --json --windows 1 --len 70 --only pruned --checkpoint " + b +
                                  " --source " + source);
    EXPECT_EQ(v.code, 0) << v.out << v.err;
    const json report = json::parse(v.out);
    for (const auto& c : report["checks"])
      if (c["name"] == "pruned.weights") return c;
    ADD_FAILURE() << "no pruned.weights row: " << v.out;
    return json();
  };
  const json first = weights_row(kModel.string());
  EXPECT_EQ(first["status"], "pass") << first;
  EXPECT_NE(first["message"].get<std::string>().find("2 pruning steps, one a rotation"), std::string::npos) << first;
  EXPECT_EQ(weights_row(a)["status"], "pass");
}

namespace {

/// verify's pruned.record row of `dir` (no --source: the record alone).
json record_row_of(const std::string& dir, int* code) {
  const CliRun v = run_statecut("verify --quiet --json --only pruned --checkpoint " + dir);
  *code = v.code;
  const json report = json::parse(v.out);
  for (const auto& c : report["checks"])
    if (c["name"] == "pruned.record") return c;
  ADD_FAILURE() << "no pruned.record row: " << v.out;
  return json();
}

}  // namespace

// "original" is what verify --source FIRST compares the weights against, so it is recomputed from "history" and the
// step's selection: an edited original (two channels swapped), an edited history, a foreign model type or a method
// statecut prune never writes fail the record with no source at hand; the chain as written passes, over three steps.
TEST(Cli_PruneHistory, theRecordsOriginalIsWhatItsHistoryComposesTo) {
  TempDir d("prune-history-record");
  const std::string a = d / "a", b = d / "b", c = d / "c";
  ASSERT_EQ(run_statecut("prune --quiet --checkpoint " + kModel.string() + " --method l1 --ratio 0.25 --out " + a).code, 0);
  ASSERT_EQ(run_statecut("prune --quiet --checkpoint " + a + " --method rand --ratio 0.5 --seed 3 --out " + b).code, 0);
  ASSERT_EQ(run_statecut("prune --quiet --checkpoint " + b + " --method l1 --ratio 0.5 --out " + c).code, 0);
  int code = -1;
  for (const std::string& dir : {a, b, c}) {
    EXPECT_EQ(record_row_of(dir, &code)["status"], "pass") << dir;
    EXPECT_EQ(code, 0) << dir;
  }
  EXPECT_EQ(record_of(c)["original"]["steps"], 3);
  const json rc = record_of(c);
  const auto expect_fails = [&](const std::function<void(json&)>& edit, const std::string& needle) {
    json r = rc;
    edit(r);
    std::ofstream(fs::path(c) / "statecut.json") << r.dump();
    const json row = record_row_of(c, &code);
    EXPECT_EQ(row["status"], "fail") << row;
    EXPECT_EQ(code, 1);
    EXPECT_NE(row["message"].get<std::string>().find(needle), std::string::npos) << row["message"];
  };
  expect_fails([](json& r) { std::swap(r["original"]["layers"][1]["keep"][0][0], r["original"]["layers"][1]["keep"][0][1]); },
               "\"original\" layer 1 head 0 keeps");
  expect_fails([](json& r) {  // reversed: every position of the first step's list moves (48 entries, no middle)
    json& k = r["history"][0]["selection"]["layers"][0]["keep"][1];
    std::reverse(k.begin(), k.end());
  },
               "the steps in \"history\" compose to");
  expect_fails([](json& r) { r["original"]["steps"] = 2; }, "\"original\" counts 2 steps");
  expect_fails([](json& r) { r["history"].erase(0); }, "\"original\" counts 3 steps, \"history\" and this step make 2");
  expect_fails([](json& r) { r["history"] = json::array(); }, "no earlier pruning step in \"history\"");
  expect_fails([](json& r) { r.erase("original"); }, "no \"original\" though \"history\"");
  expect_fails([](json& r) { r["method"] = "magic"; }, "method 'magic' is none of statecut prune's");
  expect_fails([](json& r) { r["source"]["model_type"] = "mamba2"; }, "the record pruned a \"mamba2\" model");
  // A --keep-from prune records the keep file's own method, whatever it is called.
  json r = rc;
  r["method"] = "magic";
  r["keep_from"] = "/elsewhere/keep.json";
  std::ofstream(fs::path(c) / "statecut.json") << r.dump();
  EXPECT_EQ(record_row_of(c, &code)["status"], "pass");
}
