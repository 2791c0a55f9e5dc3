// add_rms_norm_linear and add_rms_norm_gated_mlp (optimized/models/layers_common.h): a residual add, the next norm and
// the projection that reads it, as one call. On CUDA at batch 1 they are one launch (tests/gpu/fused_ops_cuda.cpp
// holds that kernel bit for bit to the two); everywhere else they are the composition itself, which these tests state
// on the CPU: the sum equals add_rms_norm's and the output is the projection of its norm, exactly (the same
// operations in the same order), in fp32 and f64, with and without the add (the first layer has none: the sum is x
// itself), and with Qwen3.5's zero-centred weight (1 + w); the packed MLP against its two halves within 64 units of
// roundoff (the GEMMs' blocking). Inputs: one token (the decode step) and a 3 × 5 batch, hidden 89 (not a multiple of
// 8: the fused kernel's 16-byte loads could not serve it, which is the path taken here anyway).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>

#include "optimized/models/layers_common.h"
#include "tests/rel_err_tensor.h"
#include "tests/test_env.h"

namespace statecut {
namespace {

class NormProjection : public ::testing::TestWithParam<torch::Dtype> {
 protected:
  void SetUp() override { torch::manual_seed(static_cast<uint64_t>(test::env_seed(20261204))); }
};

TEST_P(NormProjection, addRmsNormLinearIsTheNormThenTheProjection) {
  const auto o = torch::TensorOptions().dtype(GetParam());
  for (auto shape : {std::vector<int64_t>{1, 1, 89}, std::vector<int64_t>{3, 5, 89}})
    for (bool add : {true, false})
      for (bool zc : {false, true}) {
        const auto x = torch::randn(shape, o), w = torch::randn({89}, o), W = torch::randn({40, 89}, o);
        const auto d = add ? torch::randn(shape, o) : torch::Tensor();
        const auto [s, y] = add_rms_norm_linear(x, d, w, 1e-6, W, zc);
        const auto [s_ref, n] = zc ? add_rms_norm_zero_centered(x, d, w, 1e-6) : add_rms_norm(x, d, w, 1e-6);
        EXPECT_TRUE(torch::equal(s, s_ref)) << "add=" << add << " zero_centered=" << zc;
        if (!add) EXPECT_TRUE(s.is_same(x)) << "without the add the sum is x itself";
        EXPECT_TRUE(torch::equal(y, statecut::linear(n, W))) << "add=" << add << " zero_centered=" << zc;
      }
}

TEST_P(NormProjection, addRmsNormGatedMlpIsTheNormThenTheMlp) {
  const auto o = torch::TensorOptions().dtype(GetParam());
  const auto x = torch::randn({2, 1, 89}, o), d = torch::randn({2, 1, 89}, o), w = torch::randn({89}, o);
  const auto gate_up = torch::randn({2 * 24, 89}, o), down = torch::randn({89, 24}, o);
  for (bool zc : {false, true}) {
    const auto [s, y] = add_rms_norm_gated_mlp(x, d, w, 1e-5, gate_up, down, zc);
    const auto [s_ref, n] = zc ? add_rms_norm_zero_centered(x, d, w, 1e-5) : add_rms_norm(x, d, w, 1e-5);
    EXPECT_TRUE(torch::equal(s, s_ref));
    EXPECT_TRUE(torch::equal(y, gated_mlp_packed(n, gate_up, down))) << "zero_centered=" << zc;
    // The packed MLP is the MLP of its halves, up to the GEMMs' blocking: one GEMM over 48 rows may sum in another
    // order than two over 24 (a few units of roundoff, 2^-24 in fp32); a swapped or shifted half is off by O(1).
    const double u = GetParam() == torch::kFloat32 ? 0x1p-24 : 0x1p-53;
    EXPECT_LE(test::rel_err(y, gated_mlp(n, gate_up.narrow(0, 0, 24), gate_up.narrow(0, 24, 24), down)), 64 * u)
        << "the packed MLP is the MLP of its halves";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NormProjection, ::testing::Values(torch::kFloat32, torch::kFloat64),
                         [](const auto& info) { return info.param == torch::kFloat32 ? "f32" : "f64"; });

}  // namespace
}  // namespace statecut
