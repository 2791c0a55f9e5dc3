/// Theorem (paper Prop. F.2, algebraic rank): started from S_0 = 0, the state of every rank-one rule
///   S_t = (alpha_t I - beta_t k_t k_t^T) S_{t-1} + gamma_t k_t v_t^T        (S [dk, dv], key-major)
/// lies in span(k_1..k_t) (x) span(v_1..v_t): its column space (the dk side) is in span(k_1..k_t) and its row
/// space (the dv side) is in span(v_1..v_t). Hence rank(S_t) <= min(t, dim span k, dim span v).
///
/// Proof: induction. If S_{t-1} = K_{t-1} X_{t-1} V_{t-1}^T (columns of K_{t-1}, V_{t-1} = past keys, values), then
/// (alpha I - beta k k^T) S_{t-1} = K_{t-1}(alpha X) V^T - k (beta k^T S_{t-1}), whose columns are in span(K_{t-1}, k_t)
/// and rows in span(V_{t-1}); the new term gamma k_t v_t^T adds k_t and v_t. Covers linear attention (1, 0, 1),
/// DeltaNet, Gated DeltaNet and Mamba-2 (key = B, value = dt x).
///
/// Checked non-trivially: keys are drawn in a random r_k-dimensional subspace and values in an r_v-dimensional one
/// (r < d), so span(k_1..k_T) is a proper subspace whatever T is; for T < r it is the T-dim span of the keys
/// themselves. The residual of projecting S onto the span, ||(I - P_K) S||_F (and ||S (I - P_V)||_F), must be
/// rounding noise: at most c (T + 1)(dk + dv) eps M, M = sum_t |gamma_t| ||k_t|| ||v_t|| >= every ||S_t||_F (the
/// transitions are non-expansive), c = 4 (one product per step, plus the projection).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <Eigen/SVD>

#include "properties/generators.h"

namespace statecut::prop {
namespace {

/// Orthonormal basis [n, rank] of the column space of X [n, m] whose rank is known (generic data of known rank).
Mat column_basis(const Mat& X, Index rank) {
  Eigen::JacobiSVD<Mat> svd(X, Eigen::ComputeThinU);
  return svd.matrixU().leftCols(rank);
}

/// Rows of X re-drawn inside the subspace spanned by the columns of B [d, r] (keeping each row's norm).
Mat into_subspace(Rng& rng, const Mat& X, const Mat& B) {
  Mat Y = gaussian(rng, X.rows(), B.cols()) * B.transpose();
  for (Index t = 0; t < X.rows(); ++t) Y.row(t) *= X.row(t).norm() / Y.row(t).norm();
  return Y;
}

RC_GTEST_PROP(Theorem_AlgebraicRank, stateLivesInSpanOfKeysAndValues, ()) {
  const RuleKind rule = *genRule();
  const Index T = *genSeqLen();
  const Index dk = *rc::gen::suchThat(genKeyDim(), [](Index d) { return d >= 2; });   // need a proper subspace
  const Index dv = *rc::gen::suchThat(genValueDim(), [](Index d) { return d >= 2; });
  const bool chunked = *rc::gen::arbitrary<bool>();
  Rng rng(*genSeed());
  RecurrenceCase c = draw_recurrence(rng, rule, T, dk, dv, /*with_S0=*/false);
  const Index rk = rng.integer(1, dk - 1);
  const Index rv = rng.integer(1, dv - 1);
  c.k = into_subspace(rng, c.k, orthonormal_columns(rng, dk, rk));
  c.v = into_subspace(rng, c.v, orthonormal_columns(rng, dv, rv));

  const Mat S = run(c, chunked).state;
  const Mat Bk = column_basis(c.k.transpose(), std::min(T, rk));  // span(k_1..k_T)
  const Mat Bv = column_basis(c.v.transpose(), std::min(T, rv));  // span(v_1..v_T)
  const double key_residual = (S - Bk * (Bk.transpose() * S)).norm();
  const double value_residual = (S - (S * Bv) * Bv.transpose()).norm();

  const double M = state_magnitude(c);
  const double budget = rounding_budget(c).state;  // 4 (T + 1)(dk + dv) eps M
  RC_ASSERT(key_residual <= budget);
  RC_ASSERT(value_residual <= budget);
  // How much of the state there is to test: a vanishing state would make the residual check vacuous.
  RC_CLASSIFY(S.norm() >= 1e-3 * M, "||S|| >= 1e-3 M");
  RC_CLASSIFY(S.norm() < 1e-3 * M, "||S|| < 1e-3 M (state mostly forgotten)");
  RC_CLASSIFY(T < rk, "T < r_k (span = the keys themselves)");
  STATECUT_CLASSIFY_EPS(std::max(key_residual, value_residual) / (kEps * M));
}

}  // namespace
}  // namespace statecut::prop
