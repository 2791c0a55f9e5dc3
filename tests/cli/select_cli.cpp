// `statecut select` end to end: small .safetensors files written here (io writer), the binary run,
// its JSON read back; and bad inputs: one line on stderr naming the file, exit 1, nothing on stdout.
#include "optimized/io/safetensors.h"
#include "optimized/io/remove_tree.h"
#include "tests/cli/cli_run.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {
namespace fs = std::filesystem;
using statecut::io::DType;
using statecut::remove_tree;

using statecut::test::CliRun;
using statecut::test::run_statecut;

class Cli_Select : public ::testing::Test {
 protected:
  fs::path dir;
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("statecut_select_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir);
  }
  void TearDown() override { remove_tree(dir.string()); }

  CliRun run(const std::string& args) { return run_statecut("select " + args); }
  // Writes row-major tensors {name, shape, values} as F64 (or F32) and returns the path.
  std::string write(const std::string& file,
                    const std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<double>>>& ts,
                    DType dt = DType::F64) {
    statecut::io::SafetensorsWriter w;
    for (const auto& [name, shape, vals] : ts) {
      if (dt == DType::F32) {
        std::vector<float> f(vals.begin(), vals.end());
        w.add(name, dt, shape, f.data(), f.size() * sizeof(float));
      } else {
        w.add(name, dt, shape, vals.data(), vals.size() * sizeof(double));
      }
    }
    const std::string p = (dir / file).string();
    w.write(p);
    return p;
  }
};

// the hand-worked drrqr case of tests/ref/selector_methods.cpp: QRCP keeps {0,1}; f = 1.2 swaps to {1,2}
const std::vector<double> kM = {1.0, 0.7, 0.7, 0.0, 0.69, -0.68};

TEST_F(Cli_Select, drrqrKeepsWhatTheDeterminantRatioSays) {
  const std::string f = write("m.safetensors", {{"M", {2, 3}, kM}});
  CliRun r = run("--matrix " + f + " --method drrqr --keep 2");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["keep"], nlohmann::json({0, 1}));
  EXPECT_EQ(j["mode"], "strong");
  EXPECT_TRUE(j["certified"].get<bool>());
  r = run("--matrix " + f + " --method drrqr --keep 2 --f 1.2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["keep"], nlohmann::json({1, 2}));
  r = run("--matrix " + f + " --method drrqr --keep 2 --f 1.2 --faithful");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["keep"], nlohmann::json({1, 2}));
  EXPECT_EQ(j["mode"], "faithful");
}

TEST_F(Cli_Select, ratioOnF32MatrixKeepsThePaperBudget) {
  std::vector<double> v(40 * 8);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * double(i * i % 101)) + (i % 8 == 3 ? 5.0 : 0.0);
  const std::string f = write("m32.safetensors", {{"acts", {40, 8}, v}}, DType::F32);
  const CliRun r = run("--matrix " + f + " --tensor acts --method drrqr --ratio 0.5");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["keep"].size(), 4u);  // floor(8 * 0.5)
  EXPECT_TRUE(std::is_sorted(j["keep"].begin(), j["keep"].end()));
  EXPECT_EQ(j["k"], 4);
  EXPECT_EQ(j["dk"], 8);
}

TEST_F(Cli_Select, weightMethodsReadWqWkRmsAndGradients) {
  // the hand-worked case of tests/ref/selector_methods.cpp
  const std::vector<double> wq = {1, -2, 0, 0, 0, 1, -3, 1, 1, 1, 1, -1}, wk = {0, 0, 1, 2, -2, 2, 0, 1, 0, -1, 0, 0};
  const std::vector<double> gq = {1, 1, 1, 5, 5, 5, 0.1, 0.1, 0.1, 1, -1, -1}, gk = {1, 1, 1, 0, 0, 0, 0, 3, 0, 2, 2, 2};
  const std::string f = write("w.safetensors", {{"wq", {4, 3}, wq}, {"wk", {4, 3}, wk}, {"rms", {3}, {1, 0.1, 2}},
                                                {"gq", {4, 3}, gq}, {"gk", {4, 3}, gk}});
  const std::string w = "--matrix " + f + " --wq wq --wk wk --keep 3 ";
  CliRun r = run(w + "--method l1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["keep"], nlohmann::json({0, 1, 2}));
  r = run(w + "--method l1 --select q");
  EXPECT_EQ(nlohmann::json::parse(r.out)["keep"], nlohmann::json({0, 2, 3}));
  r = run(w + "--method swanda --rms rms");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["keep"], nlohmann::json({1, 2, 3}));
  r = run(w + "--method grad --grad-wq gq --grad-wk gk");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["keep"], nlohmann::json({0, 1, 3}));
}

TEST_F(Cli_Select, randIsSeededAndPcaPrintsARotation) {
  std::vector<double> v(30 * 6);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::cos(1.3 * double(i)) * (1.0 + double(i % 6));
  const std::string f = write("m.safetensors", {{"M", {30, 6}, v}});
  const CliRun a = run("--matrix " + f + " --method rand --keep 3 --seed 7");
  const CliRun b = run("--matrix " + f + " --method rand --keep 3 --seed 7");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(nlohmann::json::parse(a.out)["keep"].size(), 3u);
  const CliRun p = run("--matrix " + f + " --method pca --keep 2");
  ASSERT_EQ(p.code, 0) << p.err;
  const auto j = nlohmann::json::parse(p.out);
  ASSERT_EQ(j["rotation"].size(), 2u);
  double dot = 0, n0 = 0;
  for (int c = 0; c < 6; ++c) {
    dot += j["rotation"][0][c].get<double>() * j["rotation"][1][c].get<double>();
    n0 += std::pow(j["rotation"][0][c].get<double>(), 2);
  }
  EXPECT_NEAR(dot, 0.0, 1e-12);  // orthonormal rows
  EXPECT_NEAR(n0, 1.0, 1e-12);
}

// ---- bad input: one line naming the file, exit 1, empty stdout ---------------------------------
class BadInput_Select : public Cli_Select {
 protected:
  /// exit 1 for a failure, 2 (`code`) for a usage error: an option out of its range or missing
  void expect_error(const std::string& args, const std::string& needle, int code = 1) {
    const CliRun r = run(args);
    EXPECT_EQ(r.code, code) << args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "not one line: " << r.err;
  }
};

TEST_F(BadInput_Select, budgetOutOfRange) {
  const std::string f = write("m.safetensors", {{"M", {2, 3}, kM}});
  expect_error("--matrix " + f + " --method drrqr --keep 4", "m.safetensors");
  // The file is named where the file is the problem (its dk bounds --keep, exit 1); an option's own range is a usage
  // error (exit 2), whatever the file.
  expect_error("--matrix " + f + " --method drrqr --keep 0", "statecut select: usage: --keep must be >= 1", 2);
  expect_error("--matrix " + f + " --method drrqr --ratio 1.5", "statecut select: usage: --ratio must lie in (0, 1)", 2);
  expect_error("--matrix " + f + " --method drrqr --keep 2 --f 0.9", "statecut select: usage: --f must be", 2);
}

TEST_F(BadInput_Select, wrongTensorsAndMethods) {
  const std::string two = write("two.safetensors", {{"A", {2, 3}, kM}, {"B", {2, 3}, kM}});
  expect_error("--matrix " + two + " --method drrqr --keep 2", "--tensor");
  expect_error("--matrix " + two + " --tensor C --method drrqr --keep 2", "C");
  expect_error("--matrix " + two + " --tensor A --method wanda --keep 2", "usage: --method: unknown selection method", 2);
  expect_error("--matrix " + two + " --method swanda --wq A --wk B --keep 2", "usage: --method swanda needs --rms", 2);
  const std::string cube = write("cube.safetensors", {{"M", {1, 2, 3}, kM}});
  expect_error("--matrix " + cube + " --method drrqr --keep 2", "2-D");
  std::vector<int32_t> ints(6, 1);
  statecut::io::SafetensorsWriter w;
  w.add("M", DType::I32, {2, 3}, ints.data(), ints.size() * 4);
  w.write((dir / "int.safetensors").string());
  expect_error("--matrix " + (dir / "int.safetensors").string() + " --method drrqr --keep 2", "dtype");
  std::vector<double> nan = kM;
  nan[2] = std::nan("");
  const std::string nf = write("nan.safetensors", {{"M", {2, 3}, nan}});
  expect_error("--matrix " + nf + " --method drrqr --keep 2", "NaN");
}

TEST_F(BadInput_Select, missingOrTruncatedFile) {
  expect_error("--matrix " + (dir / "absent.safetensors").string() + " --method drrqr --keep 2", "absent.safetensors");
  const std::string f = write("m.safetensors", {{"M", {2, 3}, kM}});
  fs::resize_file(f, fs::file_size(f) - 5);
  expect_error("--matrix " + f + " --method drrqr --keep 2", "m.safetensors");
}

}  // namespace
