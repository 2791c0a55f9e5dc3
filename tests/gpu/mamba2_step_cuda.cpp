// Mamba-2's decode-step row kernels (kernels/mamba2_step.h) against their formulas in double on the same rounded
// inputs, and the residual sum against LibTorch's own fp32 add.
//
// Thresholds and why: the residual norm's output is two roundings to the activation type T (the normalised value,
// then its product with the weight: transformers' Mamba2RMSNorm casts before the weight), each at most the unit
// roundoff u (2^-8 bf16, 2^-11 fp16) relative, after fp32 arithmetic far below it (~D · 2^-24): normwise 1.5u (two
// roundings that each average near u/√3). The gated norm's is one rounding after fp32 arithmetic: u (its average
// near u/√3 leaves the fp32 part its room). The sum (fp32 + T in
// fp32, or rounded to T for a residual of T) is one IEEE add as LibTorch's: bit for bit. A wrong operation (the D
// skip dropped, SiLU for the gate missing, the norm before the gate) is off by O(1).
// Shapes: rows 1 (a batch-1 step) and 65; D = 2048 and I = 4096 = 64 heads × 64 (the 1.3B shape, 16-byte paths, one
// vector a thread), I = 5120 = 80 × 64 (2.7B: a second vector a thread, recomputed for the write), D = 89 and
// I = 3 × 89 (P = 89: one element a thread, heads not a multiple of 8); x and z as strided slices of one
// packed row (the conv and projection outputs); fp16 once; residual in fp32 and in T.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "tests/gpu/cuda_ready.h"
#include "tests/gpu/row_kernel_inputs.h"
#include "tests/rel_err_tensor.h"
#include "tests/test_env.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include "kernels/binding/mamba2_step_torch.h"
#endif

namespace statecut {
namespace {

#ifdef STATECUT_WITH_CUDA_KERNELS
using torch::indexing::Slice;

using test::f64;
using test::unit_roundoff;
using test::randn;

class Mamba2Step : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::cuda_ready()) GTEST_SKIP() << "no CUDA device or kernels not built";
    const int64_t seed = test::env_seed(20261203);
    std::printf("[mamba2 step] seed %lld (STATECUT_SEED overrides)\n", static_cast<long long>(seed));
    torch::manual_seed(static_cast<uint64_t>(seed));
  }
};

TEST_F(Mamba2Step, residualNormIsTheSumThenTheNormWithinTwoRoundings) {
  for (auto t : {torch::kBFloat16, torch::kHalf})
    for (bool res_f32 : {true, false})
      for (int64_t D : {89, 2048})
        for (int64_t rows : {1, 65}) {
          if (t == torch::kHalf && (D != 2048 || rows != 65)) continue;  // fp16 once
          const double eps = 1e-5;
          auto res = (torch::randn({rows, 1, D}) * 4).to(torch::kCUDA, res_f32 ? torch::kFloat32 : t);
          auto delta = randn({rows, 1, D}, t, 2.0), w = randn({D}, t);
          const auto [sum, y] = cuda::fused_mamba2_residual_norm(res, delta, w, eps);
          const std::string what = "D=" + std::to_string(D) + " rows=" + std::to_string(rows) +
                                   (res_f32 ? " fp32 residual" : " residual in T");
          EXPECT_TRUE(torch::equal(sum, res + delta)) << what;  // LibTorch's add: same one rounding
          const auto x = f64(sum.to(t));                          // the norm reads the sum cast to T
          const auto y64 = f64(w) * (x * torch::rsqrt(x.pow(2).mean(-1, true) + eps));
          EXPECT_EQ(y.scalar_type(), t) << what;
          EXPECT_LE(test::rel_err(y, y64), 1.5 * unit_roundoff(t)) << what;
          // Without a delta the sum is the residual itself, and the norm is of it.
          const auto [s0, y0] = cuda::fused_mamba2_residual_norm(res, torch::Tensor(), w, eps);
          const auto x0 = f64(res.to(t));
          EXPECT_TRUE(torch::equal(s0, res)) << what;
          EXPECT_LE(test::rel_err(y0, f64(w) * (x0 * torch::rsqrt(x0.pow(2).mean(-1, true) + eps))),
                    1.5 * unit_roundoff(t))
              << what;
        }
}

TEST_F(Mamba2Step, gatedNormIsTheSkipThenTheGateThenTheNormWithinOneRounding) {
  struct Shape {
    int64_t H, P;
  };
  for (auto t : {torch::kBFloat16, torch::kHalf})
    for (const Shape sh : {Shape{64, 64}, Shape{80, 64}, Shape{3, 89}})
      for (int64_t rows : {1, 65}) {
        if (t == torch::kHalf && (sh.P != 64 || rows != 65)) continue;  // fp16 once
        const int64_t H = sh.H, P = sh.P, I = H * P, pad = 24;
        const double eps = 1e-5;
        // The packed rows as a decode step has them: z | x | B | C | dt of the projection and conv outputs.
        auto zx = randn({rows, 1, 2 * I + pad}, t, 1.5);
        auto z = zx.index({Slice(), Slice(), Slice(0, I)}), x = zx.index({Slice(), Slice(), Slice(I, 2 * I)});
        auto o = randn({rows, 1, H, P}, t);
        auto D = torch::rand({H}, torch::dtype(torch::kFloat32).device(torch::kCUDA)) * 2;
        auto w = randn({I}, t);
        const auto y = cuda::fused_mamba2_gated_norm(o, x, D, P, z, w, eps);
        const auto u = f64(o).reshape({rows, 1, I}) + f64(x) * f64(D).repeat_interleave(P).view({1, 1, I});
        const auto zd = f64(z);
        const auto h = u * zd * torch::sigmoid(zd);
        const auto y64 = f64(w) * (h * torch::rsqrt(h.pow(2).mean(-1, true) + eps));
        const std::string what = "H=" + std::to_string(H) + " P=" + std::to_string(P) + " rows=" + std::to_string(rows);
        EXPECT_EQ(y.sizes(), x.sizes()) << what;
        EXPECT_LE(test::rel_err(y, y64), unit_roundoff(t)) << what;
      }
}

TEST_F(Mamba2Step, unsupportedInputsAreRefusedBeforeAnyLaunch) {
  const auto t = torch::kBFloat16;
  auto w = randn({64}, t), res = randn({2, 1, 64}, t);
  EXPECT_FALSE(cuda::fused_mamba2_residual_norm_apply(res.to(torch::kFloat64), torch::Tensor(), w));
  EXPECT_FALSE(cuda::fused_mamba2_residual_norm_apply(res, randn({2, 1, 32}, t), w));
  EXPECT_THROW(cuda::fused_mamba2_residual_norm(res.cpu(), torch::Tensor(), w, 1e-5), c10::Error);
  auto x = randn({2, 1, 64}, t), o = randn({2, 1, 4, 16}, t);
  auto D = torch::ones({4}, torch::dtype(torch::kFloat32).device(torch::kCUDA));
  EXPECT_TRUE(cuda::fused_mamba2_gated_norm_apply(o, x, D, x, w));
  EXPECT_FALSE(cuda::fused_mamba2_gated_norm_apply(o, x, D.to(torch::kBFloat16), x, w));
  EXPECT_THROW(cuda::fused_mamba2_gated_norm(o, x, D, 8, x, w, 1e-5), c10::Error);  // 4 heads of 8 != 64
}
#else
TEST(Mamba2Step, skippedWithoutTheCudaKernels) { GTEST_SKIP() << "built without the CUDA kernels"; }
#endif

}  // namespace
}  // namespace statecut
