// Zero-shot multiple choice (optimized/analysis/evaluation_tasks.h):
//   - golden: on the shipped model, each choice's log-likelihood equals the sum of log-softmax (f64) of ONE unbatched,
//     unpadded forward over context + " " + choice, computed here with the test's own byte tokenisation;
//   - a hand-made record where acc and acc_norm disagree, on a model whose log-probabilities are known exactly;
//   - lm-eval's whitespace rule, truncation to max_length, one-choice (lambada-style) perplexity and greedy acc;
//   - bad records: one line naming the file and the line.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "optimized/analysis/evaluation_tasks.h"
#include "tests/torch/pipeline_util.h"

using namespace statecut;
using pipeline_test::TempDir;
namespace fs = std::filesystem;

namespace {

const fs::path kTasksRoot = fs::path(STATECUT_SOURCE_DIR);
const fs::path kTasks = kTasksRoot / "tests" / "data" / "tasks";

/// The same logits at every position: log p(v) is a fixed vector whatever the input, so a choice's log-likelihood
/// is a sum the test writes down. Records the inputs it saw.
class ConstantLM : public CausalLM {
 public:
  explicit ConstantLM(torch::Tensor logits) : logits_(std::move(logits)) {}
  ForwardResult forward(const torch::Tensor& ids, const ForwardOptions&) override {
    ForwardResult r;
    r.logits = logits_.view({1, 1, -1}).expand({ids.size(0), ids.size(1), logits_.size(0)}).contiguous();
    seen.push_back(ids.clone());
    return r;
  }
  const std::string& model_type() const override { return type_; }
  int64_t vocab_size() const override { return logits_.size(0); }
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() override { return {{"w", logits_}}; }
  std::vector<torch::Tensor> seen;

 private:
  torch::Tensor logits_;
  std::string type_ = "constant";
};

ChoiceTask task_of(std::vector<ChoiceRecord> recs, bool mc = true) {
  ChoiceTask t;
  t.name = "hand";
  t.file = "hand.jsonl";
  t.records = std::move(recs);
  for (size_t i = 0; i < t.records.size(); ++i) t.records[i].line = static_cast<int64_t>(i + 1);
  t.multiple_choice = mc;
  return t;
}

std::string read_error(const std::string& jsonl) {
  TempDir d("taskbad");
  const std::string path = d / "t.jsonl";
  std::ofstream(path, std::ios::binary) << jsonl;
  try {
    read_choice_task(path);
  } catch (const std::runtime_error& e) {
    return std::string(e.what()).substr(path.size());  // what follows the file name
  }
  return "(no error)";
}

}  // namespace

TEST(Golden_ChoiceTask, logLikelihoodIsTheSumOfLogSoftmaxOfOneFullForward) {
  auto model = load_causal_lm((kTasksRoot / "assets" / "byte_delta_net_4L").string(), torch::kFloat32, torch::kCPU);
  const ChoiceTask task = read_choice_task((kTasks / "pydocs_choice.jsonl").string());
  ASSERT_EQ(task.records.size(), 12u);
  ChoiceTaskOptions opt;
  opt.batch = 5;  // batches cut across records, rows of different lengths padded on the right
  const auto res = evaluate_choice_task(*model, task, Tokenizer::bytes(), opt);
  torch::NoGradGuard ng;
  double worst = 0;
  for (size_t r = 0; r < task.records.size(); ++r) {
    const auto& rec = task.records[r];
    for (size_t c = 0; c < rec.choices.size(); ++c) {
      const std::string ctx = rec.context, all = rec.context + " " + rec.choices[c];  // no trailing space in these contexts
      std::vector<int64_t> ids(all.begin(), all.end());
      const auto x = torch::tensor(std::vector<int64_t>(ids.begin(), ids.end() - 1), torch::kInt64).view({1, -1});
      const auto lp = torch::log_softmax(model->forward(x).logits[0].to(torch::kFloat64), -1);
      double want = 0;
      bool greedy = true;
      for (size_t p = ctx.size(); p < ids.size(); ++p) {
        want += lp[static_cast<int64_t>(p) - 1][ids[p]].item<double>();
        greedy = greedy && lp[static_cast<int64_t>(p) - 1].argmax().item<int64_t>() == ids[p];
      }
      const auto& got = res.records[r].choices[c];
      EXPECT_EQ(got.tokens, static_cast<int64_t>(all.size() - ctx.size()));
      EXPECT_EQ(got.bytes, static_cast<int64_t>(rec.choices[c].size()));
      EXPECT_EQ(got.is_greedy, greedy) << "record " << r << " choice " << c;
      // fp32 logits on both sides; batched/padded vs alone only changes the order of fp32 sums in the chunked
      // recurrence: ~1e-6 relative per logit, over <= 45 tokens.
      EXPECT_NEAR(got.loglikelihood, want, 1e-4 * std::max(1.0, std::abs(want))) << "record " << r << " choice " << c;
      worst = std::max(worst, std::abs(got.loglikelihood - want));
    }
  }
  std::printf("max |ll - ll_full_forward| = %.3g\n", worst);
  // The shipped model knows its Python docs better than chance (1/4): a broken scorer lands near 0.25.
  EXPECT_GE(res.acc_norm, 0.5);
}

TEST(Unit_ChoiceTask, accNormDividesByChoiceBytes) {
  // logits ' ' = −10, 'x' = −4, 'y' = −1, the rest −30; lp = logit − lse. Choices "y" (1 byte, tokens " y") and
  // "xx" (2 bytes, tokens " xx"): ll_y = −11 − 2 lse = −9.10 > ll_xx = −18 − 3 lse = −15.15, so acc picks "y"; per
  // byte −9.10 < −7.57, so acc_norm picks "xx"; per TOKEN −4.55 > −5.05 would pick "y" again (bytes, not tokens).
  auto logits = torch::full({256}, -30.0, torch::kFloat64);
  logits[' '] = -10.0;
  logits['x'] = -4.0;
  logits['y'] = -1.0;
  const double lse = torch::logsumexp(logits, 0).item<double>();
  ConstantLM m(logits.to(torch::kFloat32));
  ChoiceRecord r;
  r.context = "q";
  r.choices = {"y", "xx"};
  r.gold = 1;
  const auto res = evaluate_choice_task(m, task_of({r}), Tokenizer::bytes(), {});
  ASSERT_EQ(res.records.size(), 1u);
  const auto& rr = res.records[0];
  EXPECT_NEAR(rr.choices[0].loglikelihood, -11.0 - 2 * lse, 1e-5);
  EXPECT_NEAR(rr.choices[1].loglikelihood, -18.0 - 3 * lse, 1e-5);
  EXPECT_EQ(rr.choices[0].bytes, 1);
  EXPECT_EQ(rr.choices[1].bytes, 2);
  EXPECT_EQ(rr.choices[1].tokens, 3);
  EXPECT_EQ(rr.pred, 0);
  EXPECT_EQ(rr.pred_norm, 1);
  EXPECT_EQ(res.acc, 0.0);
  EXPECT_EQ(res.acc_norm, 1.0);
  EXPECT_TRUE(std::isnan(res.acc_stderr)) << "one record: no stderr (lm-eval prints N/A)";
  const auto j = lm_eval_results_json({res}, {{"model", "test"}}, true);
  EXPECT_EQ(j["results"]["hand"]["acc,none"], 0.0);
  EXPECT_EQ(j["results"]["hand"]["acc_norm,none"], 1.0);
  EXPECT_EQ(j["results"]["hand"]["acc_stderr,none"], "N/A");
  EXPECT_EQ(j["n-samples"]["hand"]["effective"], 1);
  EXPECT_EQ(j["samples"]["hand"][0]["resps"][1][0].get<double>(), rr.choices[1].loglikelihood);
}

TEST(Unit_ChoiceTask, trailingContextWhitespaceMovesToTheContinuationAndTiesPickTheFirst) {
  ConstantLM m(torch::zeros({256}));  // uniform: every token costs ln 256
  ChoiceRecord r;
  r.context = "ab \n";
  r.delimiter = "";
  r.choices = {"cd", "ef"};
  r.gold = 1;
  const auto res = evaluate_choice_task(m, task_of({r, r}), Tokenizer::bytes(), {});
  // The scored continuation is " \ncd": 4 tokens after the 2-token context "ab".
  EXPECT_EQ(res.records[0].choices[0].tokens, 4);
  EXPECT_NEAR(res.records[0].choices[0].loglikelihood, -4 * std::log(256.0), 1e-4);
  EXPECT_EQ(res.records[0].pred, 0) << "np.argmax: the first of equal maxima";
  EXPECT_EQ(res.acc, 0.0);
  EXPECT_EQ(res.acc_stderr, 0.0);
}

TEST(Unit_ChoiceTask, unicodeWhitespaceMovesAsPythonsRstripMovesIt) {
  // str.rstrip() takes U+3000 (ideographic space, 3 bytes), U+00A0 (2 bytes) and U+001F (a separator) too; the
  // non-space "é" before them stays. Byte-level ids: the continuation is the moved bytes + the choice's 2 bytes.
  ConstantLM m(torch::zeros({256}));
  ChoiceRecord r;
  r.context = "ab\xC3\xA9\xE3\x80\x80\xC2\xA0\x1F";
  r.delimiter = "";
  r.choices = {"cd"};
  r.gold = 0;
  const auto res = evaluate_choice_task(m, task_of({r}), Tokenizer::bytes(), {});
  EXPECT_EQ(res.records[0].choices[0].tokens, 3 + 2 + 1 + 2) << "U+3000, U+00A0, U+001F and the choice";
  ASSERT_FALSE(m.seen.empty());
  EXPECT_EQ(m.seen[0].size(1), 4 + 6 + 2 - 1) << "the context \"abé\" (4 bytes) then the continuation, less its last";
  r.context = "ab\xE2\x80\x8B";  // U+200B ZERO WIDTH SPACE is not whitespace to Python: it stays in the context
  const auto kept = evaluate_choice_task(m, task_of({r}), Tokenizer::bytes(), {});
  EXPECT_EQ(kept.records[0].choices[0].tokens, 2);
}

TEST(Unit_ChoiceTask, longInputsKeepTheirLastMaxLengthTokens) {
  ConstantLM m(torch::zeros({256}));
  ChoiceRecord r;
  r.context = std::string(100, 'a');
  r.choices = {"bc", "d"};
  r.gold = 0;
  ChoiceTaskOptions o;
  o.max_length = 10;
  const auto res = evaluate_choice_task(m, task_of({r}), Tokenizer::bytes(), o);
  EXPECT_EQ(res.truncated, 2);
  for (const auto& x : m.seen) EXPECT_EQ(x.size(1), 10);
}

TEST(Unit_ChoiceTask, oneChoiceTaskReportsPerplexityAndGreedyAccuracy) {
  auto logits = torch::full({256}, -20.0);
  logits[' '] = 0.0;
  logits['z'] = 5.0;  // 'z' is the argmax everywhere
  ConstantLM m(logits);
  ChoiceRecord a, b;
  a.context = b.context = "q";
  a.delimiter = b.delimiter = "";
  a.choices = {"zz"};
  b.choices = {"z "};
  const auto res = evaluate_choice_task(m, task_of({a, b}, false), Tokenizer::bytes(), {});
  const auto lp = torch::log_softmax(logits.to(torch::kFloat64), 0);
  const double lz = lp['z'].item<double>(), ls = lp[' '].item<double>();
  EXPECT_EQ(res.acc, 0.5);
  EXPECT_NEAR(res.perplexity, std::exp(-((2 * lz) + (lz + ls)) / 2), 1e-4 * res.perplexity);
  const auto j = lm_eval_results_json({res}, {}, false);
  EXPECT_TRUE(j["results"]["hand"].contains("perplexity,none"));
  EXPECT_EQ(j["configs"]["hand"]["output_type"], "loglikelihood");
}

// Token id 0 (the NUL byte of a byte-level model; "!" of GPT-2's vocabulary) is an id like any other: a choice
// holding it is scored, not refused as outside the vocabulary [0, V).
TEST(Unit_ChoiceTask, tokenIdZeroIsInTheVocabulary) {
  auto logits = torch::full({256}, -20.0);
  logits[0] = 1.0;
  logits['z'] = 5.0;
  ConstantLM m(logits);
  ChoiceRecord a;
  a.context = "q";
  a.delimiter = "";
  a.choices = {std::string("z\0", 2)};
  const auto res = evaluate_choice_task(m, task_of({a}, false), Tokenizer::bytes(), {});
  const auto lp = torch::log_softmax(logits.to(torch::kFloat64), 0);
  const double want = lp['z'].item<double>() + lp[0].item<double>();
  EXPECT_NEAR(res.perplexity, std::exp(-want), 1e-4 * res.perplexity);
}

TEST(Unit_ChoiceTask, winograndeFormScoresTheContinuationAfterEachContext) {
  pipeline_test::TempDir d("wino");
  const std::string path = d / "wino.jsonl";
  std::ofstream(path) << R"({"contexts": ["ab", "abcd"], "continuation": "xy", "gold": 1})" << "\n";
  const ChoiceTask t = read_choice_task(path);
  ASSERT_EQ(t.records.size(), 1u);
  EXPECT_EQ(t.records[0].choices, (std::vector<std::string>{"xy", "xy"}));
  ConstantLM m(torch::zeros({256}));
  const auto res = evaluate_choice_task(m, t, Tokenizer::bytes(), {});
  ASSERT_EQ(m.seen.size(), 1u);  // both rows in one batch, longest first, the shorter padded with 0
  const auto x = m.seen[0];
  auto row = [&](int64_t b, int64_t n) {
    std::string s;
    for (int64_t i = 0; i < n; ++i) s.push_back(static_cast<char>(x[b][i].item<int64_t>()));
    return s;
  };
  EXPECT_EQ(row(0, 6), "abcd x");
  EXPECT_EQ(row(1, 4), "ab x");
  EXPECT_EQ(res.records[0].choices[0].tokens, 3);
  EXPECT_EQ(res.records[0].choices[1].tokens, 3);
}

TEST(Unit_ChoiceTask, shippedTaskFilesRead) {
  const auto mc = read_choice_task((kTasks / "pydocs_choice.jsonl").string());
  EXPECT_TRUE(mc.multiple_choice);
  EXPECT_EQ(mc.name, "pydocs_choice");
  const auto one = read_choice_task((kTasks / "pydocs_last_word.jsonl").string());
  EXPECT_FALSE(one.multiple_choice);
  EXPECT_EQ(one.records.size(), 4u);
}

// Lines of spaces, tabs or a lone CR (a CRLF file's empty line) between records are blank: skipped, but counted, so a
// later record's error names its own line.
TEST(Unit_ChoiceTask, whitespaceLinesAreSkippedAndCounted) {
  const std::string ok = R"({"context": "a", "choices": ["b", "c"], "gold": 0})";
  TempDir d("taskblank");
  const std::string path = d / "t.jsonl";
  std::ofstream(path, std::ios::binary) << ok << "\n \n\t\n\r\n \t\r\n" << ok << "\r\n";
  EXPECT_EQ(read_choice_task(path).records.size(), 2u);
  const std::vector<std::string> blanks = {" ", "\t", "\r", " \t\r"};
  for (size_t i = 0; i < blanks.size(); ++i)
    EXPECT_EQ(read_error(ok + "\n" + blanks[i] + "\n{\"context\": \"a\"}\n").rfind(":3: missing \"choices\"", 0), 0u)
        << "blank line case " << i;
}

TEST(BadInput_ChoiceTask, badRecordsNameTheFileAndTheLine) {
  const std::string ok = R"({"context": "a", "choices": ["b", "c"], "gold": 0})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {ok + "\n\n{\"choices\": [\"b\"], \"gold\": 0}\n", ":3: missing \"context\""},
      {R"({"context": "a", "gold": 0})", ":1: missing \"choices\""},
      {R"({"context": "a", "choices": ["b", "c"]})", ":1: missing \"gold\""},
      {R"({"context": "a", "choices": [], "gold": 0})", ":1: \"choices\" is empty"},
      {R"({"context": "a", "choices": ["b", ""], "gold": 0})", ":1: choices[1] is empty"},
      {R"({"context": "a", "choices": ["b", 3], "gold": 0})", ":1: choices[1] is not a string"},
      {ok + "\n" + R"({"context": "a", "choices": ["b", "c"], "gold": 2})", ":2: \"gold\" 2 is out of range [0, 2)"},
      {R"({"context": "a", "choices": ["b", "c"], "gold": -1})", ":1: \"gold\" -1 is out of range [0, 2)"},
      {R"({"context": "a", "choices": ["b", "c"], "gold": "0"})", ":1: \"gold\" is not an integer"},
      {R"({"context": 1, "choices": ["b", "c"], "gold": 0})", ":1: \"context\" is not a string"},
      {"{\"context\": \"a\",", ":1: not a JSON object"},
      {"[1, 2]", ":1: not a JSON object"},
      {ok + "\n" + R"({"context": "a", "choices": ["b"], "gold": 0})", ":2: mixes one-choice records"},
      {"\n\n", ": no records"},
      {R"({"contexts": ["a"], "context": "a", "continuation": "b", "gold": 0})", ":1: give \"context\" + \"choices\" or"},
      {R"({"contexts": ["a", ""], "continuation": "b", "gold": 0})", ":1: contexts[1] is empty"},
      {R"({"contexts": ["a", "b"], "gold": 0})", ":1: missing \"continuation\""},
  };
  for (const auto& [text, want] : cases) {
    const std::string e = read_error(text);
    EXPECT_EQ(e.rfind(want, 0), 0u) << "got '" << e << "', want it to start with '" << want << "'";
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(BadInput_ChoiceTask, whitespaceOnlyContextIsRefusedBeforeAnyForward) {
  ConstantLM m(torch::zeros({256}));
  ChoiceRecord good, bad;
  good.context = "a";
  good.choices = {"b", "c"};
  bad.context = " \n";
  bad.choices = {"b", "c"};
  try {
    evaluate_choice_task(m, task_of({good, bad}), Tokenizer::bytes(), {});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("hand.jsonl:2: the context is empty", 0), 0u) << e.what();
  }
  EXPECT_TRUE(m.seen.empty()) << "nothing computed";
}
