// CLI end to end: `statecut logits` on an fla fixture reproduces fla's logits, and bad inputs give one clear line on
// stderr, exit code 1 and no output file.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "optimized/io/safetensors.h"

namespace fs = std::filesystem;
using statecut::io::DType;
using statecut::io::SafetensorsFile;
using statecut::io::SafetensorsWriter;

namespace {

std::string fixture_dir(const std::string& name) {
  for (const auto& p : {fs::path(STATECUT_SOURCE_DIR) / ".." / "shared" / "fixtures" / name,
                        fs::path(STATECUT_SOURCE_DIR) / "tests" / "data" / "fixtures" / name})
    if (fs::exists(p / "golden.safetensors")) return p.string();
  return "";
}

struct Run {
  int code;
  std::string err;
};

Run run_cli(const std::string& args, const fs::path& tmp) {
  const fs::path err = tmp / "stderr.txt";
  const std::string cmd = std::string(STATECUT_CLI) + " logits " + args + " 2> " + err.string() + " > /dev/null";
  const int st = std::system(cmd.c_str());
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, ss.str()};
}

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = fs::temp_directory_path() / ("statecut_logits_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Writes input_ids of golden run `run` (as I64, or converted to I32) to `out`.
void write_tokens(const std::string& golden, const std::string& run, const fs::path& out, bool as_i32) {
  auto g = SafetensorsFile::open(golden);
  const auto& ids = g.tensor(run + ".input_ids");
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

double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return std::sqrt(num / den);
}

// fla_delta_net: fla computed both runs with its fp32 recurrent kernel → 2e-5 (see tests/torch/golden_fla_models.cpp).
TEST(Cli_Logits, reproducesFlaLogitsInBothModesAndTokenDtypes) {
  const std::string dir = fixture_dir("fla_delta_net");
  if (dir.empty()) GTEST_SKIP() << "fixture fla_delta_net not found";
  TempDir tmp("ok");
  for (const char* run : {"run0", "run1"}) {
    for (bool i32 : {false, true}) {
      for (const char* mode : {"recurrent", "chunk"}) {
        const fs::path tokens = tmp.path() / "tokens.safetensors", out = tmp.path() / "logits.safetensors";
        write_tokens(dir + "/golden.safetensors", run, tokens, i32);
        fs::remove(out);
        auto r = run_cli("--checkpoint " + dir + " --tokens " + tokens.string() + " --out " + out.string() +
                             " --mode " + mode,
                         tmp.path());
        ASSERT_EQ(r.code, 0) << r.err;
        auto f = SafetensorsFile::open(out.string());
        auto g = SafetensorsFile::open(dir + "/golden.safetensors");
        const auto& got = f.tensor("logits");
        const auto& want = g.tensor(std::string(run) + ".logits");
        EXPECT_EQ(got.dtype, DType::F32);
        ASSERT_EQ(got.shape, want.shape);
        const double e = rel_err(statecut::io::to_double(got), statecut::io::to_double(want));
        std::printf("  %s %s %s: rel err %.3e\n", run, i32 ? "I32" : "I64", mode, e);
        EXPECT_LE(e, 2e-5) << run << " " << mode;
      }
    }
  }
}

// A bad input must give exit code 1, exactly one line on stderr that contains `needle`, and no output file.
void expect_rejected(const std::string& args, const std::string& needle, const TempDir& tmp) {
  const fs::path out = tmp.path() / "never.safetensors";
  auto r = run_cli(args + " --out " + out.string(), tmp.path());
  EXPECT_EQ(r.code, 1) << args << "\n" << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "not one line: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  EXPECT_FALSE(fs::exists(out)) << args;
  std::printf("  rejected: %s", r.err.c_str());
}

fs::path copy_fixture(const std::string& dir, const TempDir& tmp, const std::string& name) {
  const fs::path d = tmp.path() / name;
  fs::create_directories(d);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(fs::path(dir) / f, d / f);
  return d;
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
  const fs::path tokens = tmp.path() / "tokens.safetensors";
  write_tokens(dir + "/golden.safetensors", "run0", tokens, false);
  const std::string tok = " --tokens " + tokens.string();

  expect_rejected("--checkpoint " + (tmp.path() / "missing").string() + tok, "missing", tmp);

  const fs::path garbage = tmp.path() / "garbage.safetensors";
  std::ofstream(garbage) << "this is not a safetensors file";
  expect_rejected("--checkpoint " + dir + " --tokens " + garbage.string(), "garbage.safetensors", tmp);

  const fs::path floats = tmp.path() / "floats.safetensors";
  {
    SafetensorsWriter w;
    std::vector<float> v(6, 1.0f);
    w.add("input_ids", DType::F32, {2, 3}, v.data(), v.size() * sizeof(float));
    w.write(floats.string());
  }
  expect_rejected("--checkpoint " + dir + " --tokens " + floats.string(), "input_ids", tmp);

  const fs::path noids = tmp.path() / "noids.safetensors";
  {
    SafetensorsWriter w;
    std::vector<int64_t> v(6, 1);
    w.add("tokens", DType::I64, {2, 3}, v.data(), v.size() * sizeof(int64_t));
    w.write(noids.string());
  }
  expect_rejected("--checkpoint " + dir + " --tokens " + noids.string(), "input_ids", tmp);

  const fs::path big = tmp.path() / "big.safetensors";
  {
    SafetensorsWriter w;
    std::vector<int64_t> v = {1, 2, 999999};
    w.add("input_ids", DType::I64, {1, 3}, v.data(), v.size() * sizeof(int64_t));
    w.write(big.string());
  }
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
}

}  // namespace
