// Options a run will not use are named in one warning line each, not accepted silently (README; prune's others are in
// prune_options_cli.cpp, rank's in rank_cli.cpp): generate's sampling options at --temperature 0, finetune's
// distillation options with --no-kd and LoRA options with --full, --eval-every without --eval-text, select's
// --adversarial (pca) and --faithful (drrqr) with another method, prune's --select with rand. The output is the run's
// without the option. Also here: option values other commands refuse (a negative --calib-batch, logits --out x.bin).
#include "tests/cli/prune_cli_util.h"

using namespace pipeline_cli;

namespace {

std::vector<std::string> warnings_of(const CliRun& r, const std::string& cmd) {
  std::vector<std::string> w;
  for (const auto& l : lines(r.err))
    if (l.rfind("statecut " + cmd + ": warning: ", 0) == 0) w.push_back(l);
  return w;
}

}  // namespace

TEST(Cli_IgnoredOptions, generateAtTemperatureZeroNamesItsSamplingOptions) {
  const std::string base = "generate --quiet --json --checkpoint " + kModel.string() + " --prompt 'The function' --max-new-tokens 4";
  const CliRun plain = run_statecut(base);
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_TRUE(plain.err.empty()) << plain.err;
  const CliRun r = run_statecut(base + " --top-k 5 --seed 3");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(warnings_of(r, "generate"),
            std::vector<std::string>{"statecut generate: warning: --top-k, --seed are ignored at --temperature 0 "
                                     "(greedy: nothing is drawn)"})
      << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], nlohmann::json::parse(plain.out)["ids"]);
  const CliRun sampled = run_statecut(base + " --temperature 0.8 --top-k 5 --seed 3");
  ASSERT_EQ(sampled.code, 0) << sampled.err;
  EXPECT_TRUE(warnings_of(sampled, "generate").empty()) << sampled.err;
}

TEST(Cli_IgnoredOptions, finetuneNamesDistillationAndLoraOptionsItWillNotUse) {
  if (!fs::exists(kFixtures / "fla_delta_net_pruned50")) GTEST_SKIP() << "no fixtures";
  TempDir d("ft-ignored");
  const std::string text = d / "train.txt";
  head_bytes(kCorpora / "pydocs_train.txt", text, 20000);
  const std::string base = "finetune --quiet --checkpoint " + (kFixtures / "fla_delta_net_pruned50").string() +
                           " --text " + text + " --steps 1 --seq-len 32 --batch 2";
  const CliRun r = run_statecut(base + " --no-kd --kd-weight 2 --full --lora-rank 8 --eval-every 1 --out " + (d / "a"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(warnings_of(r, "finetune"),
            (std::vector<std::string>{
                "statecut finetune: warning: --kd-weight is ignored with --no-kd (cross-entropy only)",
                "statecut finetune: warning: --lora-rank is ignored with --full (every parameter trained, no LoRA)",
                "statecut finetune: warning: --eval-every is ignored without --eval-text"}))
      << r.err;
}

TEST(Cli_IgnoredOptions, selectNamesAnotherMethodsOptions) {
  TempDir d("select-ignored");
  const std::string m = d / "m.safetensors";
  std::vector<float> x(64 * 8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37 % 101) - 50) / 7.0f;
  statecut::io::SafetensorsWriter w;
  w.add("M", statecut::io::DType::F32, {64, 8}, x.data(), x.size() * sizeof(float));
  w.write(m);
  const CliRun plain = run_statecut("select --matrix " + m + " --method drrqr --keep 3");
  ASSERT_EQ(plain.code, 0) << plain.err;
  const CliRun r = run_statecut("select --matrix " + m + " --method drrqr --keep 3 --adversarial");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(warnings_of(r, "select"),
            std::vector<std::string>{"statecut select: warning: --adversarial is ignored by --method drrqr (a pca option)"})
      << r.err;
  EXPECT_EQ(r.out, plain.out);
  const CliRun p = run_statecut("select --matrix " + m + " --method pca --keep 3 --faithful");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(warnings_of(p, "select"),
            std::vector<std::string>{"statecut select: warning: --faithful is ignored by --method pca (a drrqr option)"})
      << p.err;
}

// prune: --select with --method rand (nothing is scored) is named; a negative --calib-batch is a usage error.
TEST(Cli_IgnoredOptions, pruneRandNamesItsScoreSideAndRefusesANegativeBatch) {
  TempDir d("prune-ignored");
  const CliRun r = run_statecut("prune --quiet --checkpoint " + kModel.string() + " --method rand --ratio 0.5 --select q --out " +
                                (d / "a"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(warnings_of(r, "prune"),
            std::vector<std::string>{"statecut prune: warning: --select is ignored by --method rand (nothing is scored)"})
      << r.err;
  const CliRun b = run_statecut("prune --quiet --checkpoint " + kModel.string() + " --method drrqr --ratio 0.5 --calib " +
                                (kCorpora / "fortunes.txt").string() + " --calib-batch -1 --out " + (d / "b"));
  EXPECT_EQ(b.code, 2) << b.err;
  EXPECT_FALSE(fs::exists(d.path / "b"));
}

// logits --out is a .safetensors file, as tokenize's: under another name (x.bin) every other command would read it
// as raw token ids.
TEST(Cli_IgnoredOptions, logitsOutMustBeASafetensorsFile) {
  TempDir d("logits-out-name");
  const CliRun r = run_statecut("logits --checkpoint " + kModel.string() + " --text " +
                                (kCorpora / "fortunes.txt").string() + " --max-tokens 8 --out " + (d / "x.bin"));
  EXPECT_EQ(r.code, 2) << r.err;  // the option's own value: a usage error
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("usage: --out " + d / "x.bin" + ": must be a .safetensors file"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d.path / "x.bin"));
}
