/// Gated delta rule (Gated DeltaNet), one head (fla naive_recurrent_gated_delta_rule, anchor-fla.md §1.3):
///   S_t = exp(g_t) (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T,   o_t = S_t^T (scale q_t)
/// q, k: [T, dk]  v: [T, dv]  beta, g: [T] (g = log decay <= 0, any real accepted)  S0, state: [dk, dv]
/// o: [T, dv]; S0 nullptr = zero state. Step order as fla: decay, v' = b (v - S^T k), S += k v'^T, read out.
///
/// Chunked form (WY/UT transform, anchor-fla.md §2.1), per chunk of C rows with carried state S,
/// G = within-chunk cumsum of g, Gamma = exp(G), D_ij = exp(G_i - G_j) for i >= j (formed as exp(g_{j+1} + ... + g_i),
/// which keeps full relative accuracy when the cumulative sums are large):
///   A = (I + strict_lower(diag(b) K K^T o D))^-1     (unit lower triangular solve)
///   U = A diag(b) V,  W = A diag(b) diag(Gamma) K,  V' = U - W S
///   O = scale (diag(Gamma) Q S + tril_incl(Q K^T o D) V')
///   S <- exp(G_last) S + (diag(exp(G_last - G)) K)^T V'
#pragma once
#include "reference/types.h"

namespace statecut::ref {

HeadResult gated_delta_recurrent(const Mat& q, const Mat& k, const Mat& v, const Vec& beta, const Vec& g,
                                 double scale, const Mat* S0 = nullptr);
HeadResult gated_delta_chunked(const Mat& q, const Mat& k, const Mat& v, const Vec& beta, const Vec& g,
                               double scale, const Mat* S0 = nullptr, Index chunk = 64);

}  // namespace statecut::ref
