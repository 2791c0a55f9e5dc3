// Helpers of the training tests (tests/torch/train_*.cpp): fixture models, seeded token ids, the families LoRA covers.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "optimized/models/model.h"
#include "optimized/train/lora.h"
#include "optimized/train/trainer.h"
#include "tests/rel_err_tensor.h"
#include "tests/test_env.h"

namespace train_test {

/// One fixture per family (and layout) that LoRA targets differently (lora.h's table).
inline const std::vector<std::string>& families() {
  static const std::vector<std::string> f = {"fla_delta_net", "fla_gated_deltanet", "fla_gated_deltanet_gva",
                                             "hf_mamba2",     "hf_qwen3_5",         "hf_qwen3_next"};
  return f;
}

/// The training tests' master seed (tests/test_env.h): STATECUT_SEED, else 20260213.
inline uint64_t seed() { return statecut::test::env_seed(20260213ull); }

inline std::unique_ptr<statecut::CausalLM> load(const std::string& fixture, torch::Dtype dtype) {
  return statecut::load_causal_lm(statecut::test::fixture_dir(fixture), dtype, torch::kCPU);
}

/// [B, T] int64 ids in [0, vocab) from a mt19937_64 (the same on every platform).
inline torch::Tensor random_ids(int64_t B, int64_t T, int64_t vocab, uint64_t s) {
  std::mt19937_64 rng(s);
  std::vector<int64_t> v(static_cast<size_t>(B * T));
  for (auto& x : v) x = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
  return torch::tensor(v, torch::kInt64).reshape({B, T});
}

/// A tensor of `like`'s shape and dtype with entries uniform in [−scale, scale] (seeded).
inline torch::Tensor random_like(const torch::Tensor& like, double scale, uint64_t s) {
  std::mt19937_64 rng(s);
  std::vector<double> v(static_cast<size_t>(like.numel()));
  for (auto& x : v) x = (static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2 - 1) * scale;
  return torch::tensor(v, torch::kFloat64).reshape(like.sizes()).to(like.dtype());
}

/// The LoRA row blocks of a loaded model (lora_blocks with the model's own parameter shapes).
inline std::vector<statecut::RowBlock> blocks_of(statecut::CausalLM& m) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto& [n, t] : m.named_parameters()) shapes[n] = t.sizes().vec();
  return statecut::lora_blocks(m.model_type(), m.prunable_layers(), [&](const std::string& n) { return shapes.at(n); });
}

using statecut::test::rel_err;

/// max over steps of |loss(got) − loss(ref)| / loss(ref): two runs of the same recipe in different precisions.
inline double worst_relative_loss_gap(const std::vector<statecut::StepRecord>& got,
                                      const std::vector<statecut::StepRecord>& ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.size() && i < got.size(); ++i)
    worst = std::max(worst, std::abs(got[i].loss - ref[i].loss) / ref[i].loss);
  return worst;
}

}  // namespace train_test

#define REQUIRE_FIXTURE(name)                                                                        \
  do {                                                                                               \
    if (statecut::test::fixture_dir(name).empty()) GTEST_SKIP() << "no fixture " << (name) << " here"; \
  } while (0)
