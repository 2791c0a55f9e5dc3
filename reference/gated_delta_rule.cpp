#include "reference/gated_delta_rule.h"

#include <algorithm>
#include <cmath>

#include "reference/recurrence_checks.h"

namespace statecut::ref {

HeadResult gated_delta_recurrent(const Mat& q, const Mat& k, const Mat& v, const Vec& beta, const Vec& g,
                                 double scale, const Mat* S0) {
  const char* fn = "gated_delta_recurrent";
  detail::check_qkv(fn, q, k, v, S0);
  detail::check_steps(fn, "beta", beta, q.rows());
  detail::check_steps(fn, "g", g, q.rows());
  const Index T = q.rows();
  Mat S = detail::initial_state(S0, q.cols(), v.cols());
  Mat o(T, v.cols());
  for (Index t = 0; t < T; ++t) {
    S *= std::exp(g(t));
    const Eigen::RowVectorXd vnew = beta(t) * (v.row(t) - k.row(t) * S);
    S.noalias() += k.row(t).transpose() * vnew;
    o.row(t).noalias() = scale * (q.row(t) * S);
  }
  return {o, S};
}

HeadResult gated_delta_chunked(const Mat& q, const Mat& k, const Mat& v, const Vec& beta, const Vec& g,
                               double scale, const Mat* S0, Index chunk) {
  const char* fn = "gated_delta_chunked";
  detail::check_qkv(fn, q, k, v, S0);
  detail::check_steps(fn, "beta", beta, q.rows());
  detail::check_steps(fn, "g", g, q.rows());
  detail::check_chunk(fn, chunk);
  const Index T = q.rows();
  Mat S = detail::initial_state(S0, q.cols(), v.cols());
  Mat o(T, v.cols());
  for (Index c0 = 0; c0 < T; c0 += chunk) {
    const Index n = std::min(chunk, T - c0);
    const auto Q = q.middleRows(c0, n);
    const auto K = k.middleRows(c0, n);
    const auto V = v.middleRows(c0, n);
    const auto b = beta.segment(c0, n);
    Vec G(n);  // within-chunk cumulative log decay
    double acc = 0.0;
    for (Index i = 0; i < n; ++i) G(i) = acc += g(c0 + i);
    const Vec Gamma = G.array().exp();
    // D_ij = exp(G_i - G_j) = exp(g_{j+1} + ... + g_i), summed directly: subtracting two large cumulative sums
    // would lose |G| eps absolute accuracy in the exponent.
    Mat D = Mat::Zero(n, n);
    for (Index i = 0; i < n; ++i) {
      double part = 0.0;
      D(i, i) = 1.0;
      for (Index j = i - 1; j >= 0; --j) D(i, j) = std::exp(part += g(c0 + j + 1));
    }
    const Mat KK = K * K.transpose();
    const Mat QKD = (Q * K.transpose()).cwiseProduct(D);  // D is zero above the diagonal
    Mat L = Mat::Zero(n, n);  // strict lower: b_i (k_i . k_j) D_ij
    for (Index i = 0; i < n; ++i)
      for (Index j = 0; j < i; ++j) L(i, j) = b(i) * KK(i, j) * D(i, j);
    // UT transform: (I + L)^-1 applied to diag(b) V and diag(b Gamma) K, by forward substitution.
    const auto A = L.triangularView<Eigen::UnitLower>();
    const Mat U = A.solve(b.asDiagonal() * V);
    const Mat W = A.solve(b.cwiseProduct(Gamma).asDiagonal() * K);
    const Mat Vnew = U - W * S;
    o.middleRows(c0, n).noalias() = scale * (Gamma.asDiagonal() * Q * S + QKD * Vnew);
    const Vec tail = D.row(n - 1).transpose();  // exp(G_last - G_j)
    S = Gamma(n - 1) * S + (tail.asDiagonal() * K).transpose() * Vnew;
  }
  return {o, S};
}

}  // namespace statecut::ref
