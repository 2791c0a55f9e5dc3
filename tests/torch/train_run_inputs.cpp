// What a training run reads from outside itself: torchrun's environment (optimized/train/data_parallel.h: WORLD_SIZE,
// RANK, LOCAL_RANK) and the identity of its inputs that a resume is held to (optimized/train/train_io.h,
// input_identity). Both were survivors of a mutation sample of optimized/train (ci/mutate seed 341): the variable
// parser with its end-of-number test inverted ("2" refused, "2x" read as 2), and the fingerprint taking the sizes of
// every file but the safetensors ones.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "optimized/train/data_parallel.h"
#include "optimized/train/train_io.h"
#include "tests/scoped_env.h"
#include "tests/test_files.h"

namespace statecut {
namespace {
namespace fs = std::filesystem;

using test::ScopedEnv;

/// data_parallel_from_env's error with WORLD_SIZE and RANK as given, "(no group)" when it returns none.
std::string world_error(std::optional<std::string> world, std::optional<std::string> rank) {
  ScopedEnv w("WORLD_SIZE", std::move(world)), r("RANK", std::move(rank));
  try {
    return data_parallel_from_env(torch::kCPU) ? "(a group)" : "(no group)";
  } catch (const std::runtime_error& e) {
    return e.what();
  }
}

// One process (WORLD_SIZE unset, 0 or 1) needs no group; anything but a plain non-negative integer up to 2^20 is
// named with its value, and a rank outside the world or missing is refused before any rendezvous is tried.
TEST(Train_RunInputs, torchrunsVariablesAreReadAsPlainIntegersOrNamed) {
  EXPECT_EQ(world_error(std::nullopt, std::nullopt), "(no group)");
  EXPECT_EQ(world_error("1", std::nullopt), "(no group)");
  EXPECT_EQ(world_error("0", std::nullopt), "(no group)");
  for (const char* bad : {"2x", "-3", "1048577", "two", " 2x"}) {
    const std::string m = world_error(bad, "0");
    EXPECT_NE(m.find(std::string("WORLD_SIZE='") + bad + "' is not a non-negative integer"), std::string::npos) << m;
  }
  EXPECT_NE(world_error("2", std::nullopt).find("RANK is not set"), std::string::npos);
  EXPECT_NE(world_error("2", "2").find("RANK=2 is not below WORLD_SIZE=2"), std::string::npos);
  EXPECT_NE(world_error("2", "1y").find("RANK='1y' is not a non-negative integer"), std::string::npos);
  {
    ScopedEnv l("LOCAL_RANK", std::nullopt);
    EXPECT_EQ(local_cuda_device(), torch::Device(torch::kCUDA, 0));
  }
  {
    ScopedEnv l("LOCAL_RANK", "3");
    EXPECT_EQ(local_cuda_device(), torch::Device(torch::kCUDA, 3));
  }
  ScopedEnv l("LOCAL_RANK", "3:");
  EXPECT_THROW(local_cuda_device(), std::runtime_error);
}

/// The fingerprint input_identity gives `path`.
std::string fingerprint(const std::string& path) { return input_identity(path).at("fingerprint").get<std::string>(); }

// A folder is known by its config.json and statecut.json bytes and its safetensors files' names and sizes: another
// spelling of it is the same input, a README changed is too, and a weight file of another size (another dtype, another
// prune) or another config is another input. A file is known by its bytes.
TEST(Train_RunInputs, aFolderIsKnownByItsConfigsAndItsWeightFilesSizes) {
  test::TempDir d("run-inputs");
  const fs::path m = d.path / "model";
  fs::create_directories(m);
  std::ofstream(m / "config.json") << R"({"model_type": "delta_net"})";
  std::ofstream(m / "model.safetensors") << std::string(64, 'w');
  std::ofstream(m / "README.md") << "a model";
  const std::string base = fingerprint(m.string());
  EXPECT_EQ(input_identity(m.string()).at("path"), input_identity((m / "." / "").string()).at("path"));
  EXPECT_EQ(fingerprint((d.path / "model" / ".." / "model").string()), base);
  std::ofstream(m / "README.md", std::ios::app) << ", described at length";
  EXPECT_EQ(fingerprint(m.string()), base) << "a README is no part of the model";
  std::ofstream(m / "model.safetensors", std::ios::app) << "w";
  const std::string longer = fingerprint(m.string());
  EXPECT_NE(longer, base) << "weights of another size";
  std::ofstream(m / "config.json") << R"({"model_type": "gated_deltanet"})";
  EXPECT_NE(fingerprint(m.string()), longer) << "another config";
  const std::string text = d / "text.txt";
  std::ofstream(text) << "some text";
  const std::string t0 = fingerprint(text);
  std::ofstream(text) << "some test";
  EXPECT_NE(fingerprint(text), t0) << "a file is its bytes";
}

}  // namespace
}  // namespace statecut
