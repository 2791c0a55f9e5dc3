// Mamba-2 with a dt clamp (config.json's time_step_limit other than (0, inf)): its decode steps keep the path that
// clamps dt after the softplus (the fused step forms dt in the decode kernel and has no clamp), so prompt + steps
// still equal one forward. The Equiv_Decode fixture is unclamped, so without this test a decode that dropped the
// clamp would go unseen: the clamp here is tight enough to move the logits by far more than the threshold (checked),
// so a path that ignored it fails.
// Threshold: f32 on the CPU, the same operations in another grouping (recurrent steps against the chunked forward),
// 4e-6 normwise as Equiv_Decode's f32 CPU cases.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "optimized/models/decode_cache.h"
#include "optimized/models/model.h"
#include "tests/rel_err_tensor.h"
#include "tests/test_env.h"
#include "tests/test_files.h"

namespace statecut {
namespace {

namespace fs = std::filesystem;

/// The hf_mamba2 fixture copied to `out` with time_step_limit = [lo, hi].
void clamped_copy(const std::string& fixture, const fs::path& out, double lo, double hi) {
  for (const auto& e : fs::directory_iterator(fixture))
    if (e.path().filename() != "config.json") fs::copy_file(e.path(), out / e.path().filename());
  nlohmann::json cfg = nlohmann::json::parse(test::slurp(fs::path(fixture) / "config.json"));
  cfg["time_step_limit"] = {lo, hi};
  std::ofstream(out / "config.json") << cfg.dump(2);
}

torch::Tensor decode_logits(CausalLM& m, const torch::Tensor& ids, int64_t prompt) {
  torch::NoGradGuard no_grad;
  DecodeCache cache;
  std::vector<torch::Tensor> out{m.forward_cached(ids.narrow(1, 0, prompt), cache, ForwardOptions()).logits};
  for (int64_t t = prompt; t < ids.size(1); ++t)
    out.push_back(m.forward_cached(ids.narrow(1, t, 1), cache, ForwardOptions()).logits);
  return torch::cat(out, 1);
}

TEST(Mamba2Decode, clampedDtDecodeMatchesOneForward) {
  const std::string fixture = test::fixture_dir("hf_mamba2");
  if (fixture.empty()) GTEST_SKIP() << "fixture hf_mamba2 not found";
  const test::TempDir dir("mamba2-clamp");
  // dt = softplus(dt_raw + dt_bias) lies around 1e-3..1e-1 (time_step_min/max of the fixture's init): [0.02, 0.03]
  // clamps most of it.
  clamped_copy(fixture, dir.path, 0.02, 0.03);
  const auto clamped = load_causal_lm(dir.path.string(), torch::kFloat32, torch::kCPU);
  const auto plain = load_causal_lm(fixture, torch::kFloat32, torch::kCPU);
  const uint64_t seed = test::env_seed(1203);
  auto gen = at::detail::createCPUGenerator(seed);
  const auto ids = torch::randint(clamped->vocab_size(), {2, 40}, gen, torch::TensorOptions().dtype(torch::kInt64));
  torch::NoGradGuard no_grad;
  const auto full = clamped->forward(ids, ForwardOptions()).logits;
  const auto dec = decode_logits(*clamped, ids, 32);
  const double e = test::rel_err(dec, full), moved = test::rel_err(plain->forward(ids, ForwardOptions()).logits, full);
  std::printf("[errors] mamba2 dt clamped to [0.02, 0.03], seed %llu: decode vs forward %.3e (threshold 4e-6); the "
              "clamp moves the logits by %.3e\n", static_cast<unsigned long long>(seed), e, moved);
  EXPECT_GT(moved, 1e-3) << "the clamp must matter for this test to see it dropped";
  EXPECT_LT(e, 4e-6);
}

}  // namespace
}  // namespace statecut
