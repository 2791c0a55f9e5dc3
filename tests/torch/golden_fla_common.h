// Helpers of the fla golden tests: where the fixtures are, reading a golden file, normwise relative error.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "optimized/io/safetensors.h"
#include "optimized/models/weight_source.h"
#include "tests/rel_err_tensor.h"
#include "tests/test_env.h"

namespace statecut::golden {

using test::fixture_dir;  // tests/test_env.h: STATECUT_FIXTURE_ROOT, ../shared/fixtures, tests/data/fixtures

/// ../shared/models/<name>, else assets/<name> (the shipped copy).
inline std::string model_dir(const std::string& name) {
  namespace fs = std::filesystem;
  for (const auto& p : {fs::path(STATECUT_SOURCE_DIR) / ".." / "shared" / "models" / name,
                        fs::path(STATECUT_SOURCE_DIR) / "assets" / name})
    if (fs::exists(p / "golden.safetensors") && fs::exists(p / "config.json")) return p.string();
  return "";
}

class Golden {
 public:
  explicit Golden(const std::string& path) : f_(io::SafetensorsFile::open(path)) {}
  bool has(const std::string& name) const { return f_.has(name); }
  torch::Tensor get(const std::string& name) const { return tensor_from_view(f_.tensor(name)); }

 private:
  io::SafetensorsFile f_;
};

/// ‖y − y_ref‖_F / ‖y_ref‖_F in double; +inf on a shape mismatch or a non-finite y.
using statecut::test::rel_err;

/// Asserts rel_err ≤ tol and prints every measured error (the report quotes them).
inline void expect_close(const torch::Tensor& y, const torch::Tensor& y_ref, double tol, const std::string& what) {
  ASSERT_TRUE(y.defined()) << what << ": not computed";
  ASSERT_EQ(y.sizes(), y_ref.sizes()) << what;
  const double e = rel_err(y, y_ref);
  std::printf("  %-60s rel err %.3e (threshold %.0e)\n", what.c_str(), e, tol);
  EXPECT_LE(e, tol) << what;
}

}  // namespace statecut::golden
