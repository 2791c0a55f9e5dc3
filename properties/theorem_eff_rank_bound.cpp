/// Theorem (paper Eq. (4), App. F.1): the effective rank of a linear-attention state is bounded below by the
/// effective rank of the values seen through the keys, divided by the keys' squared condition number.
///
///   K [T, dk] (rows = keys, full column rank, T >= dk),  V [T, dv] (rows = values),  S = K^T V  [dk, dv]
///   nu(V; K) = er(P V),  P = K (K^T K)^{-1} K^T  (projector onto col(K) in R^T)
///   claim:   nu(V; K) / kappa(K)^2  <=  er(S)          er(X) = ||X||_F^2 / ||X||_2^2
///
/// Proof (the derivation the property checks): K = Q R (thin QR, R invertible, kappa(R) = kappa(K)). Then
/// P V = Q Q^T V, and since Q has orthonormal columns er(P V) = er(W) with W = Q^T V. S = R^T W, so
/// ||S||_F >= sigma_min(R) ||W||_F and ||S||_2 <= sigma_max(R) ||W||_2, hence er(S) >= er(W) / kappa(R)^2.
/// Equality holds when kappa(K) = 1 (R a multiple of an orthogonal matrix): the second property checks that the
/// bound is attained there, so it is not vacuous.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "properties/generators.h"
#include "reference/metrics.h"

namespace statecut::prop {
namespace {

struct EffRankCase {
  Mat K, V;
  double kappa_k;
};

/// K with a prescribed full-rank spectrum (condition number cond), V with any spectrum (rank-deficient allowed).
EffRankCase draw_case(bool orthonormal_keys) {
  const Index dk = *genKeyDim();
  const Index dv = *genValueDim();
  const Index T = dk + *rc::gen::elementOf(std::vector<Index>{0, 1, 7, 40});  // full column rank needs T >= dk
  const Spectrum k_kind =
      orthonormal_keys ? Spectrum::Flat
                       : *rc::gen::elementOf(std::vector<Spectrum>{Spectrum::Flat, Spectrum::Geometric,
                                                                    Spectrum::OneLarge, Spectrum::Clustered});
  const double k_cond = *genCond();
  const Spectrum v_kind = *genSpectrum();
  const double v_cond = *genCond();
  const double k_scale = *rc::gen::elementOf(std::vector<double>{1.0, 1e-3, 1e3});  // er, nu, kappa scale-free
  Rng rng(*genSeed());
  EffRankCase c;
  c.K = k_scale * with_spectrum(rng, T, dk, make_spectrum(k_kind, dk, k_cond));
  c.V = with_spectrum(rng, T, dv, make_spectrum(v_kind, std::min(T, dv), v_cond));
  c.kappa_k = ref::condition_number(c.K);
  return c;
}

RC_GTEST_PROP(Theorem_EffRankBound, nuOverKappaSquaredBoundsEffectiveRank, ()) {
  const EffRankCase c = draw_case(false);
  const Mat S = c.K.transpose() * c.V;
  const double lhs = ref::nu(c.V, c.K) / (c.kappa_k * c.kappa_k);
  const double rhs = ref::effective_rank(S);
  const double n = static_cast<double>(c.K.rows() + c.K.cols() + c.V.cols());
  // c = 16 n: six computed quantities (||.||_F^2 and sigma_max^2 of S and P V, kappa(K)^2) each carry a relative
  // error of about 2 n eps (backward-stable products and SVD), and the quotient adds them up.
  RC_ASSERT(lhs <= rhs * (1.0 + 16.0 * n * kEps));
  STATECUT_CLASSIFY_RATIO(lhs / rhs);
  RC_CLASSIFY(c.kappa_k < 1.0 + 1e-12, "kappa(K) = 1");
}

RC_GTEST_PROP(Theorem_EffRankBound, boundIsAttainedForOrthonormalKeys, ()) {
  const EffRankCase c = draw_case(true);
  const Mat S = c.K.transpose() * c.V;
  const double nu = ref::nu(c.V, c.K);
  const double er = ref::effective_rank(S);
  const double n = static_cast<double>(c.K.rows() + c.K.cols() + c.V.cols());
  // kappa(K) = 1 up to rounding: er(S) = er(W) = nu exactly in exact arithmetic; c = 16 n as above.
  RC_ASSERT(std::abs(nu - er) <= 16.0 * n * kEps * er);
  STATECUT_CLASSIFY_EPS(std::abs(nu - er) / (er * kEps));
}

}  // namespace
}  // namespace statecut::prop
