// `statecut logits --text FILE`: text tokenised by the checkpoint's tokenizer gives the same logits as its ids given
// with --tokens; an existing --out is refused (and left as it was); success prints one summary line on stderr.
#include "tests/cli/prune_cli_util.h"

using namespace pipeline_cli;

namespace {

/// The first n bytes of pydocs_valid as a text file and as a [1, n] input_ids file (byte-level ids).
struct TextAndIds {
  std::string text, ids;
};

TextAndIds text_and_ids(const TempDir& d, size_t n) {
  TextAndIds t{d / "t.txt", d / "ids.safetensors"};
  head_bytes(kCorpora / "pydocs_valid.txt", t.text, n);
  const std::string s = slurp(t.text);
  std::vector<int64_t> ids;
  for (unsigned char c : s) ids.push_back(c);
  write_tokens(t.ids, ids, 1, static_cast<int64_t>(ids.size()));
  return t;
}

}  // namespace

TEST(Cli_LogitsText, textGivesTheLogitsOfItsTokens) {
  TempDir d("ltext");
  const TextAndIds in = text_and_ids(d, 300);
  const CliRun a = run_statecut("logits --checkpoint " + kModel.string() + " --text " + in.text + " --out " + (d / "a.safetensors"));
  ASSERT_EQ(a.code, 0) << a.err;
  const CliRun b = run_statecut("logits --quiet --checkpoint " + kModel.string() + " --tokens " + in.ids + " --out " +
                                (d / "b.safetensors"));
  ASSERT_EQ(b.code, 0) << b.err;
  std::vector<int64_t> sa, sb;
  const auto la = read_tensor(d / "a.safetensors", "logits", &sa), lb = read_tensor(d / "b.safetensors", "logits", &sb);
  EXPECT_EQ(sa, (std::vector<int64_t>{1, 300, 256}));
  EXPECT_EQ(sa, sb);
  EXPECT_EQ(la, lb) << "same ids, same forward";
  // one summary line on stderr, none with --quiet
  const auto l = lines(a.err);
  ASSERT_EQ(l.size(), 1u) << a.err;
  EXPECT_EQ(l[0].rfind("statecut logits: wrote " + (d / "a.safetensors") + ": logits [1, 300, 256] f32 for 300 tokens of " +
                           in.text + " (f32 cpu, chunk) in ",
                       0),
            0u)
      << l[0];
  EXPECT_TRUE(b.err.empty()) << b.err;
  EXPECT_TRUE(a.out.empty()) << "stdout only with --json: " << a.out;
}

TEST(Cli_LogitsText, maxTokensKeepsTheFirstPositions) {
  TempDir d("ltext");
  const TextAndIds in = text_and_ids(d, 300);
  const CliRun a = run_statecut("logits --quiet --json --checkpoint " + kModel.string() + " --text " + in.text +
                                " --max-tokens 100 --out " + (d / "a.safetensors"));
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_NE(a.out.find("\"shape\": [1, 100, 256]"), std::string::npos) << a.out;
  const CliRun b = run_statecut("logits --quiet --checkpoint " + kModel.string() + " --text " + in.text + " --out " +
                                (d / "b.safetensors"));
  ASSERT_EQ(b.code, 0) << b.err;
  std::vector<int64_t> sb;
  const auto la = read_tensor(d / "a.safetensors", "logits"), lb = read_tensor(d / "b.safetensors", "logits", &sb);
  ASSERT_EQ(sb[1], 300);
  // causal: the first 100 positions do not see the rest (chunked forward, so equal up to fp32 summation order)
  const std::vector<double> head(lb.begin(), lb.begin() + static_cast<long>(la.size()));
  EXPECT_LT(rel_err(la, head), 1e-5);
}

TEST(BadInput_LogitsText, existingOutIsRefusedAndKept) {
  TempDir d("ltext");
  const TextAndIds in = text_and_ids(d, 50);
  std::ofstream(d / "out.safetensors") << "precious";
  for (const std::string& src : {" --text " + in.text, " --tokens " + in.ids}) {
    const CliRun r = run_statecut("logits --checkpoint " + kModel.string() + src + " --out " + (d / "out.safetensors"));
    EXPECT_EQ(r.code, 1) << src;
    const auto l = lines(r.err);
    ASSERT_EQ(l.size(), 1u) << r.err;
    EXPECT_EQ(l[0], "statecut logits: error: " + (d / "out.safetensors") +
                        ": --out already exists (remove it or choose another --out)");
    EXPECT_EQ(slurp(d.path / "out.safetensors"), "precious");
  }
}

TEST(BadInput_LogitsText, exactlyOneInputIsAUsageError) {
  TempDir d("ltext");
  const TextAndIds in = text_and_ids(d, 50);
  const std::string base = "logits --checkpoint " + kModel.string() + " --out " + (d / "o.safetensors");
  const CliRun none = run_statecut(base);
  EXPECT_EQ(none.code, 2) << none.err;
  ASSERT_EQ(lines(none.err).size(), 1u) << none.err;
  EXPECT_NE(none.err.find("give exactly one of --tokens IDS.safetensors and --text FILE"), std::string::npos) << none.err;
  const CliRun both = run_statecut(base + " --text " + in.text + " --tokens " + in.ids);
  EXPECT_EQ(both.code, 2) << both.err;
  ASSERT_EQ(lines(both.err).size(), 1u) << both.err;
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
  EXPECT_FALSE(fs::exists(d.path / "o.safetensors"));
  const CliRun missing = run_statecut(base + " --text " + (d / "nope.txt"));
  EXPECT_EQ(missing.code, 1) << missing.err;
  ASSERT_EQ(lines(missing.err).size(), 1u) << missing.err;
  EXPECT_NE(missing.err.find(d / "nope.txt"), std::string::npos) << missing.err;
}
