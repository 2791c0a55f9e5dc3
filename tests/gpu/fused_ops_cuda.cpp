// The fused step kernels (kernels/fused_layer_ops.h) against the same formulas in double on the same rounded inputs,
// and against LibTorch's own operations where the two must agree bit for bit.
//
// Thresholds and why: every output is one rounding of an fp32 value to the activation type (unit roundoff
// u = 2^-8 for bf16, 2^-11 for fp16, round to nearest), after fp32 arithmetic whose error (~D · 2^-24 for a
// reduction over D ≤ 2048) is far below it; so normwise ||y − y64|| / ||y64|| ≤ u: an element's rounding error
// reaches u only at a tie and many of them average near u/√3, which leaves the fp32 part its room.
// A wrong operation (a dropped weight, sigmoid for SiLU, a shifted window) is off by O(1). The state update of the
// conv step is a pure copy: exact. silu_mul rounds where LibTorch's silu(a) * b rounds: exact. The gate|up GEMV with
// silu·mul in its epilogue makes the same sums and roundings as the two launches it replaces: exact; so does the GEMV
// that forms its own normalised input (gemv_norm) against the norm kernel then the GEMV.
// Shapes: rows 1 (the decode step), 65 and strided row views (slices of a packed projection output), D = 89 (fewer
// threads than a block, not a multiple of 32), D = 2048 (the 1.3B hidden size), W = 4 (fla, Mamba-2, Qwen3.5) and
// W = 1 (no state), with and without bias, fp16 once; whole-sequence conv as its test states.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <cmath>
#include <string>

#include "tests/gpu/cuda_ready.h"
#include "tests/gpu/row_kernel_inputs.h"
#include "tests/rel_err_tensor.h"
#include "tests/test_env.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>

#include "kernels/binding/fused_layer_ops_torch.h"
#include "kernels/fused_layer_ops.h"
#endif

namespace statecut {
namespace {

#ifdef STATECUT_WITH_CUDA_KERNELS
using torch::indexing::Slice;

using test::f64;
using test::unit_roundoff;
using test::randn;

torch::Tensor norm64(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  const auto xd = f64(x);
  return xd * torch::rsqrt(xd.pow(2).mean(-1, true) + eps) * f64(w);
}

class FusedOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::cuda_ready()) GTEST_SKIP() << "no CUDA device or kernels not built";
    torch::manual_seed(static_cast<uint64_t>(test::env_seed(20261201)));
  }
};

// D <= 1024 takes a warp per row, longer rows a block; a row stride and D that are multiples of 8 (16 bytes) take
// the 8-element loads: (89, +7) and (2048, +7) one element per thread, (128, +0) (dv of the output norm),
// (1024, +8), (1032, +0) and (2048, +8) the 16-byte path on both sides of the warp/block boundary.
TEST_F(FusedOps, rmsNormMatchesDoubleWithinOneRounding) {
  struct Shape {
    int64_t D, pad;
  };
  for (auto t : {torch::kBFloat16, torch::kHalf})
    for (const Shape sh : {Shape{89, 7}, Shape{128, 0}, Shape{1024, 8}, Shape{1032, 0}, Shape{2048, 7}, Shape{2048, 8}})
      for (int64_t rows : {1, 65}) {
        const int64_t D = sh.D, off = sh.pad == 7 ? 3 : 0;
        auto wide = randn({rows, D + sh.pad}, t, 3.0);
        auto x = wide.index({Slice(), Slice(off, off + D)});  // row stride D + pad
        auto w = randn({D}, t);
        auto y = cuda::fused_rms_norm(x, w, 1e-6);
        EXPECT_LE(test::rel_err(y, norm64(x, w, 1e-6)), unit_roundoff(t)) << "D=" << D << " rows=" << rows;
      }
}

// The residual add and the next norm in one launch: the sum is LibTorch's x + delta to the bit (same one rounding),
// and the norm is the fused norm of that sum to the bit where both take the same load width (same loop: aligned
// rows, or D = 89 where neither can; a misaligned delta makes the fused call take one element per thread, another
// summation order, held to the rounding bound instead); shapes on both sides of the warp/block split.
TEST_F(FusedOps, addRmsNormIsTheAddThenTheNorm) {
  for (auto t : {torch::kBFloat16, torch::kHalf})
    for (int64_t D : {89, 1024, 2048})
      for (int64_t pad : {0, 7})
        for (int64_t rows : {1, 65}) {
          auto x = randn({rows, 1, D}, t, 2.0), w = randn({D}, t);
          auto delta = randn({rows, 1, D + pad}, t).narrow(2, pad ? 3 : 0, D);
          auto [sum, y] = cuda::fused_add_rms_norm(x, delta, w, 1e-6);
          const auto where = "D=" + std::to_string(D) + " pad=" + std::to_string(pad) + " rows=" + std::to_string(rows);
          EXPECT_TRUE(torch::equal(sum, x + delta)) << where;
          if (pad == 0 || D % 8 != 0) EXPECT_TRUE(torch::equal(y, cuda::fused_rms_norm(x + delta, w, 1e-6))) << where;
          EXPECT_LE(test::rel_err(y, norm64(x + delta, w, 1e-6)), unit_roundoff(t)) << where;
        }
}

// z at offset 40 (80 bytes: 16-byte rows) and 36 (72 bytes: one element per thread).
TEST_F(FusedOps, gatedRmsNormMatchesDoubleWithinOneRounding) {
  for (auto t : {torch::kBFloat16, torch::kHalf})
    for (int64_t off : {40, 36}) {
      auto x = randn({3, 1, 16, 128}, t);                  // [B,T,H,dv]
      auto packed = randn({3, 1, 16 * 128 + 40}, t);  // z: heads of a packed projection output (two stride levels)
      auto z = packed.narrow(2, off, 16 * 128).view({3, 1, 16, 128});
      auto w = randn({128}, t);
      auto y = cuda::fused_gated_rms_norm(x, z, w, 1e-5);
      const auto zd = f64(z);
      EXPECT_LE(test::rel_err(y, norm64(x, w, 1e-5) * zd * torch::sigmoid(zd)), unit_roundoff(t)) << "off=" << off;
    }
}

// Qwen3.5's zero-centred norms scale by (1 + w) in fp32 (w_offset = 1): the plain norm and the add + norm, with small
// weights (|w| ~ 0.1, as trained ones are), so a kernel that dropped the offset would be off by ~10×, not by a rounding.
TEST_F(FusedOps, zeroCenteredNormsScaleByOnePlusW) {
  for (auto t : {torch::kBFloat16, torch::kHalf})
    for (int64_t D : {89, 256, 2048})
      for (int64_t rows : {1, 65}) {
        auto x = randn({rows, 1, D}, t, 2.0), d = randn({rows, 1, D}, t), w = randn({D}, t, 0.1);
        const auto one_plus_w = f64(w) + 1.0;
        const auto where = "D=" + std::to_string(D) + " rows=" + std::to_string(rows);
        auto y = cuda::fused_rms_norm(x, w, 1e-6, /*w_offset=*/1.0);
        EXPECT_LE(test::rel_err(y, norm64(x, w, 1e-6) / f64(w) * one_plus_w), unit_roundoff(t)) << where;
        auto [sum, ys] = cuda::fused_add_rms_norm(x, d, w, 1e-6, /*w_offset=*/1.0);
        EXPECT_TRUE(torch::equal(sum, x + d)) << where;
        EXPECT_TRUE(torch::equal(ys, cuda::fused_rms_norm(x + d, w, 1e-6, 1.0))) << where;
      }
}

// Qwen3.5's gated output norm rounds three times (transformers' Qwen3_5RMSNormGated: the norm cast to the activation
// type, times w in that type, times SiLU(z) in fp32, cast): against the same chain in LibTorch on the GPU, every
// element equal but for the fp32 sum of squares' order (which can move a rounding: at most 1% of elements), and within
// u of it normwise. fla's one-rounding gated form (or sigmoid for SiLU) differs in far more elements than that.
TEST_F(FusedOps, qwenGatedNormRoundsWhereTransformersRounds) {
  for (auto t : {torch::kBFloat16, torch::kHalf})
    for (int64_t off : {40, 36}) {
      auto x = randn({3, 1, 32, 128}, t);
      auto packed = randn({3, 1, 32 * 128 + 40}, t);
      auto z = packed.narrow(2, off, 32 * 128).view({3, 1, 32, 128});
      auto w = randn({128}, t);
      auto y = cuda::fused_gated_rms_norm(x, z, w, 1e-6, /*qwen_gate=*/true);
      const auto xf = x.to(torch::kFloat32);
      const auto n = (xf * torch::rsqrt(xf.pow(2).mean(-1, true) + 1e-6)).to(t);
      const auto ref = ((w * n) * torch::silu(z.to(torch::kFloat32))).to(t);
      const double same = y.eq(ref).to(torch::kFloat64).mean().item<double>();
      EXPECT_GE(same, 0.99) << "off=" << off;
      EXPECT_LE(test::rel_err(y, ref), unit_roundoff(t)) << "off=" << off;
    }
}

// A thread owns 8 channels (16-byte accesses) when x's rows, the state and C allow it, else one: C = 1000 with x
// contiguous and C = 2048 as a slice of a packed projection row at a 16-byte-aligned offset take 8, C = 200 at offset
// 30 and C = 89 take one; W = 4 (fla, Mamba-2, Qwen3.5), 1 (no state), 3 and 8 (the kernel's largest).
TEST_F(FusedOps, conv1dStepMatchesDoubleAndShiftsTheWindow) {
  struct Shape {
    int64_t C, offset;
    bool packed;
  };
  for (const Shape sh : {Shape{1000, 0, false}, Shape{2048, 8, true}, Shape{200, 30, true}, Shape{89, 0, false}})
    for (int64_t W : {4, 1, 3, 8})
      for (bool bias : {true, false})
        for (bool silu : {true, false}) {
          const int64_t B = 5, C = sh.C;
          auto x = sh.packed ? randn({B, 1, C + 2 * sh.offset + 8}, torch::kBFloat16).narrow(2, sh.offset, C)
                             : randn({B, 1, C}, torch::kBFloat16);
          auto w = randn({C, 1, W}, torch::kBFloat16, 0.5);
          auto b = bias ? randn({C}, torch::kBFloat16) : torch::Tensor();
          auto conv = randn({B, W - 1, C}, torch::kBFloat16);
          const auto window = torch::cat({f64(conv), f64(x)}, 1);  // [B, W, C]
          auto ref = (window * f64(w).squeeze(1).t().unsqueeze(0)).sum(1, true);
          if (bias) ref = ref + f64(b);
          if (silu) ref = ref * torch::sigmoid(ref);
          const auto next_state = torch::cat({conv, x}, 1).narrow(1, 1, W - 1).clone();
          auto y = cuda::fused_conv1d_step(x, w, b, silu, conv);
          const std::string at = "C=" + std::to_string(C) + " W=" + std::to_string(W) + " bias=" +
                                 std::to_string(bias) + " silu=" + std::to_string(silu);
          EXPECT_LE(test::rel_err(y, ref), unit_roundoff(torch::kBFloat16)) << at;
          EXPECT_TRUE(torch::equal(conv, next_state)) << "the state must hold the last W-1 inputs, " << at;
        }
}

// The kernel keeps the window in registers and a thread walks 32 tokens: T = 32 / 33 / 65 cross chunk boundaries,
// T = 0 only moves the state, T = 2 < W − 1 reaches into the initial window. C = 2048 at a 16-byte-aligned offset
// takes the 8-channel path, C = 200 at offset 30 and C = 89 the one-channel path; W = 3, 8 (the kernel's largest), 1.
TEST_F(FusedOps, conv1dOverTokensMatchesDoubleAndCarriesTheState) {
  struct Shape {
    int64_t C, offset, W;
  };
  const int64_t B = 3;
  for (const Shape sh : {Shape{200, 30, 4}, Shape{2048, 8, 4}, Shape{89, 0, 3}, Shape{2048, 0, 8}, Shape{96, 8, 1}})
    for (int64_t T : {0, 1, 2, 32, 33, 65})
      for (bool with_init : {true, false}) {
        const int64_t C = sh.C, W = sh.W;
        auto packed = randn({B, T, C + 2 * sh.offset + 8}, torch::kBFloat16);
        auto x = packed.narrow(2, sh.offset, C);  // a slice of a packed projection output
        auto w = randn({C, 1, W}, torch::kBFloat16, 0.5);
        auto b = randn({C}, torch::kBFloat16);
        auto init = with_init ? randn({B, W - 1, C}, torch::kBFloat16) : torch::Tensor();
        const auto prev = with_init ? init : torch::zeros({B, W - 1, C}, x.options());
        const auto seq = torch::cat({prev, x}, 1);  // [B, W-1+T, C]
        auto ref = torch::zeros({B, T, C}, torch::kFloat64);
        for (int64_t j = 0; j < W; ++j) ref += f64(seq.narrow(1, j, T)) * f64(w).select(2, j).squeeze(1);
        ref = ref + f64(b);
        ref = ref * torch::sigmoid(ref);
        torch::Tensor fin;
        auto y = cuda::fused_conv1d(x, w, b, /*silu=*/true, init, &fin);
        const std::string at = "C=" + std::to_string(C) + " W=" + std::to_string(W) + " T=" + std::to_string(T) +
                               " init=" + std::to_string(with_init);
        if (T > 0) EXPECT_LE(test::rel_err(y, ref), unit_roundoff(torch::kBFloat16)) << at;
        EXPECT_TRUE(torch::equal(fin, seq.narrow(1, T, W - 1))) << "final state, " << at;
      }
}

TEST_F(FusedOps, conv1dWiderThanTheRegisterWindowIsRefused) {
  auto x = randn({1, 4, 16}, torch::kBFloat16);
  EXPECT_THROW(cuda::fused_conv1d(x, randn({16, 1, cuda::kFusedConvMaxWidth + 1}, torch::kBFloat16), torch::Tensor(),
                                  false, torch::Tensor(), nullptr),
               c10::Error);
}

// D = 300 (not a multiple of 8: one element per thread), 2048 and 5632 (the 1.3B MLP: 16-byte loads, three column
// blocks of 2048, the last partial), 4099 (one element per thread over three column blocks); rows 1 (a decode step)
// and 65.
TEST_F(FusedOps, siluMulRoundsWhereLibTorchRounds) {
  for (auto t : {torch::kBFloat16, torch::kHalf})
    for (int64_t D : {300, 2048, 4099, 5632})
      for (int64_t rows : {1, 65}) {
        auto packed = randn({rows, 2 * D}, t, 2.0);  // gate | up halves of one packed output
        auto a = packed.index({Slice(), Slice(0, D)}), b = packed.index({Slice(), Slice(D, 2 * D)});
        auto y = cuda::fused_silu_mul(a, b);
        EXPECT_TRUE(torch::equal(y, torch::silu(a) * b)) << "D=" << D << " rows=" << rows;
      }
}

// The small-batch GEMV against f64: rows 1 / 3 / 8 (a decode step at batch <= 8), columns 1 / 33 (fewer than a block
// of warps, not a multiple of 8) / 2048, K = 8 (one load per row) / 2048 / 5632 (the 1.3B MLP). fp32 sums over K
// terms add ~sqrt(K)·2^-24, far below the output's one rounding: bound u, as the norms.
TEST_F(FusedOps, gemvMatchesDoubleWithinOneRounding) {
  for (auto t : {torch::kBFloat16, torch::kHalf})
    for (int64_t M : {1, 3, 8})
      for (int64_t N : {1, 33, 2048})
        for (int64_t K : {8, 2048, 5632}) {
          auto x = randn({M, 1, K}, t), w = randn({N, K}, t, 1.0 / std::sqrt(static_cast<double>(K)));
          ASSERT_TRUE(cuda::fused_gemv_apply(x, w));
          auto y = cuda::fused_gemv(x, w);
          ASSERT_EQ(y.sizes(), (std::vector<int64_t>{M, 1, N}));
          const auto ref = torch::matmul(f64(x), f64(w).t());
          EXPECT_LE(test::rel_err(y, ref), unit_roundoff(t)) << "M=" << M << " N=" << N << " K=" << K;
        }
  auto w = randn({16, 64}, torch::kBFloat16);
  EXPECT_FALSE(cuda::fused_gemv_apply(randn({9, 64}, torch::kBFloat16), w)) << "more rows than a decode step";
  EXPECT_FALSE(cuda::fused_gemv_apply(randn({2, 60}, torch::kBFloat16), randn({16, 60}, torch::kBFloat16))) << "K % 8";
  EXPECT_FALSE(cuda::fused_gemv_apply(randn({64, 2}, torch::kBFloat16).t(), w)) << "x not contiguous";
  EXPECT_FALSE(cuda::fused_gemv_apply(randn({2, 64}, torch::kHalf), w)) << "mixed dtypes";
  EXPECT_TRUE(cuda::fused_gemv_pays(randn({1, 1, 64}, torch::kBFloat16), w)) << "batch 1: the GEMV";
  EXPECT_FALSE(cuda::fused_gemv_pays(randn({2, 1, 64}, torch::kBFloat16), w)) << "batch 2: cuBLAS";
}

// The gated MLP's gate|up GEMV with silu·mul in its epilogue equals the two launches it replaces bit for bit (the
// same sums, the same three roundings): rows 1 / 3 / 8, I = 1 / 89 (odd, not a multiple of 8) / 5632 (the 1.3B MLP),
// K = 8 / 2048. Inputs scaled so the GEMV outputs span silu's curved range (|g| ~ 2).
TEST_F(FusedOps, gemvSiluMulIsTheGemvThenSiluMulBitForBit) {
  for (auto t : {torch::kBFloat16, torch::kHalf})
    for (int64_t M : {1, 3, 8})
      for (int64_t I : {1, 89, 5632})
        for (int64_t K : {8, 2048}) {
          auto x = randn({M, 1, K}, t), gate_up = randn({2 * I, K}, t, 2.0 / std::sqrt(static_cast<double>(K)));
          const auto y = cuda::fused_gemv_silu_mul(x, gate_up);
          ASSERT_EQ(y.sizes(), (std::vector<int64_t>{M, 1, I}));
          const auto both = cuda::fused_gemv(x, gate_up);
          const auto ref = cuda::fused_silu_mul(both.narrow(-1, 0, I), both.narrow(-1, I, I));
          EXPECT_TRUE(torch::equal(y, ref))
              << "M=" << M << " I=" << I << " K=" << K << ": "
              << (y.to(torch::kFloat64) - ref.to(torch::kFloat64)).abs().max().item<double>();
        }
  EXPECT_THROW(cuda::fused_gemv_silu_mul(randn({1, 64}, torch::kBFloat16), randn({7, 64}, torch::kBFloat16)),
               c10::Error)
      << "an odd row count has no gate and up halves";
}

// The GEMV that forms its own normalised input (gemv_norm) runs the norm kernels' row code with their thread layout,
// so its input is their output bit for bit and the GEMV's sums are the plain GEMV's: exact. K = 712 (89 · 8) and 1024
// take the warp-per-row side, 1032, 2048 (the 1.3B hidden size) and 4104 (a thread reads two vectors) the block side;
// N = 6160 is DeltaNet 1.3B's packed q|k|v|β (770 blocks, each forming the row), N = 89 a partial last block.
TEST_F(FusedOps, gemvNormIsTheAddNormThenTheGemvBitForBit) {
  int cases = 0;
  for (auto t : {torch::kBFloat16, torch::kHalf})
    for (int64_t K : {712, 1024, 1032, 2048, 4104})
      for (bool add : {true, false})
        for (bool silu : {false, true})
          for (double off : {0.0, 1.0}) {
            const int64_t N = K == 2048 && !silu ? 6160 : 89;
            const double eps = 1e-6;
            auto x = randn({1, 1, K}, t, 4.0), nw = randn({K}, t), d = add ? randn({1, 1, K}, t) : torch::Tensor();
            const auto w = randn({silu ? 2 * N : N, K}, t, 2.0 / std::sqrt(static_cast<double>(K)));
            ASSERT_TRUE(cuda::fused_norm_gemv_pays(x, d, nw, w));
            const auto [s, y] = cuda::fused_add_rms_norm_gemv(x, d, nw, eps, off, w, silu);
            const auto [s_ref, xn] = add ? cuda::fused_add_rms_norm(x, d, nw, eps, off)
                                         : std::pair{x, cuda::fused_rms_norm(x, nw, eps, off)};
            const auto y_ref = silu ? cuda::fused_gemv_silu_mul(xn, w) : cuda::fused_gemv(xn, w);
            const std::string where = "K=" + std::to_string(K) + " add=" + std::to_string(add) +
                                      " silu=" + std::to_string(silu) + " offset=" + std::to_string(off);
            EXPECT_TRUE(torch::equal(s, s_ref)) << where;
            EXPECT_TRUE(torch::equal(y, y_ref))
                << where << ": " << (f64(y) - f64(y_ref)).abs().max().item<double>();
            ++cases;
          }
  EXPECT_EQ(cases, 80);
}

// The GEMV whose first C columns leave through the conv step (gemv_norm_conv: a decode step's norm, packed q|k|v|…
// projection and short conv in one launch) makes the GEMV's sums and the conv step's fma chain on the same rounded
// input, so it is the two launches bit for bit: output, residual sum and window, over three carried steps. N = 9228,
// C = 6144 is Gated DeltaNet 1.3B's packed projection and q|k|v channels; C = N (every column convolved) and C = 37
// (odd, a warp's columns split between the two sides) the edges.
TEST_F(FusedOps, gemvNormConvIsTheGemvNormThenTheConvStepBitForBit) {
  struct Shape {
    int64_t K, N, C;
  };
  int cases = 0;
  for (auto t : {torch::kBFloat16, torch::kHalf})
    for (const Shape sh : {Shape{2048, 9228, 6144}, Shape{712, 89, 89}, Shape{1032, 100, 37}})
      for (bool add : {true, false})
        for (bool bias : {true, false})
          for (bool silu : {true, false}) {
            const int64_t K = sh.K, N = sh.N, C = sh.C;
            auto nw = randn({K}, t), w = randn({N, K}, t, 2.0 / std::sqrt(static_cast<double>(K)));
            auto cw = randn({C, 1, 4}, t, 0.5), cb = bias ? randn({C}, t) : torch::Tensor();
            auto window = randn({1, 3, C}, t), window_ref = window.clone();
            const std::string where = "K=" + std::to_string(K) + " C=" + std::to_string(C) + " add=" +
                                      std::to_string(add) + " bias=" + std::to_string(bias) +
                                      " silu=" + std::to_string(silu);
            for (int step = 0; step < 3; ++step) {
              auto x = randn({1, 1, K}, t, 4.0), d = add ? randn({1, 1, K}, t) : torch::Tensor();
              ASSERT_TRUE(cuda::fused_norm_gemv_conv_pays(x, d, nw, w, cw, cb, window)) << where;
              const auto [s, y] = cuda::fused_add_rms_norm_gemv_conv(x, d, nw, 1e-6, 0.0, w, cw, cb, silu, window);
              const auto [s_ref, y_plain] = cuda::fused_add_rms_norm_gemv(x, d, nw, 1e-6, 0.0, w, false);
              const auto conv = cuda::fused_conv1d_step(y_plain.narrow(2, 0, C), cw, cb, silu, window_ref);
              const auto y_ref = torch::cat({conv, y_plain.narrow(2, C, N - C)}, 2);
              EXPECT_TRUE(torch::equal(s, s_ref)) << where << " step " << step;
              EXPECT_TRUE(torch::equal(y, y_ref))
                  << where << " step " << step << ": " << (f64(y) - f64(y_ref)).abs().max().item<double>();
              EXPECT_TRUE(torch::equal(window, window_ref)) << where << " step " << step << ": the window's shift";
            }
            ++cases;
          }
  EXPECT_EQ(cases, 48);
}

// What the conv epilogue does not serve goes back to the GEMV and the conv-step launch (add_rms_norm_linear_conv).
TEST_F(FusedOps, gemvNormConvDeclinesWhatItCannotServe) {
  const auto bf = torch::kBFloat16;
  auto x = randn({1, 1, 2048}, bf), nw = randn({2048}, bf), w = randn({64, 2048}, bf);
  auto cw = randn({48, 1, 4}, bf), cb = randn({48}, bf), window = randn({1, 3, 48}, bf);
  EXPECT_TRUE(cuda::fused_norm_gemv_conv_pays(x, {}, nw, w, cw, cb, window));
  EXPECT_TRUE(cuda::fused_norm_gemv_conv_pays(x, {}, nw, w, cw, {}, window)) << "no bias";
  EXPECT_FALSE(cuda::fused_norm_gemv_conv_pays(x, {}, nw, w, randn({48, 1, 3}, bf), cb, randn({1, 2, 48}, bf)))
      << "width 3: the conv-step kernel";
  EXPECT_FALSE(cuda::fused_norm_gemv_conv_pays(x, {}, nw, w, randn({65, 1, 4}, bf), {}, randn({1, 3, 65}, bf)))
      << "more conv channels than columns";
  EXPECT_FALSE(cuda::fused_norm_gemv_conv_pays(x, {}, nw, w, cw, cb, randn({2, 3, 48}, bf))) << "two windows";
  EXPECT_FALSE(cuda::fused_norm_gemv_conv_pays(x, {}, nw, w, cw, cb, randn({1, 48, 3}, bf).transpose(1, 2)))
      << "a window not contiguous";
  EXPECT_FALSE(cuda::fused_norm_gemv_conv_pays(x, {}, nw, w, cw, randn({47}, bf), window)) << "bias of 47";
  EXPECT_FALSE(cuda::fused_norm_gemv_conv_pays(x, {}, nw, w, cw.to(torch::kHalf), cb, window)) << "conv of fp16";
  EXPECT_FALSE(cuda::fused_norm_gemv_conv_pays(randn({2, 1, 2048}, bf), {}, nw, w, cw, cb, window)) << "two rows";
}

// More than one row (the launcher takes up to kGemvMaxRows; the model asks for one): each row is normalised apart.
TEST_F(FusedOps, gemvNormNormalisesEachOfSeveralRows) {
  for (int64_t K : {712, 2048}) {
    const int64_t M = 3, N = 100;
    auto x = randn({M, K}, torch::kBFloat16, 3.0), d = randn({M, K}, torch::kBFloat16);
    auto nw = randn({K}, torch::kBFloat16), w = randn({N, K}, torch::kBFloat16, 0.05);
    auto s = torch::empty_like(x), y = torch::empty({M, N}, x.options());
    cuda::GemvNorm g;
    g.delta = d.data_ptr(), g.w = nw.data_ptr(), g.sum = s.data_ptr(), g.eps = 1e-5f;
    ASSERT_EQ(cuda::gemv_norm(cuda::ElemType::kBF16, x.data_ptr(), g, w.data_ptr(), y.data_ptr(), M, N, K, false,
                              at::cuda::getCurrentCUDAStream()),
              cudaSuccess);
    const auto [s_ref, xn] = cuda::fused_add_rms_norm(x, d, nw, 1e-5, 0.0);
    EXPECT_TRUE(torch::equal(s, s_ref)) << "K=" << K;
    EXPECT_TRUE(torch::equal(y, cuda::fused_gemv(xn, w))) << "K=" << K;
  }
}

// Inputs the fused norm + GEMV does not serve go back to the two launches (layers_common.cpp's add_rms_norm_linear).
TEST_F(FusedOps, gemvNormDeclinesWhatItCannotServe) {
  const auto bf = torch::kBFloat16;
  auto x = randn({1, 2048}, bf), nw = randn({2048}, bf), w = randn({64, 2048}, bf);
  EXPECT_TRUE(cuda::fused_norm_gemv_pays(x, randn({1, 2048}, bf), nw, w));
  EXPECT_FALSE(cuda::fused_norm_gemv_pays(randn({2, 2048}, bf), {}, nw, w)) << "two rows: cuBLAS";
  EXPECT_FALSE(cuda::fused_norm_gemv_pays(x, randn({1, 2049}, bf).narrow(1, 1, 2048), nw, w)) << "delta unaligned";
  EXPECT_FALSE(cuda::fused_norm_gemv_pays(x, randn({1, 2048}, torch::kHalf), nw, w)) << "delta of another dtype";
  EXPECT_FALSE(cuda::fused_norm_gemv_pays(x, {}, randn({2040}, bf), w)) << "norm weight of another size";
  auto xl = randn({1, 12296}, bf);
  EXPECT_FALSE(cuda::fused_norm_gemv_pays(xl, {}, randn({12296}, bf), randn({8, 12296}, bf)))
      << "a row beyond the shared memory";
}

TEST_F(FusedOps, unsupportedInputsAreDeclined) {
  auto x = randn({4, 64}, torch::kBFloat16);
  EXPECT_TRUE(cuda::fused_layer_ops_apply({x, randn({64}, torch::kBFloat16)}));
  EXPECT_FALSE(cuda::fused_layer_ops_apply({x.to(torch::kFloat32)})) << "fp32 stays on LibTorch";
  EXPECT_FALSE(cuda::fused_layer_ops_apply({x, randn({64}, torch::kHalf)})) << "mixed dtypes";
  EXPECT_FALSE(cuda::fused_layer_ops_apply({x.t()})) << "last dim not contiguous";
  EXPECT_FALSE(cuda::fused_layer_ops_apply({x.cpu()})) << "CPU tensors";
  auto packed = randn({3, 3, 5, 40}, torch::kBFloat16);
  EXPECT_FALSE(cuda::fused_layer_ops_apply({packed.narrow(1, 0, 2).narrow(2, 0, 4).narrow(3, 0, 8)}))
      << "three stride levels";
  EXPECT_TRUE(cuda::fused_layer_ops_apply({packed.narrow(2, 0, 4).narrow(3, 0, 8)})) << "two levels";
}
#else
TEST(FusedOps, skippedWithoutKernels) { GTEST_SKIP() << "built without the CUDA kernels"; }
#endif

}  // namespace
}  // namespace statecut
