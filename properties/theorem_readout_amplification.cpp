/// Theorem (paper Prop. 2.1, §2.2.2): the readout o = S^T q of a state S [dk, dv] amplifies relative query
/// perturbations by at most the condition number, the bound is attained, and low rank utilization forces a
/// large condition number.
///
///   R(q, eps) = (||S^T eps|| / ||S^T q||) * (||q|| / ||eps||)
///   (a) max_{q, eps} R(q, eps) = kappa(S) = sigma_max / sigma_min      (over the d = min(dk, dv) singular values)
///   (b) the maximum is attained at q = u_min, eps = u_max (left singular vectors of S), which is what
///       ref::max_amplification_pair returns;
///   (c) kappa(S) >= 1 / sqrt(u(S)),  u(S) = er(S) / d.
///
/// Derivation: ||S^T x|| ranges over [sigma_min ||x||, sigma_max ||x||] for x in range(S) = span(u_1..u_d), so the
/// ratio of the two Rayleigh-type quotients is at most sigma_max / sigma_min, with equality at (u_min, u_max).
/// When dk > dv, S^T has a kernel and R is unbounded over all q; the maximum in (a) is then over q in range(S)
/// (the queries the state can answer), which is how the generator draws q. For (c): er = sum sigma_i^2 /
/// sigma_max^2 >= d sigma_min^2 / sigma_max^2 = d / kappa^2, i.e. kappa^2 >= d / er = 1 / u; equality iff all
/// sigma_i are equal.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <Eigen/SVD>

#include "properties/generators.h"
#include "reference/metrics.h"

namespace statecut::prop {
namespace {

struct StateCase {
  Mat S;
  Mat U;  // left singular vectors, columns 0..d-1 span range(S)
  Index d;
  Rng rng;
};

/// S [dk, dv] with a prescribed spectrum; full_rank excludes the rank-deficient kind.
StateCase draw_state(bool full_rank) {
  const Index dk = *genKeyDim();
  const Index dv = *genValueDim();
  const Spectrum kind = full_rank ? *rc::gen::elementOf(std::vector<Spectrum>{Spectrum::Flat, Spectrum::Geometric,
                                                                               Spectrum::OneLarge, Spectrum::Clustered})
                                  : *genSpectrum();
  const double cond = *genCond();
  const double scale = *rc::gen::elementOf(std::vector<double>{1.0, 1e-4, 1e4});
  Rng rng(*genSeed());
  const Index d = std::min(dk, dv);
  Mat S = scale * with_spectrum(rng, dk, dv, make_spectrum(kind, d, cond));
  Eigen::JacobiSVD<Mat> svd(S, Eigen::ComputeFullU);
  return {S, svd.matrixU().leftCols(d), d, rng};
}

/// Relative accuracy of a computed R or kappa: ||S^T x|| carries an absolute error ~ (dk + dv) eps sigma_max ||x||,
/// i.e. a relative error (dk + dv) eps kappa when ||S^T x|| ~ sigma_min ||x||; c = 4 covers the two norms of R.
double amplification_tol(const Mat& S, double kappa) {
  return 4.0 * static_cast<double>(S.rows() + S.cols()) * kappa * kEps;
}

RC_GTEST_PROP(Theorem_ReadoutAmplification, perturbedPairsNeverExceedKappa, ()) {
  StateCase c = draw_state(true);
  const double kappa = ref::condition_number(c.S);
  // Pairs at distance delta from the maximiser: delta = 0 is the maximiser, delta = 10 a nearly random pair.
  const double delta = *rc::gen::elementOf(std::vector<double>{0.0, 1e-6, 1e-3, 0.1, 10.0});
  const Mat Pr = c.U * c.U.transpose();  // projector onto range(S)
  const Vec q = Pr * (c.U.col(c.d - 1) + delta * gaussian(c.rng, c.S.rows(), 1).col(0));
  const Vec eps = c.U.col(0) + delta * gaussian(c.rng, c.S.rows(), 1).col(0);
  const double R = ref::readout_amplification(c.S, q, eps);
  RC_ASSERT(R <= kappa * (1.0 + amplification_tol(c.S, kappa)));
  STATECUT_CLASSIFY_RATIO(R / kappa);
}

RC_GTEST_PROP(Theorem_ReadoutAmplification, maximisingPairAttainsKappa, ()) {
  const StateCase c = draw_state(true);
  const double kappa = ref::condition_number(c.S);
  const ref::AmplificationPair p = ref::max_amplification_pair(c.S);
  RC_ASSERT(p.q.size() == c.S.rows());
  RC_ASSERT(p.eps.size() == c.S.rows());
  const double R = ref::readout_amplification(c.S, p.q, p.eps);
  const double err = std::abs(R - kappa) / kappa;
  RC_ASSERT(err <= amplification_tol(c.S, kappa));
  STATECUT_CLASSIFY_EPS(err / kEps);
  RC_CLASSIFY(kappa >= 1e3, "kappa >= 1e3");
}

RC_GTEST_PROP(Theorem_ReadoutAmplification, kappaAtLeastInverseSqrtUtilization, ()) {
  const StateCase c = draw_state(false);
  const double kappa = ref::condition_number(c.S);
  const double inv_sqrt_u = 1.0 / std::sqrt(ref::rank_utilization(c.S));
  // c = 4 (dk + dv): er and kappa are each computed from a backward-stable SVD, relative error <= (dk + dv) eps
  // for the large singular values that er depends on; kappa's own error only loosens the bound (it grows kappa
  // in the rank-deficient case, where kappa ~ 1/eps).
  RC_ASSERT(inv_sqrt_u <= kappa * (1.0 + 4.0 * static_cast<double>(c.S.rows() + c.S.cols()) * kEps));
  STATECUT_CLASSIFY_RATIO(inv_sqrt_u / kappa);
}

}  // namespace
}  // namespace statecut::prop
