// CLI end to end: `statecut logits` reproduces fla's logits on an fla fixture and transformers' on the HF fixtures,
// runs the CUDA kernel path (bf16) when a device is there, and bad inputs give one clear line on stderr, exit code 1
// and no output file.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "optimized/io/safetensors.h"
#include "tests/rel_err.h"
#include "tests/cli/cli_run.h"
#include "tests/cli/overflow_checkpoint.h"
#include "tests/test_env.h"

namespace fs = std::filesystem;
using statecut::io::DType;
using statecut::io::SafetensorsFile;
using statecut::io::SafetensorsWriter;

namespace {

using statecut::test::fixture_dir;

using statecut::test::run_statecut;
using statecut::test::TempDir;

// Writes input_ids of golden run `run` (as I64, or converted to I32) to `out`; run "" reads a golden without runs.
void write_golden_tokens(const std::string& golden, const std::string& run, const fs::path& out, bool as_i32) {
  auto g = SafetensorsFile::open(golden);
  const auto& ids = g.tensor(run.empty() ? "input_ids" : run + ".input_ids");
  SafetensorsWriter w;
  if (as_i32) {
    std::vector<int32_t> v;
    for (double x : statecut::io::to_double(ids)) v.push_back(static_cast<int32_t>(x));
    w.add("input_ids", DType::I32, ids.shape, v.data(), v.size() * sizeof(int32_t));
  } else {
    w.add("input_ids", ids.dtype, ids.shape, ids.data, ids.nbytes);
  }
  w.write(out.string());
}

using statecut::test::rel_err;

// Runs `statecut logits` on golden run `run` of `dir` with extra arguments; returns the exit and, on success, the
// logits and their relative error to the golden logits.
struct LogitsRun {
  statecut::test::CliRun run;
  std::vector<double> logits;
  double err_vs_golden = INFINITY;
};

LogitsRun cli_logits(const std::string& dir, const std::string& run, const std::string& extra, const TempDir& tmp,
                     bool as_i32 = false) {
  const fs::path tokens = tmp.path / "tokens.safetensors", out = tmp.path / "logits.safetensors";
  write_golden_tokens(dir + "/golden.safetensors", run, tokens, as_i32);
  fs::remove(out);
  LogitsRun r;
  r.run = run_statecut("logits --checkpoint " + dir + " --tokens " + tokens.string() + " --out " + out.string() + " " +
                       extra);
  if (r.run.code != 0) return r;
  auto f = SafetensorsFile::open(out.string());
  auto g = SafetensorsFile::open(dir + "/golden.safetensors");
  const auto& got = f.tensor("logits");
  const auto& want = g.tensor(run.empty() ? "logits" : run + ".logits");
  EXPECT_EQ(got.dtype, DType::F32);
  EXPECT_EQ(got.shape, want.shape);
  if (got.shape != want.shape) return r;
  r.logits = statecut::io::to_double(got);
  r.err_vs_golden = rel_err(r.logits, statecut::io::to_double(want));
  return r;
}

// fla_delta_net: fla computed both runs with its fp32 recurrent kernel → 2e-5 (see tests/torch/golden_fla_models.cpp).
TEST(Cli_Logits, reproducesFlaLogitsInBothModesAndTokenDtypes) {
  const std::string dir = fixture_dir("fla_delta_net");
  if (dir.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("ok");
  for (const char* run : {"run0", "run1"}) {
    for (bool i32 : {false, true}) {
      for (const char* mode : {"recurrent", "chunk"}) {
        auto r = cli_logits(dir, run, std::string("--mode ") + mode, tmp, i32);
        ASSERT_EQ(r.run.code, 0) << r.run.err;
        std::printf("  %s %s %s: rel err %.3e\n", run, i32 ? "I32" : "I64", mode, r.err_vs_golden);
        EXPECT_LE(r.err_vs_golden, 2e-5) << run << " " << mode;
      }
    }
  }
}

// The other fla fixtures and the trained model through the CLI (chunk mode, the default), at the thresholds of
// tests/torch/golden_fla_models.cpp: runs fla computed in true fp32 2e-5; Gated DeltaNet run1 went through fla's
// TF32 chunk kernel → 5e-3; the bf16 fixture (--dtype bf16) 2e-2. The trained byte_delta_net_4L (fp32, fla's
// recurrent kernel, 2 × 300 tokens) → 2e-5; it is only in ../shared/models (the repo ships its bf16 copy).
TEST(Cli_Logits, everyFlaFixtureMatchesItsGolden) {
  struct Want {
    const char* fixture;
    const char* extra;
    double run0, run1;
  };
  TempDir tmp("all");
  int checked = 0;
  for (const Want& w : {Want{"fla_delta_net_pruned50", "", 2e-5, 2e-5}, Want{"fla_delta_net_bf16", "--dtype bf16", 2e-2, 2e-2},
                        Want{"fla_gated_deltanet", "", 2e-5, 5e-3}, Want{"fla_gated_deltanet_gva", "", 2e-5, 5e-3},
                        Want{"fla_gated_deltanet_pruned50", "", 2e-5, 5e-3}}) {
    const std::string dir = fixture_dir(w.fixture);
    if (dir.empty()) continue;
    for (const auto& [run, tol] : {std::pair<const char*, double>{"run0", w.run0}, {"run1", w.run1}}) {
      if (!SafetensorsFile::open(dir + "/golden.safetensors").has(std::string(run) + ".input_ids")) continue;  // bf16: run0 only
      auto r = cli_logits(dir, run, w.extra, tmp);
      ASSERT_EQ(r.run.code, 0) << w.fixture << ": " << r.run.err;
      std::printf("  %s %s: rel err %.3e (threshold %.0e)\n", w.fixture, run, r.err_vs_golden, tol);
      EXPECT_LE(r.err_vs_golden, tol) << w.fixture << " " << run;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 9) << "every fla fixture (9 runs) is in tests/data/fixtures";
}

TEST(Cli_Logits, trainedModelMatchesItsGolden) {
  TempDir tmp("trained");
  const fs::path trained = fs::path(STATECUT_SOURCE_DIR) / ".." / "shared" / "models" / "byte_delta_net_4L";
  if (!fs::exists(trained / "golden.safetensors")) GTEST_SKIP() << "trained fp32 model only in ../shared/models";
  auto r = cli_logits(trained.string(), "", "", tmp);
  ASSERT_EQ(r.run.code, 0) << r.run.err;
  std::printf("  byte_delta_net_4L: rel err %.3e (threshold 2e-5)\n", r.err_vs_golden);
  EXPECT_LE(r.err_vs_golden, 2e-5);
}

// The HF fixtures at the thresholds of their golden tests: Mamba-2 1e-5 (transformers' torch path in true fp32,
// tests/torch/golden_hf_mamba2.cpp), Qwen3.5 / Qwen3-Next 5e-4 (their goldens went through fla's TF32 GDN kernels,
// tests/torch/golden_hf_qwen3_5.cpp).
TEST(Cli_Logits, reproducesTransformersLogitsOnTheHfFixtures) {
  TempDir tmp("hf");
  for (const auto& [fixture, tol] : {std::pair<const char*, double>{"hf_mamba2", 1e-5}, {"hf_qwen3_5", 5e-4},
                                     {"hf_qwen3_next", 5e-4}}) {
    const std::string dir = fixture_dir(fixture);
    ASSERT_FALSE(dir.empty()) << "fixture " << fixture << " not found";
    for (const char* run : {"run0", "run1"})
      for (const char* mode : {"recurrent", "chunk"}) {
        auto r = cli_logits(dir, run, std::string("--mode ") + mode, tmp);
        ASSERT_EQ(r.run.code, 0) << fixture << ": " << r.run.err;
        std::printf("  %s %s %s: rel err %.3e (threshold %.0e)\n", fixture, run, mode, r.err_vs_golden, tol);
        EXPECT_LE(r.err_vs_golden, tol) << fixture << " " << run << " " << mode;
      }
  }
}

// On a machine with a CUDA device, --device cuda --dtype bf16 runs the families through the statecut::cuda kernels
// (tests/gpu/golden_models_cuda.cpp checks that path layer by layer). Verdict as there: bf16 rounding dominates, so
// the CUDA run must stay within 2x the error of the CLI's own CPU bf16 run of the same model, and under 3e-2 (~8 bf16
// units). The binary runs in a process with no CUDA of its own. Without a device the CLI refuses --device cuda
// (checked) and the test skips.
TEST(Cli_Logits, cudaBf16KernelPathMatchesTheGolden) {
  const std::string dir = fixture_dir("fla_gated_deltanet_gva");
  if (dir.empty()) GTEST_SKIP() << "fixture fla_gated_deltanet_gva not found";
  TempDir tmp("cuda");
  for (const char* mode : {"chunk", "recurrent"}) {
    auto cuda = cli_logits(dir, "run1", std::string("--device cuda --dtype bf16 --mode ") + mode, tmp);
    if (cuda.run.code == 1 && cuda.run.err.find("no CUDA device") != std::string::npos)
      GTEST_SKIP() << "no CUDA device: " << cuda.run.err;
    ASSERT_EQ(cuda.run.code, 0) << cuda.run.err;
    auto cpu = cli_logits(dir, "run1", std::string("--device cpu --dtype bf16 --mode ") + mode, tmp);
    ASSERT_EQ(cpu.run.code, 0) << cpu.run.err;
    std::printf("  cuda bf16 %s: rel err %.3e (cpu bf16 %.3e)\n", mode, cuda.err_vs_golden, cpu.err_vs_golden);
    EXPECT_LE(cuda.err_vs_golden, 2 * cpu.err_vs_golden) << mode;
    EXPECT_LE(cuda.err_vs_golden, 3e-2) << mode;
  }
}

// A bad input must give exit code 1, exactly one line on stderr that contains `needle`, and no output file.
void expect_rejected(const std::string& args, const std::string& needle, const TempDir& tmp) {
  const fs::path out = tmp.path / "never.safetensors";
  auto r = run_statecut("logits " + args + " --out " + out.string());
  EXPECT_EQ(r.code, 1) << args << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "not one line: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  EXPECT_FALSE(fs::exists(out)) << args;
  std::printf("  rejected: %s", r.err.c_str());
}

fs::path copy_fixture(const std::string& dir, const TempDir& tmp, const std::string& name) {
  const fs::path d = tmp.path / name;
  fs::create_directories(d);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(fs::path(dir) / f, d / f);
  return d;
}

// A safetensors file holding one tensor.
template <typename T>
fs::path write_one(const fs::path& path, const std::string& name, DType dtype, std::vector<int64_t> shape,
                   const std::vector<T>& values) {
  SafetensorsWriter w;
  w.add(name, dtype, std::move(shape), values.data(), values.size() * sizeof(T));
  w.write(path.string());
  return path;
}

void replace_in_file(const fs::path& p, const std::string& from, const std::string& to) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  const auto pos = s.find(from);
  ASSERT_NE(pos, std::string::npos) << from;
  s.replace(pos, from.size(), to);
  std::ofstream(p, std::ios::trunc) << s;
}

TEST(BadInput_Logits, rejectsEveryBrokenInputWithOneLine) {
  const std::string dir = fixture_dir("fla_gated_deltanet_gva");
  if (dir.empty()) GTEST_SKIP() << "fixture fla_gated_deltanet_gva not found";
  TempDir tmp("bad");
  const fs::path tokens = tmp.path / "tokens.safetensors";
  write_golden_tokens(dir + "/golden.safetensors", "run0", tokens, false);
  const std::string tok = " --tokens " + tokens.string();

  expect_rejected("--checkpoint " + (tmp.path / "missing").string() + tok, "missing", tmp);

  const fs::path garbage = tmp.path / "garbage.safetensors";
  std::ofstream(garbage) << "this is not a safetensors file";
  expect_rejected("--checkpoint " + dir + " --tokens " + garbage.string(), "garbage.safetensors", tmp);

  const std::vector<float> ones(6, 1.0f);
  const fs::path floats = write_one(tmp.path / "floats.safetensors", "input_ids", DType::F32, {2, 3}, ones);
  expect_rejected("--checkpoint " + dir + " --tokens " + floats.string(), "input_ids", tmp);

  // No input_ids and more than one tensor (a file with one tensor of any name is read as the ids, io::read_tokens).
  const std::vector<int64_t> ids(6, 1);
  const fs::path noids = tmp.path / "noids.safetensors";
  {
    SafetensorsWriter w;
    w.add("tokens", DType::I64, {2, 3}, ids.data(), ids.size() * sizeof(int64_t));
    w.add("mask", DType::I64, {2, 3}, ids.data(), ids.size() * sizeof(int64_t));
    w.write(noids.string());
  }
  expect_rejected("--checkpoint " + dir + " --tokens " + noids.string(), "input_ids", tmp);

  const std::vector<int64_t> out_of_vocab = {1, 2, 999999};
  const fs::path big = write_one(tmp.path / "big.safetensors", "input_ids", DType::I64, {1, 3}, out_of_vocab);
  expect_rejected("--checkpoint " + dir + " --tokens " + big.string(), "999999", tmp);

  const fs::path unknown = copy_fixture(dir, tmp, "unknown");
  replace_in_file(unknown / "config.json", "\"gated_deltanet\"", "\"no_such_model\"");
  expect_rejected("--checkpoint " + unknown.string() + tok, "unknown model_type 'no_such_model'", tmp);

  const fs::path mismatch = copy_fixture(dir, tmp, "mismatch");
  replace_in_file(mismatch / "config.json", "\"head_dim\": 32", "\"head_dim\": 48");
  expect_rejected("--checkpoint " + mismatch.string() + tok, "q_proj.weight: shape [64,64] but the config implies [96,64]",
                  tmp);

  const fs::path nan = copy_fixture(dir, tmp, "nan");
  {
    auto src = SafetensorsFile::open(dir + "/model.safetensors");
    SafetensorsWriter w;
    std::vector<float> poisoned;
    for (const auto& n : src.names()) {
      const auto& t = src.tensor(n);
      if (n == "model.layers.1.attn.k_proj.weight") {
        poisoned = statecut::io::to_float(t);
        poisoned[5] = std::nanf("");
        w.add(n, DType::F32, t.shape, poisoned.data(), poisoned.size() * sizeof(float));
      } else {
        w.add(t);
      }
    }
    w.write((nan / "model.safetensors").string());
  }
  expect_rejected("--checkpoint " + nan.string() + tok, "model.layers.1.attn.k_proj.weight: holds NaN", tmp);

  // Finite weights whose forward overflows: the logits are NaN, which eval and generate refuse; so does logits, rather
  // than write a file of NaNs and exit 0.
  const std::string overflow = statecut::test::overflowing_checkpoint(
      fs::path(STATECUT_SOURCE_DIR) / "assets" / "byte_delta_net_4L", tmp.path / "overflow");
  const std::string text = (tmp.path / "bytes.txt").string();
  std::ofstream(text) << "def read_config(path):";
  expect_rejected("--checkpoint " + overflow + " --text " + text,
                  text + ": the logits of " + overflow +
                      " are not finite (NaN or Inf), first at sequence 0 position 0",
                  tmp);
}

}  // namespace
