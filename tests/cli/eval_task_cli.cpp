// `statecut eval --task` and `--niah` end to end on the shipped model:
//   - --task --json is lm-eval's results JSON, and its numbers agree with its own per-record samples (acc from the
//     argmax of the log-likelihoods, acc_norm from the argmax per byte); one-choice files give perplexity;
//   - --niah: cells of every length x depth, the same seed asks the same questions, the heat map is an SVG;
//   - bad input (a missing field, gold out of range, empty choices, bad JSON, bad NIAH options) is one line naming
//     the file and the line, exit 1, nothing on stdout and no SVG; mixing modes is a usage error (exit 2).
#include "tests/cli/prune_cli_util.h"

using namespace pipeline_cli;
using nlohmann::json;

namespace {

const fs::path kTasks = kRoot / "tests" / "data" / "tasks";

/// One line "statecut eval: <kind>: <prefix>...", nothing on stdout, exit 1 for an error and 2 for a usage error.
void expect_one_line(const CliRun& r, const std::string& kind, const std::string& prefix) {
  EXPECT_EQ(r.code, kind == "usage" ? 2 : 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  const auto l = lines(r.err);
  ASSERT_EQ(l.size(), 1u) << r.err;
  EXPECT_EQ(l[0].rfind("statecut eval: " + kind + ": " + prefix, 0), 0u) << l[0];
}

void expect_one_line_error(const CliRun& r, const std::string& prefix) { expect_one_line(r, "error", prefix); }

}  // namespace

TEST(Cli_EvalTask, jsonIsLmEvalsResultsShapeAndAgreesWithItsSamples) {
  const CliRun r = run_statecut("eval --json --quiet --log-samples --checkpoint " + kModel.string() + " --task " +
                                (kTasks / "pydocs_choice.jsonl").string() + " " + (kTasks / "pydocs_last_word.jsonl").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  for (const char* k : {"results", "configs", "versions", "n-shot", "higher_is_better", "n-samples", "config", "samples"})
    EXPECT_TRUE(j.contains(k)) << k;
  const json& mc = j["results"]["pydocs_choice"];
  for (const char* k : {"alias", "acc,none", "acc_stderr,none", "acc_norm,none", "acc_norm_stderr,none"})
    EXPECT_TRUE(mc.contains(k)) << k;
  EXPECT_EQ(j["n-samples"]["pydocs_choice"]["effective"], 12);
  EXPECT_EQ(j["n-shot"]["pydocs_choice"], 0);
  EXPECT_EQ(j["configs"]["pydocs_choice"]["output_type"], "multiple_choice");
  // Recompute acc and acc_norm from the samples' log-likelihoods and the task file's choices.
  std::ifstream in(kTasks / "pydocs_choice.jsonl");
  std::vector<json> recs;
  for (std::string l; std::getline(in, l);) recs.push_back(json::parse(l));
  const json& samples = j["samples"]["pydocs_choice"];
  ASSERT_EQ(samples.size(), recs.size());
  double acc = 0, acc_norm = 0;
  for (size_t i = 0; i < recs.size(); ++i) {
    const auto& ch = recs[i]["choices"];
    size_t best = 0, best_norm = 0;
    for (size_t c = 0; c < ch.size(); ++c) {
      const double ll = samples[i]["resps"][c][0].get<double>();
      EXPECT_LT(ll, 0.0);
      const auto bytes = [&](size_t k) { return static_cast<double>(ch[k].get<std::string>().size()); };
      if (ll > samples[i]["resps"][best][0].get<double>()) best = c;
      if (ll / bytes(c) > samples[i]["resps"][best_norm][0].get<double>() / bytes(best_norm)) best_norm = c;
    }
    acc += best == recs[i]["gold"].get<size_t>();
    acc_norm += best_norm == recs[i]["gold"].get<size_t>();
    EXPECT_EQ(samples[i]["target"], recs[i]["gold"]);
    EXPECT_EQ(samples[i]["line"], i + 1);
  }
  EXPECT_DOUBLE_EQ(mc["acc,none"].get<double>(), acc / 12);
  EXPECT_DOUBLE_EQ(mc["acc_norm,none"].get<double>(), acc_norm / 12);
  const double p = acc / 12;
  EXPECT_NEAR(mc["acc_stderr,none"].get<double>(), std::sqrt(p * (1 - p) * 12 / 11 / 12), 1e-12);
  const json& lw = j["results"]["pydocs_last_word"];
  EXPECT_GT(lw["perplexity,none"].get<double>(), 1.0);
  EXPECT_EQ(j["configs"]["pydocs_last_word"]["output_type"], "loglikelihood");
}

TEST(Cli_EvalTask, humanOutputIsLmEvalsTable) {
  const CliRun r = run_statecut("eval --quiet --checkpoint " + kModel.string() + " --task " + (kTasks / "pydocs_choice.jsonl").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("|pydocs_choice"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("acc_norm"), std::string::npos) << r.out;
}

TEST(BadInput_EvalTask, badRecordIsOneLineNamingFileAndLine) {
  TempDir d("evaltaskbad");
  const std::string ok = R"({"context": "a", "choices": ["b", "c"], "gold": 0})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {ok + "\n" + R"({"choices": ["b", "c"], "gold": 0})", ":2: missing \"context\""},
      {R"({"context": "a", "choices": ["b", "c"]})", ":1: missing \"gold\""},
      {ok + "\n" + ok + "\n" + R"({"context": "a", "choices": ["b", "c"], "gold": 5})", ":3: \"gold\" 5 is out of range [0, 2)"},
      {R"({"context": "a", "choices": [], "gold": 0})", ":1: \"choices\" is empty"},
      {"not json", ":1: not a JSON object"},
  };
  int k = 0;
  for (const auto& [text, want] : cases) {
    const std::string f = d / ("t" + std::to_string(k++) + ".jsonl");
    std::ofstream(f, std::ios::binary) << text << "\n";
    expect_one_line_error(run_statecut("eval --checkpoint " + kModel.string() + " --task " + f), f + want);
  }
  expect_one_line_error(run_statecut("eval --checkpoint " + kModel.string() + " --task " + (d / "none.jsonl")),
                        d / "none.jsonl");
}

TEST(BadInput_EvalTask, mixingModesOrTheirOptionsIsAUsageError) {
  const std::string t = (kTasks / "pydocs_choice.jsonl").string(), x = (kCorpora / "fortunes.txt").string();
  for (const std::string& args : std::vector<std::string>{"", " --task " + t + " --text " + x, " --niah --task " + t, " --niah",
                                 " --text " + x + " --svg /tmp/never.svg", " --text " + x + " --lengths 512",
                                 " --task " + t + " --stride 64", " --niah --text " + x + " --max-tokens 9",
                                 " --text " + x + " --log-samples"}) {
    const CliRun r = run_statecut("eval --checkpoint " + kModel.string() + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
  }
}

TEST(Cli_EvalNiah, cellsCoverLengthsByDepthsAndTheSameSeedAsksTheSameQuestions) {
  TempDir d("niah");
  const std::string base = "eval --niah --json --quiet --checkpoint " + kModel.string() + " --text " +
                           (kCorpora / "pydocs_valid.txt").string() + " --lengths 110,150 --depths 0,0.5,1 --trials 2 ";
  const CliRun a = run_statecut(base + "--svg " + (d / "a.svg")), b = run_statecut(base), c = run_statecut(base + "--seed 7");
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  ASSERT_EQ(c.code, 0) << c.err;
  const json ja = json::parse(a.out), jb = json::parse(b.out), jc = json::parse(c.out);
  ASSERT_EQ(ja["cells"].size(), 6u);
  EXPECT_EQ(ja["cells"][5]["length"], 150);
  EXPECT_EQ(ja["cells"][5]["depth"], 1.0);
  bool differs = false;
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(ja["cells"][i]["ranks"], jb["cells"][i]["ranks"]);
    EXPECT_EQ(ja["cells"][i]["ranks"].size(), 2u);
    for (const auto& r : ja["cells"][i]["ranks"]) EXPECT_TRUE(r.get<int>() >= 0 && r.get<int>() < 10);
    differs = differs || ja["cells"][i]["ranks"] != jc["cells"][i]["ranks"];
  }
  EXPECT_TRUE(differs) << "another seed, other keys";
  EXPECT_DOUBLE_EQ(ja["chance"].get<double>(), 0.1);
  const std::string svg = slurp(d / "a.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("length 150, depth 1"), std::string::npos);
  EXPECT_TRUE(entries_containing(d.path, ".tmp").empty());
}

TEST(BadInput_EvalNiah, badOptionsAreOneLineAndWriteNoSvg) {
  TempDir d("niahbad");
  const std::string base = "eval --niah --checkpoint " + kModel.string() + " --svg " + (d / "x.svg") + " --text ";
  const std::string filler = (kCorpora / "fortunes.txt").string();
  expect_one_line(run_statecut(base + filler + " --depths 0,1.5"), "usage", "--depths: 1.5 is outside [0, 1]");
  expect_one_line(run_statecut(base + filler + " --lengths 20"), "usage", "--lengths: 20 tokens cannot hold");
  // The bound is exact: a needle of one byte and a question of one leave a length of 2 no filler, of 3 one token.
  const std::string tiny = " --needle {key} --question Q --digits 1 --candidates 2 --trials 1 --depths 0 --lengths ";
  expect_one_line(run_statecut(base + filler + tiny + "2"), "usage",
                  "--lengths: 2 tokens cannot hold the needle and the question (2 tokens)");
  expect_one_line(run_statecut(base + filler + " --candidates 1"), "usage", "--candidates must be >= 2");
  expect_one_line_error(run_statecut(base + (d / "none.txt")), d / "none.txt");
  EXPECT_FALSE(fs::exists(d / "x.svg"));
  const auto one_filler = run_statecut(base + filler + tiny + "3 --json");
  EXPECT_EQ(one_filler.code, 0) << one_filler.err;
}
