// The causal conv's backward kernels (kernels/conv1d_backward.h) against autograd of the same formula in f64 on the
// CPU from the same rounded inputs, and training through causal_conv1d (fused node) against the LibTorch path.
//
// Thresholds and why (u = unit roundoff of the activation type: 2^-8 bf16, 2^-11 fp16; u32 = 2^-24):
//   - dx, and y, dx, dw, db of the bf16 training path: one rounding of an fp32 value (at most u relative), after fp32
//     sums of W + 1 terms far below it: normwise ||dx − dx64|| / ||dx64|| <= 2u. Two paths that each round once
//     differ by at most 2u. A wrong tap, a shifted window or a missing SiLU' is off by O(1).
//   - dw, db (fp32, not rounded): with m = |dy| (1 + |b| + Σ_i |w_i x_i|) per token, each term's fp32 error is below
//     (W/2 + 10) u32 · m |x| (the fp32 sum s moves SiLU' by at most |SiLU''| <= 1/2 times its error; σ, the products
//     a few u32 more) and summing N = B·T terms adds (N − 1) u32 Σ|terms|, |terms| <= 1.1 m |x|. So elementwise
//     |dw − dw64| <= (1.1 N + W + 10) u32 · M, M[c,j] = Σ_{b,t} m |x_{t−W+1+j}|: normwise
//     ||dw − dw64|| <= 2 (N + W + 10) u32 ||M|| (factor 2: slack), and the same for db with M[c] = Σ m.
//   - determinism: dw, db (and dx) of two calls on the same inputs are equal bit for bit (no atomics).
// Shapes: C = 2048 (8 channels per thread), C = 89 and a slice at an odd offset (one channel per thread; x strided
// like a packed projection output), T = 1, 31, 32, 33, 65 (one chunk, a full one, chunk boundaries: dx reaches into
// the next chunk's ds), W = 4 (fla, Mamba-2, Qwen3.5), 1 (no window), 3, 8 (the kernel's largest); SiLU and bias on
// and off; fp16 once; T = 0.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>

#include "tests/gpu/cuda_ready.h"
#include "tests/rel_err_tensor.h"
#include "tests/test_env.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include <ATen/Context.h>

#include "kernels/binding/conv1d_backward_torch.h"
#include "optimized/models/layers_common.h"
#endif

namespace statecut {
namespace {

#ifdef STATECUT_WITH_CUDA_KERNELS
constexpr double kU32 = 0x1p-24;

double unit_roundoff(torch::Dtype t) { return t == torch::kBFloat16 ? 0x1p-8 : 0x1p-11; }

torch::Tensor randn(std::vector<int64_t> shape, torch::Dtype t, double scale = 1.0) {
  return (torch::randn(shape, torch::dtype(torch::kFloat32)) * scale).to(torch::kCUDA, t);
}

torch::Tensor f64(const torch::Tensor& t) { return t.detach().to(torch::kCPU, torch::kFloat64); }

/// x[b, t − W + 1 + j, c] for every t < T as [B, T, C] (zeros before the sequence).
torch::Tensor tap(const torch::Tensor& xpad, int64_t j, int64_t T) { return xpad.narrow(1, j, T); }

struct Grads {
  torch::Tensor dx, dw, db;
};

/// y = act(b + Σ_j w[c,j] x[t−W+1+j]) in f64 with autograd; dx [B,T,C], dw [C,1,W], db [C] (undefined without b).
Grads reference_grads(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, bool silu,
                      const torch::Tensor& dy) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), W = w.size(2);
  auto xd = f64(x).requires_grad_(true), wd = f64(w).requires_grad_(true);
  auto bd = b.defined() ? f64(b).requires_grad_(true) : torch::Tensor();
  const auto xpad = torch::cat({torch::zeros({B, W - 1, C}, torch::kFloat64), xd}, 1);
  auto s = torch::zeros({B, T, C}, torch::kFloat64);
  for (int64_t j = 0; j < W; ++j) s = s + tap(xpad, j, T) * wd.select(2, j).squeeze(1);
  if (bd.defined()) s = s + bd;
  const auto y = silu ? s * torch::sigmoid(s) : s;
  y.backward(f64(dy));
  return {xd.grad(), wd.grad(), bd.defined() ? bd.grad() : torch::Tensor()};
}

/// Σ over (b, t) of a [B, T, C] tensor: [C].
torch::Tensor sum_tokens(const torch::Tensor& t) { return t.reshape({-1, t.size(2)}).sum(0); }

/// The magnitudes the fp32 dw, db errors are bounded by (header): M_w [C,1,W], M_b [C].
std::pair<torch::Tensor, torch::Tensor> error_scales(const torch::Tensor& x, const torch::Tensor& w,
                                                     const torch::Tensor& b, const torch::Tensor& dy) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), W = w.size(2);
  const auto xpad = torch::cat({torch::zeros({B, W - 1, C}, torch::kFloat64), f64(x)}, 1).abs();
  const auto wa = f64(w).abs();
  auto m = torch::ones({B, T, C}, torch::kFloat64);
  if (b.defined()) m = m + f64(b).abs();
  for (int64_t j = 0; j < W; ++j) m = m + tap(xpad, j, T) * wa.select(2, j).squeeze(1);
  m = m * f64(dy).abs();
  auto mw = torch::zeros({C, 1, W}, torch::kFloat64);
  for (int64_t j = 0; j < W; ++j) mw.select(2, j).squeeze(1).copy_(sum_tokens(m * tap(xpad, j, T)));
  return {mw, sum_tokens(m)};
}

double abs_err_ratio(const torch::Tensor& y, const torch::Tensor& ref, const torch::Tensor& scale) {
  return (f64(y) - ref).norm().item<double>() / scale.norm().item<double>();
}

class Conv1dBackward : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::cuda_ready()) GTEST_SKIP() << "no CUDA device or kernels not built";
    torch::manual_seed(static_cast<uint64_t>(test::env_seed(20261203)));
  }
};

struct Shape {
  int64_t C, offset, W;  // x = a [B, T, C] slice at channel `offset` of a wider packed tensor (offset 0: not packed)
};

/// One case: random inputs (x ~ N(0,1), w ~ N(0,1/4) as a trained short conv, bias, dy ~ N(0,1)), kernel against f64.
void check_case(const Shape& sh, int64_t B, int64_t T, bool bias, bool silu, torch::Dtype t) {
  const int64_t C = sh.C, W = sh.W;
  auto packed = randn({B, T, C + (sh.offset ? 2 * sh.offset + 8 : 0)}, t);
  auto x = packed.narrow(2, sh.offset, C);
  auto w = randn({C, 1, W}, t, 0.5), dy = randn({B, T, C}, t);
  auto b = bias ? randn({C}, t) : torch::Tensor();
  const std::string at = "C=" + std::to_string(C) + " offset=" + std::to_string(sh.offset) + " W=" +
                         std::to_string(W) + " T=" + std::to_string(T) + " bias=" + std::to_string(bias) +
                         " silu=" + std::to_string(silu) + (t == torch::kHalf ? " fp16" : " bf16");
  auto [dx, dw, db] = cuda::fused_conv1d_backward(x, w, b, silu, dy);
  ASSERT_EQ(dx.scalar_type(), t) << at;
  ASSERT_EQ(dw.scalar_type(), torch::kFloat32) << at;
  ASSERT_EQ(dw.sizes(), w.sizes()) << at;
  ASSERT_EQ(db.defined(), bias) << at;
  const Grads ref = reference_grads(x, w, b, silu, dy);
  const auto [mw, mb] = error_scales(x, w, b, dy);
  const double n = static_cast<double>(B * T);
  EXPECT_LE(test::rel_err(dx, ref.dx), 2 * unit_roundoff(t)) << "dx, " << at;
  EXPECT_LE(abs_err_ratio(dw, ref.dw, mw), 2 * (n + W + 10) * kU32) << "dw, " << at;
  if (bias) {
    EXPECT_LE(abs_err_ratio(db, ref.db, mb), 2 * (n + W + 10) * kU32) << "db, " << at;
  }
}

TEST_F(Conv1dBackward, gradientsMatchF64AutogradWithinTheirBounds) {
  const int64_t B = 3;
  for (const Shape sh : {Shape{2048, 0, 4}, Shape{89, 0, 3}, Shape{2048, 8, 8}, Shape{200, 3, 1}})
    for (int64_t T : {1, 31, 32, 33, 65})
      for (bool bias : {true, false})
        for (bool silu : {true, false}) check_case(sh, B, T, bias, silu, torch::kBFloat16);
  check_case(Shape{2048, 0, 4}, B, 65, true, true, torch::kHalf);
  check_case(Shape{89, 0, 4}, B, 65, true, true, torch::kHalf);
}

TEST_F(Conv1dBackward, emptySequencesGiveZeroWeightGradients) {
  auto x = randn({2, 0, 64}, torch::kBFloat16), w = randn({64, 1, 4}, torch::kBFloat16);
  auto [dx, dw, db] = cuda::fused_conv1d_backward(x, w, randn({64}, torch::kBFloat16), true, x);
  EXPECT_EQ(dx.numel(), 0);
  EXPECT_TRUE(torch::equal(dw, torch::zeros_like(dw)));
  EXPECT_TRUE(torch::equal(db, torch::zeros_like(db)));
}

// 4 x 257 tokens: 36 chunk partials per channel, summed in a fixed order.
TEST_F(Conv1dBackward, twoCallsGiveTheSameBits) {
  auto x = randn({4, 257, 2048}, torch::kBFloat16), w = randn({2048, 1, 4}, torch::kBFloat16, 0.5);
  auto b = randn({2048}, torch::kBFloat16), dy = randn({4, 257, 2048}, torch::kBFloat16);
  auto [dx1, dw1, db1] = cuda::fused_conv1d_backward(x, w, b, true, dy);
  auto [dx2, dw2, db2] = cuda::fused_conv1d_backward(x, w, b, true, dy);
  EXPECT_TRUE(torch::equal(dw1, dw2));
  EXPECT_TRUE(torch::equal(db1, db2));
  EXPECT_TRUE(torch::equal(dx1, dx2));
}

TEST_F(Conv1dBackward, widerThanTheRegisterWindowIsRefused) {
  auto x = randn({1, 4, 16}, torch::kBFloat16);
  EXPECT_THROW(cuda::fused_conv1d_backward(x, randn({16, 1, 9}, torch::kBFloat16), torch::Tensor(), false, x),
               c10::Error);
}

/// cuDNN may run fp32 convolutions in TF32; the LibTorch path compared here is the fp32 one.
struct NoTf32 {
  bool was = at::globalContext().allowTF32CuDNN();
  NoTf32() { at::globalContext().setAllowTF32CuDNN(false); }
  ~NoTf32() { at::globalContext().setAllowTF32CuDNN(was); }
};

// A training forward + backward through causal_conv1d takes the fused node (bf16 CUDA, autograd recording) and gives
// the LibTorch path's output and gradients within 2u (each rounds once from fp32). x is a slice of a packed leaf (a
// Mamba-2 / Qwen3.5 projection output), so the gradient reaches the packed tensor through the slice.
TEST_F(Conv1dBackward, trainingThroughCausalConvMatchesTheLibTorchPath) {
  const char* fused = std::getenv("STATECUT_FUSED");
  if (fused && std::strcmp(fused, "0") == 0) GTEST_SKIP() << "STATECUT_FUSED=0: the fused path is off";
  const NoTf32 no_tf32;
  const double u = unit_roundoff(torch::kBFloat16);
  struct Case {
    Shape sh;
    bool bias, silu;
  };
  for (const Case cs : {Case{Shape{2048, 8, 4}, true, true}, Case{Shape{89, 3, 3}, false, false},
                        Case{Shape{2048, 0, 4}, false, true}}) {
    const int64_t B = 2, T = 65, C = cs.sh.C, W = cs.sh.W;
    const auto packed0 = randn({B, T, C + 2 * cs.sh.offset + 8}, torch::kBFloat16);
    const auto w0 = randn({C, 1, W}, torch::kBFloat16, 0.5);
    const auto b0 = cs.bias ? randn({C}, torch::kBFloat16) : torch::Tensor();
    const auto probe = torch::randn({B, T, C}, torch::dtype(torch::kFloat32).device(torch::kCUDA));
    struct Run {
      torch::Tensor y, dpacked, dw, db;
      std::string node;
    };
    auto run = [&](bool use_fused) {
      auto packed = packed0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
      auto b = cs.bias ? b0.clone().requires_grad_(true) : torch::Tensor();
      auto x = packed.narrow(2, cs.sh.offset, C);
      auto y = use_fused ? causal_conv1d(x, w, b, cs.silu) : causal_conv1d_libtorch(x, w, b, cs.silu);
      (y.to(torch::kFloat32) * probe).sum().backward();
      return Run{y.detach(), packed.grad(), w.grad(), cs.bias ? b.grad() : torch::Tensor(),
                 y.grad_fn() ? y.grad_fn()->name() : std::string()};
    };
    const Run f = run(true), l = run(false);
    const std::string at = "C=" + std::to_string(C) + " W=" + std::to_string(W) + " bias=" + std::to_string(cs.bias) +
                           " silu=" + std::to_string(cs.silu);
    EXPECT_NE(f.node.find("FusedCausalConv1d"), std::string::npos) << "the fused node must record, got " << f.node;
    EXPECT_LE(test::rel_err(f.y, l.y), 2 * u) << "y, " << at;
    EXPECT_LE(test::rel_err(f.dpacked, l.dpacked), 2 * u) << "dx, " << at;
    EXPECT_EQ(f.dw.scalar_type(), torch::kBFloat16) << at;
    EXPECT_LE(test::rel_err(f.dw, l.dw), 2 * u) << "dw, " << at;
    if (cs.bias) {
      EXPECT_LE(test::rel_err(f.db, l.db), 2 * u) << "db, " << at;
    }
  }
}
#else
TEST(Conv1dBackward, skippedWithoutKernels) { GTEST_SKIP() << "built without the CUDA kernels"; }
#endif

}  // namespace
}  // namespace statecut
