// The decode fold (kernels/gated_delta.h, GatedDeltaArgs::fold): a decode step's short conv and output norm inside the
// decode kernel's launch must be, bit for bit, the three launches it replaces — fused_conv1d_step (SiLU) over the
// stacked q | k | v window, the decode kernel, then fused_rms_norm or fla's fused_gated_rms_norm — in the normalised
// output, the state and the shifted window alike.
//
// Why exact: the fold runs the same fp32 operations in the same order as those kernels (the conv's window sum in
// order, the input last, then the bias; the norm's sum of squares as its warp forms 8-wide rows) and rounds where they
// round, so there is no tolerance to state; a wrong channel offset, a dropped bias, an unshifted window or a norm over
// the wrong columns changes whole elements.
// Inputs as a model has them: q, k, v, beta, the gate input a and the output gate z are slices of one packed
// projection row per sequence (token-strided views); z first in the row so that its rows stay 16-byte aligned and the
// norm kernel takes its 8-wide path, the one the fold reproduces (dk = 89 leaves q, k and v unaligned: the conv kernel
// then reads one channel per thread, same arithmetic).
// Shapes: dk 128 / dv 128 (DeltaNet 1.3B's head), dk 64 (its 50% prune), dk 89 (odd), dk 256 with dv 32, dv 72 (nine
// 8-wide vectors: lanes past them hold none), dv 8, dk 200 (three conv channels a thread); batch 1, 5 and 7; fla DeltaNet's beta
// (rounded sigmoid) and Gated DeltaNet's gate formed in the kernel; fp16 once. (A bf16 state is refused: the models
// carry fp32 states, and the fold's instances are built for those only.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include "tests/gpu/cuda_ready.h"
#include "tests/gpu/row_kernel_inputs.h"
#include "tests/test_env.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include "kernels/binding/fused_layer_ops_torch.h"
#include "kernels/binding/gated_delta_torch.h"
#endif

namespace statecut {
namespace {

#ifdef STATECUT_WITH_CUDA_KERNELS
using torch::indexing::Slice;
using test::randn;

struct FoldCase {
  int64_t B, H, dk, dv, W;
  bool bias, gate_z, gated, l2;
  torch::Dtype dtype = torch::kBFloat16;
  std::string str() const {
    std::ostringstream s;
    s << "B=" << B << " H=" << H << " dk=" << dk << " dv=" << dv << " W=" << W << " bias=" << bias << " z=" << gate_z
      << " gated=" << gated << " l2=" << l2 << (dtype == torch::kHalf ? " fp16" : " bf16");
    return s.str();
  }
};

/// One packed projection row per sequence: [z | q | k | v | beta | a | pad], the pieces as views of it.
struct Projection {
  torch::Tensor row, z, qkv, q, k, v, beta, a;
};

Projection make_projection(const FoldCase& c) {
  const int64_t Cq = c.H * c.dk, Cv = c.H * c.dv, Cz = c.gate_z ? Cv : 0;
  const int64_t width = (Cz + 2 * Cq + Cv + 2 * c.H + 7) / 8 * 8;
  Projection p;
  p.row = randn({c.B, 1, width}, c.dtype);
  int64_t off = 0;
  auto take = [&](int64_t n) {
    auto t = p.row.index({Slice(), Slice(), Slice(off, off + n)});
    off += n;
    return t;
  };
  if (c.gate_z) p.z = take(Cz).view({c.B, 1, c.H, c.dv});
  p.qkv = p.row.index({Slice(), Slice(), Slice(off, off + 2 * Cq + Cv)});
  p.q = take(Cq).view({c.B, 1, c.H, c.dk});
  p.k = take(Cq).view({c.B, 1, c.H, c.dk});
  p.v = take(Cv).view({c.B, 1, c.H, c.dv});
  p.beta = take(c.H);
  p.a = take(c.H);
  return p;
}

class DecodeFoldCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::cuda_ready()) GTEST_SKIP() << "no CUDA device or kernels not built";
    torch::manual_seed(static_cast<uint64_t>(test::env_seed(20261204)));
  }
};

/// One layer's weights and, for each path, its own state and conv window, carried from step to step.
struct FoldRun {
  FoldCase c;
  torch::Tensor conv_w, conv_b, norm_w, A_log, dt_bias;
  torch::Tensor state_ref, state_fold, window_ref, window_fold;

  explicit FoldRun(const FoldCase& fc) : c(fc) {
    const int64_t C = 2 * c.H * c.dk + c.H * c.dv;
    conv_w = randn({C, 1, c.W}, c.dtype, 0.5);
    if (c.bias) conv_b = randn({C}, c.dtype, 0.2);
    norm_w = randn({c.dv}, c.dtype);
    A_log = torch::randn({c.H}, torch::dtype(torch::kFloat32).device(torch::kCUDA)) * 0.5;
    dt_bias = torch::randn({c.H}, torch::dtype(torch::kFloat32).device(torch::kCUDA)) * 0.5;
    state_ref = (torch::randn({c.B, c.H, c.dk, c.dv}) * 0.1).to(torch::kCUDA);
    state_fold = state_ref.clone();
    window_ref = randn({c.B, c.W - 1, C}, c.dtype);
    window_fold = window_ref.clone();
  }

  /// A fresh projection row through the three launches and through the fold; every output compared bit for bit.
  void step() {
    const auto p = make_projection(c);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.dk)), eps = 1e-5;
    const c10::optional<at::Tensor> none;
    const auto opt = [](const torch::Tensor& t) { return c10::optional<at::Tensor>(t); };
    const auto gate_a = c.gated ? opt(p.a) : none;
    const auto A = c.gated ? opt(A_log) : none;
    const auto dt = c.gated ? opt(dt_bias) : none;
    const bool round_beta = !c.gated;  // fla DeltaNet rounds its sigmoid to the model dtype, Gated DeltaNet does not

    const auto y = cuda::fused_conv1d_step(p.qkv, conv_w, conv_b, /*silu=*/true, window_ref);
    const int64_t Cq = c.H * c.dk;
    const auto q = y.narrow(-1, 0, Cq).view({c.B, 1, c.H, c.dk});
    const auto k = y.narrow(-1, Cq, Cq).view({c.B, 1, c.H, c.dk});
    const auto v = y.narrow(-1, 2 * Cq, c.H * c.dv).view({c.B, 1, c.H, c.dv});
    const auto o = cuda::gated_delta_rule_decode_(q, k, v, gate_a, opt(p.beta), scale, state_ref, none, c.l2, c.gated,
                                                  A, dt, /*use_beta_sigmoid_in_kernel=*/true, false, round_beta);
    const auto ref = c.gate_z ? cuda::fused_gated_rms_norm(o, p.z, norm_w, eps) : cuda::fused_rms_norm(o, norm_w, eps);

    const cuda::DecodeFold fold{window_fold, conv_w, conv_b, 0, Cq, 2 * Cq, norm_w, eps, p.z};
    const auto got = cuda::gated_delta_rule_decode_(p.q, p.k, p.v, gate_a, opt(p.beta), scale, state_fold, none,
                                                    c.l2, c.gated, A, dt, true, false, round_beta, /*delta=*/true,
                                                    /*beta_dt=*/false, &fold);

    EXPECT_TRUE(torch::equal(got, ref)) << c.str() << ": max |diff| "
                                        << (got.to(torch::kFloat32) - ref.to(torch::kFloat32)).abs().max().item<float>();
    EXPECT_TRUE(torch::equal(state_fold, state_ref)) << c.str() << ": state";
    EXPECT_TRUE(torch::equal(window_fold, window_ref)) << c.str() << ": conv window";
  }
};

TEST_F(DecodeFoldCuda, foldedStepIsTheConvTheStepAndTheNormBitForBit) {
  const FoldCase cases[] = {
      {1, 2, 128, 128, 4, false, false, false, true},                   // DeltaNet 1.3B's head, batch 1
      {5, 2, 128, 128, 4, true, false, false, true},                    // with conv biases, batch 5
      {5, 3, 64, 128, 4, false, false, false, true},                    // its 50% prune
      {5, 2, 89, 64, 4, true, true, false, true},                       // odd dk, gated norm
      {5, 2, 256, 32, 4, false, true, true, true},                      // Gated DeltaNet's dk, gate in the kernel
      {5, 2, 32, 72, 4, true, true, true, false},                       // nine 8-wide vectors, no l2
      {5, 4, 16, 8, 4, true, false, false, true},                       // dv 8
      {7, 1, 200, 128, 4, true, false, false, true},                    // three channels a thread (dk 200)
      {5, 2, 128, 128, 4, true, true, true, true, torch::kHalf},        // fp16
  };
  for (const auto& c : cases) FoldRun(c).step();
}

// Four steps in a row, each path carrying its own state and window: what the fold shifted into its window and wrote
// into its state is what its next step reads, step after step.
TEST_F(DecodeFoldCuda, consecutiveFoldedStepsCarryTheWindowAndTheState) {
  FoldRun run(FoldCase{3, 2, 128, 64, 4, true, true, false, true});
  for (int step = 0; step < 4; ++step) run.step();
}

/// A DeltaNet-style folded step on p with `state` and `fold` must be refused with a message holding `needle`.
void expect_fold_refused(const Projection& p, at::Tensor& state, const cuda::DecodeFold& fold,
                         const std::string& needle) {
  const c10::optional<at::Tensor> none;
  try {
    cuda::gated_delta_rule_decode_(p.q, p.k, p.v, none, c10::optional<at::Tensor>(p.beta), 0.125, state, none, true,
                                   false, none, none, true, false, true, true, false, &fold);
    ADD_FAILURE() << "folded, expected a refusal naming '" << needle << "'";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST_F(DecodeFoldCuda, shapesOneBlockCannotOwnAreRefused) {
  EXPECT_TRUE(cuda::decode_fold_fits(2, 2, 128, 4));
  EXPECT_FALSE(cuda::decode_fold_fits(2, 4, 128, 4));   // grouped values share q and k: blocks would race on them
  EXPECT_FALSE(cuda::decode_fold_fits(2, 2, 256, 4));   // two blocks a head: the norm spans both
  EXPECT_FALSE(cuda::decode_fold_fits(2, 2, 68, 4));    // not 8-wide vectors: the norm kernel sums another way
  EXPECT_FALSE(cuda::decode_fold_fits(2, 2, 128, 2));   // its conv width is compiled in: 4
  const FoldCase c{2, 2, 64, 256, 4, false, false, false, true};
  const auto p = make_projection(c);
  const int64_t C = 2 * 2 * 64 + 2 * 256;
  auto window = randn({2, 3, C}, c.dtype);
  auto state = torch::zeros({2, 2, 64, 256}, torch::dtype(torch::kFloat32).device(torch::kCUDA));
  const cuda::DecodeFold fold{window, randn({C, 1, 4}, c.dtype), torch::Tensor(), 0, 128, 256, randn({256}, c.dtype),
                              1e-6, torch::Tensor()};
  expect_fold_refused(p, state, fold, "value dim of at most 128");
}

TEST_F(DecodeFoldCuda, aBf16StateIsRefused) {
  FoldRun run(FoldCase{2, 2, 64, 64, 4, false, false, false, true});
  auto state = run.state_ref.to(torch::kBFloat16);
  const auto p = make_projection(run.c);
  const cuda::DecodeFold fold{run.window_fold, run.conv_w, run.conv_b, 0, 128, 256, run.norm_w, 1e-6, torch::Tensor()};
  expect_fold_refused(p, state, fold, "fp32 state");
}
#else
TEST(DecodeFoldCuda, skippedWithoutKernels) { GTEST_SKIP() << "built without the CUDA kernels"; }
#endif

}  // namespace
}  // namespace statecut
