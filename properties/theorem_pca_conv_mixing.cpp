// Prop. B.1: for T [r, dk] with orthonormal rows and a depthwise filter tap w [dk], the rotated operator
// M = T diag(w) T^T is not diagonal; its best diagonal approximation in Frobenius norm is diag(M),
// whose entries are sum_b T_ab^2 w_b, i.e. the weights T_ab^2 that pca_conv_mixing uses. Optimality
// is checked against random diagonal perturbations D + delta: ||M - D - delta||_F^2 = ||M - D||_F^2 +
// ||delta||^2 (Pythagoras, the off-diagonal residual is orthogonal to every diagonal).
#include "properties/master_seed.h"
#include "reference/pca.h"
#include "tests/ref/selector_util.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

namespace {
using namespace statecut::ref;

RC_GTEST_PROP(Theorem_PcaConvMixing, squaredRotationWeightsGiveTheOptimalDiagonal, ()) {
  const Index dk = *rc::gen::inRange(1, 40), r = *rc::gen::inRange<Index>(1, dk + 1);
  const Index taps = *rc::gen::inRange(1, 5);
  SelectRng rng(*rc::gen::arbitrary<std::uint64_t>(), 0);
  const Mat T = statecut::test::orthonormal(dk, r, rng).transpose();
  const Mat w = statecut::test::gaussian(dk, taps, rng);
  const Mat mixed = pca_conv_mixing(T, w);
  RC_ASSERT(mixed.rows() == r && mixed.cols() == taps);
  double worst_gain = 1e300;
  for (Index t = 0; t < taps; ++t) {
    const Mat M = rotated_conv_tap(T, w.col(t));
    const Vec d = mixed.col(t);
    RC_ASSERT((d - M.diagonal()).norm() <= 1e-13 * (1 + M.norm()));
    const double best = (M - Mat(d.asDiagonal())).squaredNorm();
    for (int trial = 0; trial < 8; ++trial) {
      const Vec delta = statecut::test::gaussian(r, 1, rng) * std::pow(10.0, -(trial % 4));
      const double other = (M - Mat((d + delta).asDiagonal())).squaredNorm();
      RC_ASSERT(other >= best);
      RC_ASSERT(std::abs(other - best - delta.squaredNorm()) <= 1e-10 * (1 + other));
      worst_gain = std::min(worst_gain, (other - best) / (1e-300 + best));
    }
  }
  RC_CLASSIFY(r == dk, "full rotation");
  RC_CLASSIFY(worst_gain < 1e-3, "perturbation within 0.1% of optimum (tight)");
}

TEST(Theorem_PcaConvMixing, depthwiseFilterDoesNotCommuteWithARotation) {
  // the reason for the approximation: T diag(w) T^T is diagonal only if w is constant on T's support
  Mat T(2, 2);
  T << std::sqrt(0.5), std::sqrt(0.5), -std::sqrt(0.5), std::sqrt(0.5);
  Vec w(2);
  w << 1.0, 3.0;
  const Mat M = rotated_conv_tap(T, w);
  EXPECT_NEAR(M(0, 1), 1.0, 1e-15);  // off-diagonal (3 - 1)/2
  const Mat mixed = pca_conv_mixing(T, w);
  EXPECT_NEAR(mixed(0, 0), 2.0, 1e-15);
  EXPECT_NEAR(mixed(1, 0), 2.0, 1e-15);
}

}  // namespace
