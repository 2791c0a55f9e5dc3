// The optimisation half of the recipe (optimized/train/optimizer.h) against its formulas written out in double:
// gradient clipping on a gradient of known norm (3-4-12-... Pythagorean values: ‖g‖ = 13 exactly), AdamW two steps
// on f64 parameters (PyTorch's formula step for step, incl. the decoupled weight decay and both bias corrections;
// the same f64 operations in another order: 1e-15 relative), and the warmup + cosine schedule at its corners.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "optimized/train/optimizer.h"

namespace statecut {
namespace {

torch::Tensor param_with_grad(std::vector<double> value, std::vector<double> grad) {
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  auto p = torch::tensor(value, f64).requires_grad_();
  p.mutable_grad() = torch::tensor(grad, f64);
  return p;
}

TEST(Train_Optimizer, clipScalesTheGradientsToMaxNormAndReturnsTheNormBefore) {
  // one tensor's gradient (3, 4), another's (12): ‖g‖ = sqrt(9 + 16 + 144) = 13
  std::vector<torch::Tensor> ps = {param_with_grad({1, 2}, {3, 4}), param_with_grad({5}, {12}),
                                   torch::zeros({3}, torch::kFloat64).requires_grad_()};  // no gradient: counts 0
  EXPECT_EQ(grad_norm(ps), 13.0);
  EXPECT_EQ(clip_grad_norm(ps, 20.0), 13.0);  // below the limit: untouched
  EXPECT_TRUE(torch::equal(ps[0].grad(), torch::tensor({3.0, 4.0}, torch::kFloat64)));
  EXPECT_EQ(clip_grad_norm(ps, 1.0), 13.0);
  const double c = 1.0 / (13.0 + 1e-6);
  EXPECT_NEAR(ps[0].grad()[0].item<double>(), 3 * c, 1e-15);
  EXPECT_NEAR(ps[0].grad()[1].item<double>(), 4 * c, 1e-15);
  EXPECT_NEAR(ps[1].grad()[0].item<double>(), 12 * c, 1e-15);
  EXPECT_NEAR(grad_norm(ps), 13.0 * c, 1e-14);
}

// A NaN or Inf anywhere makes the norm non-finite: reported as such (the trainer then skips the step, flame's
// skip_nan_inf) and no gradient is scaled by it.
TEST(Train_Optimizer, nonFiniteNormIsReportedAndScalesNothing) {
  for (double bad : {std::nan(""), HUGE_VAL}) {
    std::vector<torch::Tensor> ps = {param_with_grad({1, 2}, {3, 4}), param_with_grad({5}, {bad})};
    EXPECT_FALSE(std::isfinite(clip_grad_norm(ps, 1.0)));
    EXPECT_TRUE(torch::equal(ps[0].grad(), torch::tensor({3.0, 4.0}, torch::kFloat64)));
  }
}

TEST(Train_Optimizer, adamwFollowsPytorchsFormulaStepForStep) {
  const AdamWConfig cfg;  // β 0.9 / 0.95, eps 1e-15, weight decay 0.1
  auto p = param_with_grad({0.5, -2.0, 3.0}, {0.1, -0.3, 0.0});
  AdamW opt({{"w", p}}, cfg);
  std::vector<double> x = {0.5, -2.0, 3.0}, m(3, 0.0), v(3, 0.0);
  const std::vector<std::vector<double>> grads = {{0.1, -0.3, 0.0}, {-0.2, 0.05, 1.5}};
  const double lrs[] = {1e-2, 3e-3};
  for (int s = 0; s < 2; ++s) {
    p.mutable_grad() = torch::tensor(grads[s], torch::kFloat64);
    opt.step(lrs[s]);
    const double bc1 = 1 - std::pow(cfg.beta1, s + 1), bc2 = 1 - std::pow(cfg.beta2, s + 1);
    for (int i = 0; i < 3; ++i) {
      const double g = grads[s][i];
      x[i] *= 1 - lrs[s] * cfg.weight_decay;
      m[i] = cfg.beta1 * m[i] + (1 - cfg.beta1) * g;
      v[i] = cfg.beta2 * v[i] + (1 - cfg.beta2) * g * g;
      x[i] -= lrs[s] / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + cfg.eps);
      EXPECT_NEAR(p[i].item<double>(), x[i], 1e-15 * std::abs(x[i])) << "step " << s + 1 << " element " << i;
    }
  }
  EXPECT_EQ(opt.steps(), 2);
}

// A resumed run's moments: state() names them "<param>.exp_avg" and ".exp_avg_sq", load_state restores them and the
// step count, and a moment missing or of another shape is named (ci/mutate seed 341: the message named the next
// parameter's moment and survived).
TEST(Train_Optimizer, loadStateRestoresTheMomentsAndNamesAMissingOrMisshapenOne) {
  auto a = param_with_grad({1, 2}, {0.5, -1}), b = param_with_grad({3}, {2});
  AdamW trained({{"a", a}, {"b", b}}, AdamWConfig{});
  trained.step(1e-2);
  const auto state = trained.state();
  ASSERT_EQ(state.size(), 4u);
  EXPECT_EQ(state[0].first, "a.exp_avg");
  EXPECT_EQ(state[3].first, "b.exp_avg_sq");
  AdamW resumed({{"a", a.detach().clone()}, {"b", b.detach().clone()}}, AdamWConfig{});
  resumed.load_state(state, 7);
  EXPECT_EQ(resumed.steps(), 7);
  const auto back = resumed.state();
  for (size_t i = 0; i < state.size(); ++i) EXPECT_TRUE(torch::equal(back[i].second, state[i].second)) << state[i].first;
  const auto message = [&](size_t drop, bool reshape) {
    auto st = state;
    if (reshape) st[drop].second = torch::zeros({5}, torch::kFloat64);
    else st.erase(st.begin() + static_cast<std::ptrdiff_t>(drop));
    try {
      resumed.load_state(st, 1);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message(0, false), "optimizer state: missing 'a.exp_avg'");
  EXPECT_EQ(message(3, false), "optimizer state: missing 'b.exp_avg_sq'");
  EXPECT_EQ(message(1, true), "optimizer state: 'a.exp_avg_sq' has the wrong shape");
}

TEST(Train_Optimizer, cosineScheduleWarmsUpThenDecaysToItsFloor) {
  const double lr = 1e-3, m = 0.1;
  // 101 steps, warmup 1: the decay spans steps 1..101, half-way at 51
  EXPECT_DOUBLE_EQ(cosine_lr(lr, 0, 101, 1, m), lr * 1 / 2);  // warmup: lr (s + 1) / (W + 1)
  EXPECT_DOUBLE_EQ(cosine_lr(lr, 1, 101, 1, m), lr);          // first step after warmup: the peak
  EXPECT_NEAR(cosine_lr(lr, 51, 101, 1, m), lr * (m + (1 - m) * 0.5), 1e-15);  // half-way: cos(π/2)
  EXPECT_NEAR(cosine_lr(lr, 101, 101, 1, m), lr * m, 1e-15);                 // the end: min_lr_ratio × lr
  EXPECT_LT(cosine_lr(lr, 30, 101, 1, m), cosine_lr(lr, 29, 101, 1, m));   // decreasing in between
}

}  // namespace
}  // namespace statecut
