/// Stability of the delta rule (DeltaNet / Gated DeltaNet with allow_neg_eigval, beta in [0, 2]):
///   S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,   alpha_t = exp(g_t) in (0, 1]  (1 = DeltaNet)
///
/// Claim: if |1 - beta_t ||k_t||^2| <= 1 for every t (with ||k_t|| = 1: beta_t in [0, 2]), then
///   ||S_t||_2 <= ||S_{t-1}||_2 + beta_t ||v_t||,   hence   ||S_T||_2 <= ||S_0||_2 + sum_t beta_t ||v_t||.
/// Proof: I - beta k k^T is symmetric with eigenvalues 1 (on k^perp) and 1 - beta ||k||^2 (on k), so its spectral
/// norm is max(1, |1 - beta ||k||^2|) = 1; alpha <= 1; and ||beta k v^T||_2 = beta ||k|| ||v||.
///
/// Converse (the classified failure): with beta > 2 the eigenvalue 1 - beta < -1 on k. Repeating one unit key with
/// zero values and S_0 = k w^T gives S_T = (1 - beta)^T k w^T exactly, so ||S_T|| = |1 - beta|^T ||w||, which exceeds
/// the bound ||S_0|| + 0 = ||w|| for every T >= 1 and grows geometrically. This is a constructed case, not random data.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <Eigen/SVD>

#include "properties/generators.h"
#include "reference/delta_rule.h"
#include "reference/gated_delta_rule.h"

namespace statecut::prop {
namespace {

double spectral_norm(const Mat& S) {
  if (S.size() == 0) return 0.0;
  return Eigen::JacobiSVD<Mat>(S).singularValues()(0);
}

ref::HeadResult run_delta(const Mat& q, const Mat& k, const Mat& v, const Vec& beta, const Vec* g, const Mat& S0,
                          bool chunked) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(k.cols()));
  if (g) {
    return chunked ? ref::gated_delta_chunked(q, k, v, beta, *g, scale, &S0)
                   : ref::gated_delta_recurrent(q, k, v, beta, *g, scale, &S0);
  }
  return chunked ? ref::delta_rule_chunked(q, k, v, beta, scale, &S0)
                 : ref::delta_rule_recurrent(q, k, v, beta, scale, &S0);
}

/// How the keys and values are drawn: generic, one key repeated (the direction a bad beta would blow up), or
/// repeated key with zero values and S_0 aligned with it (the bound is then attained at beta = 2).
enum class Mode { Generic, RepeatedKey, RepeatedKeyNoValues };

RC_GTEST_PROP(Prop_DeltaStability, stateNormBoundedWhenBetaInZeroTwo, ()) {
  const Index T = *genSeqLen();
  const Index dk = *genKeyDim();
  const Index dv = *genValueDim();
  const Mode mode = *rc::gen::elementOf(std::vector<Mode>{Mode::Generic, Mode::RepeatedKey, Mode::RepeatedKeyNoValues});
  const bool gated = *rc::gen::arbitrary<bool>();
  const bool chunked = *rc::gen::arbitrary<bool>();
  const bool beta_at_two = *rc::gen::arbitrary<bool>();  // the edge |1 - beta| = 1 exactly
  Rng rng(*genSeed());

  Mat k = unit_keys(rng, T, dk);
  if (mode != Mode::Generic) k = k.row(0).replicate(T, 1);
  const Mat q = unit_keys(rng, T, dk);
  Mat v = gaussian(rng, T, dv);
  if (mode == Mode::RepeatedKeyNoValues) v.setZero();
  const Vec beta = beta_at_two ? Vec::Constant(T, 2.0) : uniform_vec(rng, T, 0.0, 2.0);
  const Vec g = log_gates(rng, T);
  Mat S0 = gaussian(rng, dk, dv);
  if (mode == Mode::RepeatedKeyNoValues) S0 = k.row(0).transpose() * gaussian(rng, 1, dv);

  const Mat S = run_delta(q, k, v, beta, gated ? &g : nullptr, S0, chunked).state;
  const double lhs = spectral_norm(S);
  double rhs = spectral_norm(S0);
  for (Index t = 0; t < T; ++t) rhs += beta(t) * v.row(t).norm();
  // c = 4 (T + 1)(dk + dv): each step's products round with relative error <= (dk + dv) eps of a state whose norm
  // never exceeds rhs (the bound itself), and the errors of T steps add (non-expansive transitions).
  RC_ASSERT(lhs <= rhs * (1.0 + 4.0 * static_cast<double>((T + 1) * (dk + dv)) * kEps));
  STATECUT_CLASSIFY_RATIO(lhs / rhs);
}

RC_GTEST_PROP(Prop_DeltaStability, stateGrowsGeometricallyWhenBetaExceedsTwo, ()) {
  const Index T = *genSeqLen();
  const Index dk = *genKeyDim();
  const Index dv = *genValueDim();
  const bool chunked = *rc::gen::arbitrary<bool>();
  Rng rng(*genSeed());
  const double beta_value = rng.uniform(2.05, 3.0);  // |1 - beta| in [1.05, 2]
  const Mat k = unit_keys(rng, 1, dk).replicate(T, 1);
  const Mat q = unit_keys(rng, T, dk);
  const Mat v = Mat::Zero(T, dv);
  const Mat w = gaussian(rng, 1, dv);
  const Mat S0 = k.row(0).transpose() * w;

  const Mat S = run_delta(q, k, v, Vec::Constant(T, beta_value), nullptr, S0, chunked).state;
  const double growth = std::pow(beta_value - 1.0, static_cast<double>(T));
  const double expected = growth * w.norm();
  const double bound = spectral_norm(S0);  // ||S_0|| + sum beta ||v_t|| with v = 0
  const double got = spectral_norm(S);
  RC_ASSERT(got > bound);  // the stable-range bound is violated
  // Exact arithmetic gives got == expected; c = 4 (T + 1)(dk + dv) as above, now relative to the growing state.
  RC_ASSERT(std::abs(got - expected) <= 4.0 * static_cast<double>((T + 1) * (dk + dv)) * kEps * expected);
  RC_CLASSIFY(growth < 10.0, "growth |1-beta|^T in [1, 10)");
  RC_CLASSIFY(growth >= 10.0 && growth < 1e6, "growth in [10, 1e6)");
  RC_CLASSIFY(growth >= 1e6, "growth >= 1e6");
}

}  // namespace
}  // namespace statecut::prop
