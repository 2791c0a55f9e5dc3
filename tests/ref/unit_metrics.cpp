// Unit_Metrics: the state metrics of paper §2.2 on hand-computed cases (diagonal states, projectors onto
// coordinate axes) and their documented guards (zero, non-finite, empty, singular, bad shapes).
#include <cmath>
#include <limits>

#include "reference/metrics.h"
#include "tests/ref/ref_test_util.h"

namespace statecut::ref {
namespace {

using test::kEps;

Mat diag(double a, double b) { return Eigen::Vector2d(a, b).asDiagonal(); }

TEST(Unit_Metrics, effectiveRankAndUtilizationOfADiagonalState) {
  const Mat S = diag(3, 4);  // ||S||_F^2 = 25, ||S||_2 = 4
  EXPECT_NEAR(effective_rank(S), 25.0 / 16.0, 4 * kEps);
  EXPECT_NEAR(rank_utilization(S), 25.0 / 32.0, 4 * kEps);
  EXPECT_NEAR(condition_number(S), 4.0 / 3.0, 4 * kEps);
  Mat wide = Mat::Zero(2, 5);  // u divides by min(dk, dv) = 2
  wide(0, 0) = 1;
  wide(1, 3) = 1;
  EXPECT_NEAR(effective_rank(wide), 2.0, 4 * kEps);
  EXPECT_NEAR(rank_utilization(wide), 1.0, 4 * kEps);
}

TEST(Unit_Metrics, guardsFollowThePaperScript) {
  EXPECT_EQ(effective_rank(Mat::Zero(3, 2)), 0.0);
  EXPECT_EQ(rank_utilization(Mat::Zero(3, 2)), 0.0);
  EXPECT_TRUE(std::isnan(rank_utilization(Mat(0, 3))));
  Mat bad = diag(1, 2);
  bad(0, 1) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(std::isnan(effective_rank(bad)));
  EXPECT_TRUE(std::isnan(condition_number(bad)));
  EXPECT_TRUE(std::isnan(condition_number(Mat(0, 0))));
  EXPECT_TRUE(std::isinf(condition_number(diag(1, 0))));
  EXPECT_NEAR(condition_number(diag(1, 1e-8)) / 1e8, 1.0, 1e-12);  // Jacobi SVD: small singular values accurate
}

TEST(Unit_Metrics, nuIsEffectiveRankOfVProjectedOnKsColumnSpace) {
  Mat K = Mat::Zero(3, 1);
  K(0, 0) = 2;  // column space = span(e1) in R^T
  Mat V(3, 2);
  V << 1, 2, 3, 4, 5, 6;
  EXPECT_NEAR(nu(V, K), 1.0, 4 * kEps);           // V_par = [[1 2][0 0][0 0]] has rank 1
  EXPECT_NEAR(nu(V, Mat::Identity(3, 3)), effective_rank(V), 8 * kEps);  // full column space: V itself
  Mat Vperp = Mat::Zero(3, 2);
  Vperp(1, 0) = 1;
  EXPECT_EQ(nu(Vperp, K), 0.0);                    // orthogonal to span(K): nothing survives
  STATECUT_EXPECT_SHAPE_ERROR(nu(V, Mat::Ones(2, 1)), "nu: V and K");
}

TEST(Unit_Metrics, readoutAmplificationHandComputedAndMaximisedByThePair) {
  const Mat S = diag(2, 1);
  const Vec e1 = Eigen::Vector2d(1, 0), e2 = Eigen::Vector2d(0, 1);
  EXPECT_NEAR(readout_amplification(S, e1, e2), 0.5, 4 * kEps);  // ||S^T e2|| / ||S^T e1||
  EXPECT_NEAR(readout_amplification(S, e2, e1), 2.0, 4 * kEps);  // = kappa(S), Prop. 2.1
  EXPECT_TRUE(std::isinf(readout_amplification(diag(1, 0), e2, e1)));  // readout of q is zero
  STATECUT_EXPECT_SHAPE_ERROR(readout_amplification(S, Vec::Ones(3), e1), "readout_amplification");
  const AmplificationPair p = max_amplification_pair(S);
  EXPECT_NEAR(std::abs(p.q(1)), 1.0, 4 * kEps);
  EXPECT_NEAR(std::abs(p.eps(0)), 1.0, 4 * kEps);
  EXPECT_NEAR(readout_amplification(S, p.q, p.eps), condition_number(S), 8 * kEps);
  EXPECT_GE(condition_number(S), 1.0 / std::sqrt(rank_utilization(S)));
}

// state_spectrum takes one SVD for what the separate functions compute with one each: the same figures on a
// graded rectangular state (dk = 89 x dv = 64: u divides by 64), a rank-deficient one (kappa = inf) and the guards.
TEST(Unit_Metrics, stateSpectrumEqualsTheSeparateMetrics) {
  test::Rng rng(test::test_seed(20261201, "stateSpectrumEqualsTheSeparateMetrics"));
  Mat S = rng.normal(89, 64);
  for (Index j = 0; j < S.cols(); ++j) S.col(j) *= std::pow(0.9, j);  // graded columns: kappa ~ 1e3
  Mat deficient = S;
  deficient.col(5) = deficient.col(2);
  for (const Mat& m : {S, Mat(S.transpose()), deficient}) {
    const StateSpectrum sp = state_spectrum(m);
    EXPECT_NEAR(sp.er, effective_rank(m), 1e-13 * effective_rank(m));
    EXPECT_NEAR(sp.u, rank_utilization(m), 1e-13 * rank_utilization(m));
    const double k = condition_number(m);
    if (std::isinf(k)) EXPECT_GT(sp.kappa, 1e12);  // a repeated column: sigma_min is 0 or rounding noise
    else EXPECT_NEAR(sp.kappa, k, 1e-10 * k);
    const AmplificationPair p = max_amplification_pair(m);
    EXPECT_NEAR(std::abs(sp.pair.q.dot(p.q)), 1.0, 1e-10);  // singular vectors up to sign
    EXPECT_NEAR(std::abs(sp.pair.eps.dot(p.eps)), 1.0, 1e-10);
    if (sp.kappa < 1e12)  // the pair attains kappa (Prop. 2.1) to ~kappa eps
      EXPECT_NEAR(readout_amplification(m, sp.pair.q, sp.pair.eps), sp.kappa, 1e-8 * sp.kappa);
  }
  // er is scale-free: a state of 1e-200 or 1e200 (whose squared norms under- or overflow) has the er of its shape
  for (double scale : {1e-200, 1e200}) {  // er(diag(3, 4)) = 25 / 16
    EXPECT_NEAR(state_spectrum(scale * diag(3, 4)).er, 25.0 / 16.0, 1e-14) << "scale " << scale;
    EXPECT_NEAR(effective_rank(scale * diag(3, 4)), 25.0 / 16.0, 1e-14) << "scale " << scale;
  }
  const StateSpectrum zero = state_spectrum(Mat::Zero(3, 2));
  EXPECT_EQ(zero.er, 0.0);
  EXPECT_EQ(zero.u, 0.0);
  EXPECT_TRUE(std::isinf(zero.kappa));
  Mat bad = diag(1, 2);
  bad(1, 0) = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isnan(state_spectrum(bad).er));
  EXPECT_TRUE(std::isnan(state_spectrum(Mat(0, 4)).u));
}

}  // namespace
}  // namespace statecut::ref
