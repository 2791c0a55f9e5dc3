// `statecut prune` names the options it ignores, one warning line each, instead of accepting them silently: calibration
// options with a data-free method (rand, l1) or --keep-from, --faithful / --f with a method other than drrqr, and
// calibration windows that cannot all be distinct because the text is shorter than seqs × len. Warnings, not
// refusals: the output is exactly what the method promises (byte-identical to the run without the option), and a sweep
// over methods passes one command line to all of them.
#include "tests/cli/prune_cli_util.h"

using namespace pipeline_cli;
using nlohmann::json;

namespace {

/// Lines of stderr that are warnings.
std::vector<std::string> warnings(const CliRun& r) {
  std::vector<std::string> w;
  for (const auto& l : lines(r.err))
    if (l.rfind("statecut prune: warning: ", 0) == 0) w.push_back(l);
  return w;
}

std::string prune(const std::string& args, const std::string& out) {
  return "prune --quiet --checkpoint " + kModel.string() + " " + args + " --out " + out;
}

}  // namespace

TEST(Cli_PruneOptions, calibrationOptionsOfADataFreeMethodAreWarned) {
  TempDir d("popt");
  const std::string calib = (kCorpora / "fortunes.txt").string();
  const CliRun plain = run_statecut(prune("--method l1 --keep 16", d / "plain"));
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_TRUE(plain.err.empty()) << plain.err;
  const CliRun r = run_statecut(prune("--method l1 --keep 16 --calib " + calib + " --calib-seqs 4", d / "calib"));
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_EQ(warnings(r).at(0),
            "statecut prune: warning: --calib, --calib-seqs are ignored by --method l1 (it reads only the weights)");
  EXPECT_EQ(slurp(d.path / "plain" / "model.safetensors"), slurp(d.path / "calib" / "model.safetensors"))
      << "the option changed nothing";
  const CliRun rr = run_statecut(prune("--method rand --ratio 0.5 --calib " + calib, d / "rand"));
  ASSERT_EQ(rr.code, 0) << rr.err;
  ASSERT_EQ(warnings(rr).size(), 1u) << rr.err;
  EXPECT_NE(warnings(rr)[0].find("--calib is ignored by --method rand"), std::string::npos) << rr.err;
}

TEST(Cli_PruneOptions, drrqrOnlyOptionsOfAnotherMethodAreWarned) {
  TempDir d("popt");
  const CliRun r = run_statecut(prune("--method l1 --keep 16 --faithful --f 2", d / "a"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto w = warnings(r);
  ASSERT_EQ(w.size(), 2u) << r.err;
  EXPECT_EQ(w[0], "statecut prune: warning: --faithful changes only --method drrqr (the published code's row "
                  "subsample); --method l1 is the same without it");
  EXPECT_EQ(w[1], "statecut prune: warning: --f is the strong-RRQR parameter of --method drrqr; ignored by --method l1");
  // drrqr takes both without a word
  const CliRun q = run_statecut(prune("--method drrqr --keep 16 --faithful --f 2 --calib " +
                                      (kCorpora / "pydocs_train.txt").string() + " --calib-seqs 2 --calib-len 128",
                                      d / "b"));
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_TRUE(q.err.empty()) << q.err;
}

TEST(Cli_PruneOptions, overlappingCalibrationWindowsAreWarned) {
  TempDir d("popt");
  head_bytes(kCorpora / "pydocs_train.txt", d / "short.txt", 3000);  // 3000 byte tokens
  const CliRun r = run_statecut(prune("--method drrqr --keep 16 --calib " + (d / "short.txt") +
                                      " --calib-seqs 20 --calib-len 256", d / "a"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto w = warnings(r);
  ASSERT_EQ(w.size(), 1u) << r.err;
  EXPECT_EQ(w[0], "statecut prune: warning: --calib-seqs 20 x --calib-len 256 = 5120 tokens from a calibration text of "
                  "3000 tokens: the windows overlap (each token used 1.7 times on average); give more text or fewer "
                  "windows");
  // 10 x 256 = 2560 <= 3000: no warning
  const CliRun ok = run_statecut(prune("--method drrqr --keep 16 --calib " + (d / "short.txt") +
                                       " --calib-seqs 10 --calib-len 256", d / "b"));
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(ok.err.empty()) << ok.err;
}

TEST(Cli_PruneOptions, aRefusalComesBeforeAnyWarning) {
  TempDir d("popt");
  const CliRun r = run_statecut(prune("--method l1 --calib " + (kCorpora / "fortunes.txt").string(), d / "a"));
  EXPECT_EQ(r.code, 2);  // a usage error
  const auto l = lines(r.err);
  ASSERT_EQ(l.size(), 1u) << r.err;
  EXPECT_NE(l[0].find("give exactly one of --ratio R and --keep K"), std::string::npos) << l[0];
}

// --stream-weights on calibrates with one block's weights resident at a time (the shipped model's projections and
// embedding reach the streaming threshold): the checkpoint and its record are byte-identical to the whole-model run.
TEST(Cli_PruneOptions, streamedWeightsWriteTheSameCheckpoint) {
  TempDir d("pstream");
  const std::string args = "--method drrqr --keep 16 --calib " + (kCorpora / "pydocs_train.txt").string() +
                           " --calib-seqs 3 --calib-len 129 --json --stream-weights ";
  const CliRun off = run_statecut(prune(args + "off", d / "off"));
  ASSERT_EQ(off.code, 0) << off.err;
  const CliRun on = run_statecut(prune(args + "on", d / "on"));
  ASSERT_EQ(on.code, 0) << on.err;
  EXPECT_FALSE(json::parse(off.out)["streamed_weights"].get<bool>());
  EXPECT_TRUE(json::parse(on.out)["streamed_weights"].get<bool>());
  EXPECT_EQ(slurp(d.path / "off" / "model.safetensors"), slurp(d.path / "on" / "model.safetensors"));
  EXPECT_EQ(slurp(d.path / "off" / "statecut.json"), slurp(d.path / "on" / "statecut.json"));
}

TEST(Cli_PruneOptions, streamedWeightsRefuseGradCudaAndUnknownValues) {
  TempDir d("pstreambad");
  const std::string calib = " --calib " + (kCorpora / "pydocs_train.txt").string();
  const std::pair<std::string, std::string> cases[] = {
      {"--method grad --keep 16 --stream-weights on" + calib, "--method grad needs every block's weights at once"},
      {"--method drrqr --keep 16 --device cuda --stream-weights on" + calib, "--stream-weights on runs on the CPU"},
      {"--method drrqr --keep 16 --stream-weights sometimes" + calib, "unknown --stream-weights 'sometimes'"}};
  for (const auto& [args, want] : cases) {
    const CliRun r = run_statecut(prune(args, d / "out"));
    EXPECT_NE(r.code, 0) << args;
    ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d.path / "out")) << "no partial output";
  }
}
