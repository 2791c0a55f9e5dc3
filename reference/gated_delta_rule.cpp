#include "reference/gated_delta_rule.h"

#include <algorithm>
#include <cmath>

#include "reference/chunk_scan.h"
#include "reference/recurrence_checks.h"

namespace statecut::ref {

HeadResult gated_delta_recurrent(const Mat& q, const Mat& k, const Mat& v, const Vec& beta, const Vec& g,
                                 double scale, const Mat* S0) {
  const char* fn = "gated_delta_recurrent";
  detail::check_rule(fn, q, k, v, S0, {{"beta", beta}, {"g", g}});
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
  detail::check_rule(fn, q, k, v, S0, {{"beta", beta}, {"g", g}});
  return detail::scan_chunks(fn, q, k, v, S0, chunk, [&](const detail::ChunkRows& c, Mat& S, auto& O) {
    const Index n = c.n;
    const auto &Q = c.Q, &K = c.K, &V = c.V;
    const auto b = beta.segment(c.c0, n);
    const detail::ChunkDecay dec = detail::chunk_decay(g.segment(c.c0, n));
    const Vec Gamma = dec.G.array().exp();
    const Mat& D = dec.D;  // exp(g_{j+1} + ... + g_i), zero above the diagonal
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
    O.noalias() = scale * (Gamma.asDiagonal() * Q * S + QKD * Vnew);
    const Vec tail = D.row(n - 1).transpose();  // exp(G_last - G_j)
    S = Gamma(n - 1) * S + (tail.asDiagonal() * K).transpose() * Vnew;
  });
}

}  // namespace statecut::ref
