#include "reference/general_rule.h"

#include <algorithm>

#include "reference/chunk_scan.h"
#include "reference/recurrence_checks.h"

namespace statecut::ref {
HeadResult general_rule_recurrent(const Mat& q, const Mat& k, const Mat& v, const Vec& alpha, const Vec& beta,
                                  const Vec& gamma, double scale, const Mat* S0) {
  detail::check_rule("general_rule_recurrent", q, k, v, S0, {{"alpha", alpha}, {"beta", beta}, {"gamma", gamma}});
  const Index T = q.rows();
  Mat S = detail::initial_state(S0, q.cols(), v.cols());
  Mat o(T, v.cols());
  for (Index t = 0; t < T; ++t) {
    // S <- alpha S + k u^T with u = gamma v - beta S^T k (S before the update).
    const Eigen::RowVectorXd u = gamma(t) * v.row(t) - beta(t) * (k.row(t) * S);
    S *= alpha(t);
    S.noalias() += k.row(t).transpose() * u;
    o.row(t).noalias() = scale * (q.row(t) * S);
  }
  return {o, S};
}

HeadResult general_rule_chunked(const Mat& q, const Mat& k, const Mat& v, const Vec& alpha, const Vec& beta,
                                const Vec& gamma, double scale, const Mat* S0, Index chunk) {
  const char* fn = "general_rule_chunked";
  detail::check_rule(fn, q, k, v, S0, {{"alpha", alpha}, {"beta", beta}, {"gamma", gamma}});
  return detail::scan_chunks(fn, q, k, v, S0, chunk, [&](const detail::ChunkRows& c, Mat& S, auto& O) {
    const Index n = c.n, c0 = c.c0;
    const auto &Q = c.Q, &K = c.K, &V = c.V;
    const auto al = alpha.segment(c0, n);
    // P(i, j) = prod_{m=j+1}^{i} alpha_m for j <= i, built by direct products (valid for alpha <= 0 too).
    Mat P = Mat::Zero(n, n);
    for (Index i = 0; i < n; ++i) {
      P(i, i) = 1.0;
      for (Index j = i - 1; j >= 0; --j) P(i, j) = P(i, j + 1) * al(j + 1);
    }
    Vec a(n);  // a_i = prod_{m<=i} alpha_m
    for (Index i = 0; i < n; ++i) a(i) = (i == 0 ? 1.0 : a(i - 1)) * al(i);
    const Mat KK = K * K.transpose();
    Mat L = Mat::Zero(n, n);
    Vec erase(n);  // beta_i a_{i-1}: how much of the start state row i erases
    for (Index i = 0; i < n; ++i) {
      erase(i) = beta(c0 + i) * (i == 0 ? 1.0 : a(i - 1));
      for (Index j = 0; j < i; ++j) L(i, j) = beta(c0 + i) * P(i - 1, j) * KK(i, j);
    }
    const Mat rhs = gamma.segment(c0, n).asDiagonal() * V - erase.asDiagonal() * (K * S);
    const Mat U = L.triangularView<Eigen::UnitLower>().solve(rhs);
    const Mat QKP = (Q * K.transpose()).cwiseProduct(P);  // P is zero above the diagonal
    O.noalias() = scale * (a.asDiagonal() * Q * S + QKP * U);
    const Vec tail = P.row(n - 1).transpose();
    S = a(n - 1) * S + (tail.asDiagonal() * K).transpose() * U;
  });
}

}  // namespace statecut::ref
