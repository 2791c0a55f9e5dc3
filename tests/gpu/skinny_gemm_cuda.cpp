// The skinny GEMM of a batched decode step (kernels/skinny_gemm.h) against x · wᵀ in double, and where
// statecut::linear sends each row count.
//
// Thresholds and why: each element of y is one bf16 rounding (u = 2^-8: bf16 keeps 8 significant bits) of a sum the
// tensor cores form in fp32. Hopper's tensor cores add each 16-product group to the accumulator after aligning the
// terms to the largest, keeping fewer bits than fp32 additions: on an H100, at K = 8 and 72, errors reached 0.99 of
// 2^-8 |x·wᵀ| + K · 2^-23 Σ|x w| (fp32's accumulation bound at twice its unit roundoff; 43rd wave), i.e. ~2^-20
// Σ|x w| for one group. So per element
//   |y − x·wᵀ| <= 2^-8 |x·wᵀ| + (⌈K/16⌉ + 1) · 2^-19 Σ_k |x w|,
// twice that per group, plus one group for the partials the cluster adds. A wrong tile, a k slice
// read twice or dropped, a swizzle off by one row moves an element by O(Σ|x w| / ⌈K/64⌉) or more: far outside.
// Shapes with meaning: x's rows 1, 2, 9, 63, 64, 65, 127, 129, 256 (each side of the 8..256 buckets), N = 1, 100,
// 129 (a tile and one row), 6160 (DeltaNet 1.3B's q|k|v|β); K = 8 (one box, mostly zeros past the end), 72 (a box
// and a tail), 2048, 5632 (the 1.3B down projection); every cluster size 1..8.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "tests/gpu/cuda_ready.h"
#include "tests/test_env.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/binding/fused_layer_ops_torch.h"
#include "kernels/binding/skinny_gemm_torch.h"
#include "kernels/skinny_gemm.h"
#include "optimized/models/fused_ops.h"
#include "optimized/models/layers_common.h"
#endif

namespace statecut {
namespace {

#ifdef STATECUT_WITH_CUDA_KERNELS

class SkinnyGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::cuda_ready()) GTEST_SKIP() << "no CUDA device or kernels not built";
    if (!cuda::skinny_gemm_device_ok()) GTEST_SKIP() << "the skinny GEMM runs on compute capability 9.0 only";
    seed_ = test::env_seed(20261205);
    torch::manual_seed(seed_);
  }
  uint64_t seed_ = 0;
};

/// Uniform in [-1, 1), rounded to bf16 on the device.
torch::Tensor skinny_uniform(std::vector<int64_t> shape) {
  return (torch::rand(shape, torch::kFloat32) * 2 - 1).to(torch::kCUDA, torch::kBFloat16);
}

/// y [M, N] from skinny_gemm_bf16 with the cluster size forced (0: the kernel's choice); with silu_mul, y [M, N / 2]
/// from skinny_gemm_silu_mul_bf16 of w = gate|up.
torch::Tensor skinny_run(const torch::Tensor& x, const torch::Tensor& w, int cluster, bool silu_mul = false) {
  const int64_t M = x.size(0), N = silu_mul ? w.size(0) / 2 : w.size(0), K = w.size(1);
  auto y = torch::full({M, N}, std::nan(""), x.options());
  const auto f = silu_mul ? cuda::skinny_gemm_silu_mul_bf16 : cuda::skinny_gemm_bf16;
  const auto e = f(x.data_ptr(), w.data_ptr(), y.data_ptr(), static_cast<int>(M), static_cast<int>(N),
                   static_cast<int>(K), false, at::cuda::getCurrentCUDAStream(), cluster);
  EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
  return y;
}

/// Elements of y outside the bound above (a message naming the first), "" when none.
std::string skinny_outside_bound(const torch::Tensor& y, const torch::Tensor& x, const torch::Tensor& w) {
  const auto xd = x.to(torch::kFloat64), wd = w.to(torch::kFloat64);
  const auto ref = torch::matmul(xd, wd.t()), mag = torch::matmul(xd.abs(), wd.abs().t());
  const int64_t K = w.size(1);
  const double groups = static_cast<double>((K + 15) / 16 + 1);
  const auto bound = ref.abs() * 0x1p-8 + mag * (groups * 0x1p-19);
  const auto err = (y.to(torch::kFloat64) - ref).abs();
  const auto bad = err.gt(bound).logical_or(err.isnan());
  const int64_t n = bad.sum().item<int64_t>();
  if (n == 0) return "";
  const auto idx = bad.flatten().nonzero()[0].item<int64_t>();
  const int64_t m = idx / y.size(1), c = idx % y.size(1);
  return std::to_string(n) + " elements outside, first y[" + std::to_string(m) + "," + std::to_string(c) +
         "] = " + std::to_string(y[m][c].item<double>()) + " vs " + std::to_string(ref[m][c].item<double>()) +
         " (bound " + std::to_string(bound[m][c].item<double>()) + ")";
}

TEST_F(SkinnyGemm, matchesDoubleWithinOneRoundingOnEveryShapeAndClusterSize) {
  struct Shape {
    int64_t N, K;
  };
  for (int64_t M : {1, 2, 9, 63, 64, 65, 127, 129, 256})
    for (const Shape sh : {Shape{129, 2048}, Shape{1, 72}, Shape{100, 8}})
      for (int cluster : {0, 1, 3, 8}) {
        const auto x = skinny_uniform({M, sh.K}), w = skinny_uniform({sh.N, sh.K});
        const auto msg = skinny_outside_bound(skinny_run(x, w, cluster), x, w);
        EXPECT_EQ(msg, "") << "M=" << M << " N=" << sh.N << " K=" << sh.K << " cluster " << cluster << " seed "
                           << seed_;
      }
  for (const Shape sh : {Shape{6160, 2048}, Shape{2048, 5632}})
    for (int cluster = 0; cluster <= 8; ++cluster) {
      const int64_t M = cluster % 2 ? 64 : 17;
      const auto x = skinny_uniform({M, sh.K}), w = skinny_uniform({sh.N, sh.K});
      const auto msg = skinny_outside_bound(skinny_run(x, w, cluster), x, w);
      EXPECT_EQ(msg, "") << "M=" << M << " N=" << sh.N << " K=" << sh.K << " cluster " << cluster << " seed " << seed_;
    }
}

// The cluster's blocks add their partials in rank order and each block sums its k range in one order: the same bits
// on every run and in a graph replay (which decode steps are).
TEST_F(SkinnyGemm, isBitIdenticalAcrossRunsAndInAGraphReplay) {
  const auto x = skinny_uniform({64, 5632}), w = skinny_uniform({2048, 5632});
  const auto first = cuda::skinny_gemm(x, w);
  EXPECT_TRUE(torch::equal(first, cuda::skinny_gemm(x, w)));
  auto stream = c10::cuda::getStreamFromPool();
  at::cuda::getCurrentCUDAStream().synchronize();
  at::cuda::CUDAGraph graph;
  torch::Tensor replayed;
  {
    c10::cuda::CUDAStreamGuard guard(stream);
    cuda::skinny_gemm(x, w);  // warm-up on the capture stream
    stream.synchronize();
    graph.capture_begin();
    replayed = cuda::skinny_gemm(x, w);
    graph.capture_end();
  }
  graph.replay();
  stream.synchronize();
  at::cuda::getCurrentCUDAStream().synchronize();
  EXPECT_TRUE(torch::equal(first, replayed));
}

// statecut::linear: one row takes the GEMV, 2..64 rows the skinny GEMM (bit for bit its result), more rows cuBLAS;
// leading dims of x are kept.
TEST_F(SkinnyGemm, linearTakesItFromTwoToSixtyFourRows) {
  const auto w = skinny_uniform({300, 256});
  for (int64_t M : {1, 2, 64, 65}) {
    const auto x = skinny_uniform({M, 1, 256});
    const auto y = statecut::linear(x, w);
    ASSERT_EQ(y.sizes(), torch::IntArrayRef({M, 1, 300}));
    const bool skinny = M >= 2 && M <= cuda::kSkinnyGemmPaysRows;
    EXPECT_EQ(cuda::skinny_gemm_pays(x, w), skinny) << "M=" << M;
    if (skinny) EXPECT_TRUE(torch::equal(y, cuda::skinny_gemm(x, w))) << "M=" << M;
    if (M == 1) EXPECT_TRUE(torch::equal(y, cuda::fused_gemv(x, w)));
    if (M > cuda::kSkinnyGemmPaysRows) EXPECT_TRUE(torch::equal(y, torch::matmul(x, w.t())));
    EXPECT_EQ(skinny_outside_bound(y.view({M, 300}), x.view({M, 256}), w), "") << "M=" << M;
  }
}

// The gated MLP's gate|up projection with silu·mul in the epilogue: a block owns 64 gate rows and the 64 up rows I
// below them, and applies silu_mul's arithmetic to the two rounded sums. Each element's sum is the one the plain
// kernel forms for that row of gate_up (same k ranges, same cluster, same rank order), so the result is the plain
// GEMM of gate_up followed by fused_silu_mul, bit for bit. I = 1, 63, 100 leave the last tile's gate box reaching into
// the up rows and its up box past the end; 5632 is the 1.3B MLP; every cluster size.
TEST_F(SkinnyGemm, siluMulEpilogueIsTheGemmThenSiluMulBitForBit) {
  struct Shape {
    int64_t M, I, K;
  };
  for (const Shape sh : {Shape{1, 1, 72}, Shape{2, 63, 2048}, Shape{9, 100, 8}, Shape{64, 64, 2048},
                         Shape{65, 5632, 2048}, Shape{256, 129, 5632}, Shape{17, 5632, 2048}})
    for (int cluster : {0, 1, 3, 8}) {
      const auto x = skinny_uniform({sh.M, sh.K}), gate_up = skinny_uniform({2 * sh.I, sh.K});
      const auto y = skinny_run(x, gate_up, cluster);
      const auto want = cuda::fused_silu_mul(y.narrow(1, 0, sh.I), y.narrow(1, sh.I, sh.I));
      const auto got = skinny_run(x, gate_up, cluster, /*silu_mul=*/true);
      const int64_t differ = got.ne(want).sum().item<int64_t>();
      EXPECT_EQ(differ, 0) << "M=" << sh.M << " I=" << sh.I << " K=" << sh.K << " cluster " << cluster << " seed "
                           << seed_ << ": " << differ << " elements differ";
    }
}

// The two epilogues of a cluster (skinny_gemm.cu: pulled through cluster barriers, or each row's partials pushed to
// the rank that writes it) add the same partials in the same rank order: the same bits, plain and with silu·mul, on
// every cluster size and at each side of a row bucket. A partial sent to the wrong slot or rank, a row counted twice
// or a byte count the barrier never reaches (a hang: the test's timeout) shows here.
TEST_F(SkinnyGemm, pushedEpilogueGivesThePulledOnesBits) {
  struct Shape {
    int64_t M, N, K;
  };
  for (const Shape sh : {Shape{2, 129, 2048}, Shape{9, 6160, 2048}, Shape{17, 2048, 5632}, Shape{63, 100, 72},
                         Shape{64, 2048, 2048}})
    for (int cluster : {2, 3, 5, 8})
      for (bool silu : {false, true}) {
        const auto x = skinny_uniform({sh.M, sh.K}), w = skinny_uniform({sh.N, sh.K});
        cuda::skinny_gemm_push_epilogue(0);
        const auto pulled = skinny_run(x, w, cluster, silu);
        cuda::skinny_gemm_push_epilogue(1);
        const auto pushed = skinny_run(x, w, cluster, silu);
        cuda::skinny_gemm_push_epilogue(-1);
        const int64_t differ = pushed.ne(pulled).sum().item<int64_t>();
        EXPECT_EQ(differ, 0) << "M=" << sh.M << " N=" << sh.N << " K=" << sh.K << " cluster " << cluster
                             << (silu ? " silu_mul" : "") << " seed " << seed_ << ": " << differ << " elements differ";
      }
}

// gated_mlp_packed at 2..64 rows takes it (one launch for gate|up and silu·mul), at 1 row the GEMV's own, at 65 rows
// cuBLAS and silu_mul: the same bits as the unfused chain wherever it is taken; an odd row count of gate_up is not
// taken.
TEST_F(SkinnyGemm, gatedMlpTakesTheSiluMulEpilogueFromTwoToSixtyFourRows) {
  const int64_t I = 96, K = 128;
  const auto gate_up = skinny_uniform({2 * I, K}), down = skinny_uniform({K, I});
  for (int64_t M : {1, 2, 64, 65}) {
    const auto x = skinny_uniform({M, 1, K});
    EXPECT_EQ(cuda::skinny_silu_mul_pays(x, gate_up), M >= 2 && M <= cuda::kSkinnyGemmPaysRows) << "M=" << M;
    const auto y = statecut::linear(x, gate_up);
    const auto chain = statecut::linear(statecut::silu_mul(y.narrow(-1, 0, I), y.narrow(-1, I, I)), down);
    EXPECT_TRUE(torch::equal(statecut::gated_mlp_packed(x, gate_up, down), chain)) << "M=" << M;
  }
  EXPECT_FALSE(cuda::skinny_silu_mul_pays(skinny_uniform({8, K}), skinny_uniform({2 * I + 1, K})));
  EXPECT_THROW(cuda::skinny_gemm_silu_mul(skinny_uniform({8, K}), skinny_uniform({2 * I + 1, K})), c10::Error);
}

// What the kernel cannot take goes elsewhere instead of failing: fp16, K not a multiple of 8, a strided or
// misaligned x, more than 256 rows, autograd.
TEST_F(SkinnyGemm, leavesWhatItCannotServeToCublas) {
  const auto w = skinny_uniform({64, 256});
  EXPECT_TRUE(cuda::skinny_gemm_apply(skinny_uniform({8, 256}), w));
  EXPECT_FALSE(cuda::skinny_gemm_apply(skinny_uniform({8, 256}).to(torch::kHalf), w.to(torch::kHalf)));
  EXPECT_FALSE(cuda::skinny_gemm_apply(skinny_uniform({8, 252}), skinny_uniform({64, 252})));
  EXPECT_FALSE(cuda::skinny_gemm_apply(skinny_uniform({8, 512}).narrow(1, 0, 256), w));
  EXPECT_FALSE(cuda::skinny_gemm_apply(skinny_uniform({8 * 256 + 1}).narrow(0, 1, 8 * 256).view({8, 256}), w));
  EXPECT_FALSE(cuda::skinny_gemm_apply(skinny_uniform({257, 256}), w));
  const auto x = skinny_uniform({8, 256}).requires_grad_(true);
  const auto y = statecut::linear(x, w);
  EXPECT_TRUE(y.requires_grad()) << "under autograd linear stays on LibTorch";
  EXPECT_THROW(cuda::skinny_gemm(skinny_uniform({8, 252}), skinny_uniform({64, 252})), c10::Error);
}

#else
TEST(SkinnyGemm, needsTheCudaKernels) { GTEST_SKIP() << "built without the CUDA kernels"; }
#endif

}  // namespace
}  // namespace statecut
