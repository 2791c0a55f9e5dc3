// Helpers of the transformers golden tests (tests/torch/golden_hf_*.cpp): fixture lookup, golden tensors, errors.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "optimized/weight_source.h"

namespace statecut::golden_hf {

/// ../shared/fixtures/<name> when the shared folder is there, else the copy in tests/data/fixtures/<name>.
inline std::string fixture_dir(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path shared = fs::path(STATECUT_SOURCE_DIR) / ".." / "shared" / "fixtures" / name;
  if (fs::exists(shared / "golden.safetensors")) return shared.string();
  return (fs::path(STATECUT_SOURCE_DIR) / "tests" / "data" / "fixtures" / name).string();
}

/// ‖y − y_ref‖_F / ‖y_ref‖_F in double; NaN/Inf in y gives +inf so it fails first.
inline double rel_err(const torch::Tensor& y, const torch::Tensor& ref) {
  auto a = y.detach().to(torch::kCPU, torch::kFloat64);
  auto b = ref.detach().to(torch::kCPU, torch::kFloat64);
  EXPECT_EQ(a.sizes(), b.sizes());
  if (a.sizes() != b.sizes()) return INFINITY;
  if (!torch::isfinite(a).all().item<bool>()) return INFINITY;
  return (a - b).norm().item<double>() / b.norm().item<double>();
}

/// Master seed: STATECUT_SEED or 42; printed so a failure can be replayed.
inline uint64_t master_seed() {
  const char* s = std::getenv("STATECUT_SEED");
  const uint64_t seed = s ? std::strtoull(s, nullptr, 10) : 42;
  std::printf("STATECUT_SEED=%llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

}  // namespace statecut::golden_hf
