#include "reference/linear_attention.h"

#include <algorithm>

#include "reference/recurrence_checks.h"

namespace statecut::ref {

HeadResult linear_attention_recurrent(const Mat& q, const Mat& k, const Mat& v, double scale, const Mat* S0) {
  detail::check_qkv("linear_attention_recurrent", q, k, v, S0);
  const Index T = q.rows();
  Mat S = detail::initial_state(S0, q.cols(), v.cols());
  Mat o(T, v.cols());
  for (Index t = 0; t < T; ++t) {
    S.noalias() += k.row(t).transpose() * v.row(t);
    o.row(t).noalias() = (S.transpose() * (scale * q.row(t).transpose())).transpose();
  }
  return {o, S};
}

HeadResult linear_attention_chunked(const Mat& q, const Mat& k, const Mat& v, double scale, const Mat* S0,
                                    Index chunk) {
  detail::check_qkv("linear_attention_chunked", q, k, v, S0);
  detail::check_chunk("linear_attention_chunked", chunk);
  const Index T = q.rows();
  Mat S = detail::initial_state(S0, q.cols(), v.cols());
  Mat o(T, v.cols());
  for (Index c0 = 0; c0 < T; c0 += chunk) {
    const Index n = std::min(chunk, T - c0);
    const Mat Q = scale * q.middleRows(c0, n);
    const auto K = k.middleRows(c0, n);
    const auto V = v.middleRows(c0, n);
    const Mat A = (Q * K.transpose()).triangularView<Eigen::Lower>();  // token i sees j <= i
    o.middleRows(c0, n).noalias() = Q * S + A * V;
    S.noalias() += K.transpose() * V;
  }
  return {o, S};
}

}  // namespace statecut::ref
