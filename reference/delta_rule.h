/// Delta rule (DeltaNet), one head (fla delta_rule_recurrence, anchor-fla.md §1.2):
///   S_t = (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T,   o_t = S_t^T (scale q_t)
/// q, k: [T, dk]  v: [T, dv]  beta: [T]  S0, state: [dk, dv]  o: [T, dv]; S0 nullptr = zero state.
/// No L2 norm inside: callers normalise k (l2norm_rows) when the model does.
///
/// Chunked form: the WY/UT transform of anchor-fla.md §2.1 (gated_delta_chunked with g = 0):
///   per chunk  T = (I + strict_lower(diag(b) K K^T))^-1 diag(b),  W = T K,  U = T V
///              O = scale Q S + tril_incl(scale Q K^T)(U - W S),   S <- S + K^T (U - W S)
#pragma once
#include "reference/types.h"

namespace statecut::ref {

HeadResult delta_rule_recurrent(const Mat& q, const Mat& k, const Mat& v, const Vec& beta, double scale,
                                const Mat* S0 = nullptr);
HeadResult delta_rule_chunked(const Mat& q, const Mat& k, const Mat& v, const Vec& beta, double scale,
                              const Mat* S0 = nullptr, Index chunk = 64);

}  // namespace statecut::ref
