#include "reference/linear_attention.h"

#include <algorithm>

#include "reference/chunk_scan.h"
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
  return detail::scan_chunks("linear_attention_chunked", q, k, v, S0, chunk,
                             [&](const detail::ChunkRows& c, Mat& S, auto& O) {
                               const Mat Q = scale * c.Q;
                               const Mat A = (Q * c.K.transpose()).triangularView<Eigen::Lower>();  // i sees j <= i
                               O.noalias() = Q * S + A * c.V;
                               S.noalias() += c.K.transpose() * c.V;
                             });
}

}  // namespace statecut::ref
