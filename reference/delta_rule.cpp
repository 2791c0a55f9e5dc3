#include "reference/delta_rule.h"

#include "reference/gated_delta_rule.h"
#include "reference/recurrence_checks.h"

namespace statecut::ref {

HeadResult delta_rule_recurrent(const Mat& q, const Mat& k, const Mat& v, const Vec& beta, double scale,
                                const Mat* S0) {
  const char* fn = "delta_rule_recurrent";
  detail::check_rule(fn, q, k, v, S0, {{"beta", beta}});
  const Index T = q.rows();
  Mat S = detail::initial_state(S0, q.cols(), v.cols());
  Mat o(T, v.cols());
  for (Index t = 0; t < T; ++t) {
    // fla order: v' = b (v - S^T k), then S += k v'^T, then read out from the updated state.
    const Eigen::RowVectorXd vnew = beta(t) * (v.row(t) - k.row(t) * S);
    S.noalias() += k.row(t).transpose() * vnew;
    o.row(t).noalias() = scale * (q.row(t) * S);
  }
  return {o, S};
}

HeadResult delta_rule_chunked(const Mat& q, const Mat& k, const Mat& v, const Vec& beta, double scale,
                              const Mat* S0, Index chunk) {
  const char* fn = "delta_rule_chunked";
  detail::check_rule(fn, q, k, v, S0, {{"beta", beta}});
  detail::check_chunk(fn, chunk);
  // The ungated WY/UT form is the gated one with g = 0 (all decays exp(0) = 1, exactly).
  return gated_delta_chunked(q, k, v, beta, Vec::Zero(q.rows()), scale, S0, chunk);
}

}  // namespace statecut::ref
