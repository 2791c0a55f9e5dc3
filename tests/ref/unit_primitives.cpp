// Unit tests of reference/primitives: hand-computed cases (integer-valued where the arithmetic is exact),
// overflow-free activations at +-large, fla's l2norm eps convention, conv history = conv of the concatenation,
// gated RMSNorm in both orders and with groups.
#include <cmath>

#include "reference/primitives.h"
#include "tests/ref/ref_test_util.h"

namespace statecut::ref {
namespace {

using test::kEps;

TEST(Unit_Activation, sigmoidIsFiniteAndSymmetricAtLargeArguments) {
  Vec x(5);
  x << -800.0, -30.0, 0.0, 30.0, 800.0;
  const Vec s = sigmoid(x);
  for (Index i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(std::isfinite(s(i))) << x(i);
    EXPECT_NEAR(s(i) + sigmoid(Vec::Constant(1, -x(i)))(0), 1.0, 2 * kEps) << x(i);  // sigma(x) + sigma(-x) = 1
  }
  EXPECT_EQ(s(2), 0.5);
  EXPECT_EQ(s(4), 1.0);
  EXPECT_EQ(s(0), 0.0);                                     // exp(-800) underflows to 0, not NaN
  const double e30 = std::exp(-30.0);
  EXPECT_NEAR(s(1) / (e30 / (1.0 + e30)), 1.0, 4 * kEps);  // sigma(-30) = e^-30 / (1 + e^-30)
}

TEST(Unit_Activation, siluIsXTimesSigmoid) {
  Mat x(1, 4);
  x << -800.0, 0.0, 2.0, 800.0;
  const Mat y = silu(x);
  EXPECT_EQ(y(0, 0), 0.0);
  EXPECT_EQ(y(0, 1), 0.0);
  EXPECT_NEAR(y(0, 2), 2.0 / (1.0 + std::exp(-2.0)), 2 * kEps);
  EXPECT_EQ(y(0, 3), 800.0);
}

TEST(Unit_Activation, softplusIsExactAtLargeMagnitude) {
  EXPECT_NEAR(softplus(0.0), std::log(2.0), kEps);
  EXPECT_EQ(softplus(1000.0), 1000.0);  // naive log(1 + exp(1000)) overflows to inf
  EXPECT_EQ(softplus(-1000.0), 0.0);    // e^-1000 underflows; the result stays a finite 0, never negative
  const double e30 = std::exp(-30.0);  // log1p keeps the tiny tail accurate: log(1 + e) = e - e^2/2 + ...
  EXPECT_NEAR(softplus(-30.0) / (e30 - 0.5 * e30 * e30), 1.0, 4 * kEps);
  EXPECT_NEAR(softplus(30.0) - 30.0, std::exp(-30.0), 1e-14 * std::exp(-30.0) + 30 * kEps);
  EXPECT_NEAR(softplus(5.3) - softplus(-5.3), 5.3, 8 * kEps);  // softplus(x) - softplus(-x) = x
}

TEST(Unit_Activation, gdnLogDecayIsMinusExpALogTimesSoftplus) {
  Vec a(3);
  a << 0.0, 100.0, -1000.0;
  const Vec g = gdn_log_decay(a, std::log(3.0), 0.5);
  EXPECT_NEAR(g(0), -3.0 * softplus(0.5), 4 * kEps);
  EXPECT_NEAR(g(1) / -301.5, 1.0, 4 * kEps);  // softplus(100.5) = 100.5 to double precision
  EXPECT_EQ(g(2), -0.0);                       // no decay at all: exp(g) = 1
  const Vec g0 = gdn_log_decay(Vec::Zero(1), 0.0, 0.0);
  EXPECT_NEAR(g0(0), -std::log(2.0), kEps);
}

TEST(Unit_Conv, handComputedIntegerCase) {
  Mat x(4, 2);
  x << 1, 2, 3, 4, 5, 6, 7, 8;
  Mat w(2, 3);  // w(c, 2) multiplies the current token
  w << 1, 2, 3, 0, 1, -1;
  Vec b(2);
  b << 10, 0;
  Mat expect(4, 2);
  expect << 13, -2, 21, -2, 32, -2, 44, -2;  // 10 + x_{t-2} + 2 x_{t-1} + 3 x_t ;  x_{t-1} - x_t
  EXPECT_EQ(causal_depthwise_conv(x, w, &b, false), expect);
  EXPECT_EQ(causal_depthwise_conv(x, w, &b, true), silu(expect));
  Mat nobias = expect;
  nobias.col(0).array() -= 10;
  EXPECT_EQ(causal_depthwise_conv(x, w, nullptr, false), nobias);
}

TEST(Unit_Conv, historyEqualsConvOfConcatenation) {
  test::Rng rng(test::test_seed(11, "Unit_Conv.historyEqualsConvOfConcatenation"));
  const Index C = 5, W = 4;
  const Mat w = rng.normal(C, W);
  const Vec b = rng.normal(C, 1);
  for (Index T1 : {3, 7}) {  // history shorter than the whole x1, and exactly W-1 rows
    const Mat x1 = rng.normal(T1, C), x2 = rng.normal(6, C);
    Mat cat(T1 + 6, C);
    cat << x1, x2;
    const Mat hist = x1.bottomRows(W - 1);
    const Mat whole = causal_depthwise_conv(cat, w, &b, true);
    // Same sums in the same order: bitwise equal.
    EXPECT_EQ(causal_depthwise_conv(x2, w, &b, true, &hist), whole.bottomRows(6)) << "T1=" << T1;
  }
  // A zero history is the same as none.
  const Mat x = rng.normal(5, C);
  const Mat zeros = Mat::Zero(W - 1, C);
  EXPECT_EQ(causal_depthwise_conv(x, w, nullptr, false, &zeros), causal_depthwise_conv(x, w, nullptr, false));
}

TEST(Unit_Conv, singleTapIsPointwiseScale) {
  Mat x(2, 2);
  x << 1, -2, 3, 4;
  Mat w(2, 1);
  w << 2, -1;
  const Mat hist(0, 2);
  Mat expect(2, 2);
  expect << 2, 2, 6, -4;
  EXPECT_EQ(causal_depthwise_conv(x, w, nullptr, false, &hist), expect);
}

TEST(Unit_Norm, l2normPutsEpsInsideTheSquareRoot) {
  Mat x(3, 2);
  x << 3, 4, 0, 0, 1e-4, 0;
  const Mat y = l2norm_rows(x);  // fla: x / sqrt(sum x^2 + 1e-6), not x / max(||x||, eps)
  EXPECT_EQ(y(0, 0), 3.0 / std::sqrt(25.0 + 1e-6));
  EXPECT_NE(y(0, 0), 0.6);
  EXPECT_EQ(y.row(1), Eigen::RowVector2d(0, 0));  // a zero row stays zero, no NaN
  EXPECT_NEAR(y(2, 0), 1e-4 / std::sqrt(1e-8 + 1e-6), 4 * kEps);  // eps dominates a tiny row
  const Mat y0 = l2norm_rows(x.topRows(1), 0.0);
  EXPECT_NEAR(y0(0, 0), 0.6, kEps);
  EXPECT_NEAR(y0(0, 1), 0.8, kEps);
}

TEST(Unit_Norm, rmsnormHandComputed) {
  Mat x = Mat::Constant(2, 4, 2.0);
  x.row(1).setConstant(1.0);
  Vec w(4);
  w << 1, 2, 3, 4;
  const Mat y = rmsnorm_rows(x, w, 0.0);
  EXPECT_EQ(y.row(0), w.transpose());                 // rms of [2 2 2 2] is 2
  EXPECT_EQ(rmsnorm_rows(x.bottomRows(1), w, 3.0), 0.5 * w.transpose());  // 1 / sqrt(1 + 3)
  EXPECT_EQ(rmsnorm_rows(Mat(3, 0), Vec(0), 1e-6).rows(), 3);
}

TEST(Unit_Norm, gatedRmsnormBothOrdersHandComputed) {
  // silu(40) = 40 exactly in double (sigma(40) rounds to 1), silu(0) = 0.
  Mat x(1, 4), z(1, 4);
  x << 1, 1, 2, 2;
  z << 40, 40, 0, 0;
  Vec w(4);
  w << 1, 2, 3, 4;
  const double r = std::sqrt(2.5);  // rms of [1 1 2 2]
  Mat before(1, 4), after(1, 4);
  before << 40 / r, 80 / r, 0, 0;   // rmsnorm(x) * w * silu(z)
  after << std::sqrt(2.0), 2 * std::sqrt(2.0), 0, 0;  // x*silu(z) = [40 40 0 0], rms = 20 sqrt(2)
  EXPECT_NEAR(test::rel_err(gated_rmsnorm_rows(x, z, w, 0.0, true), before), 0, 4 * kEps);
  EXPECT_NEAR(test::rel_err(gated_rmsnorm_rows(x, z, w, 0.0, false), after), 0, 4 * kEps);
}

TEST(Unit_Norm, gatedRmsnormGroupsNormaliseEachGroupAlone) {
  Mat x(1, 4), z = Mat::Constant(1, 4, 40.0);
  x << 1, 1, 2, 2;
  Vec w(4);
  w << 1, 2, 3, 4;
  // Groups of 2: [1 1] and [2 2] both normalise to [1 1].
  EXPECT_EQ(gated_rmsnorm_rows(x, z, w, 0.0, true, 2), 40.0 * w.transpose());
  Mat z2(1, 4);
  z2 << 40, 40, 0, 0;
  Mat after(1, 4);
  after << 1, 2, 0, 0;  // [40 40] -> [1 1]; the gated-off group [0 0] stays 0 thanks to eps
  EXPECT_NEAR(test::rel_err(gated_rmsnorm_rows(x, z2, w, 1e-6, false, 2), after), 0, 1e-8);  // eps/800 relative
  // group_size = C is the whole row.
  EXPECT_EQ(gated_rmsnorm_rows(x, z2, w, 1e-6, false, 4), gated_rmsnorm_rows(x, z2, w, 1e-6, false, 0));
  EXPECT_EQ(gated_rmsnorm_rows(Mat(2, 0), Mat(2, 0), Vec(0), 1e-6).rows(), 2);
}

TEST(Unit_Channels, keepColumnsSelectsInTheGivenOrder) {
  Mat x(2, 4);
  x << 0, 1, 2, 3, 10, 11, 12, 13;
  Mat expect(2, 2);
  expect << 3, 0, 13, 10;
  EXPECT_EQ(keep_columns(x, {3, 0}), expect);
  EXPECT_EQ(keep_columns(x, {0, 1, 2, 3}), x);
  EXPECT_EQ(keep_columns(x, {}).cols(), 0);
}

}  // namespace
}  // namespace statecut::ref
