/// General rank-one state rule (the form the theorems use), one head:
///   S_t = (alpha_t I - beta_t k_t k_t^T) S_{t-1} + gamma_t k_t v_t^T,   o_t = S_t^T (scale q_t)
/// q, k: [T, dk]  v: [T, dv]  alpha, beta, gamma: [T] (any reals, alpha may be 0 or negative)
/// S0, state: [dk, dv]  o: [T, dv]; S0 nullptr = zero state.
/// Special cases: linear attention (1, 0, 1); delta rule (1, b, b); gated delta (e^g, e^g b, b); Mamba-2 (e^{dt A}, 0, 1).
///
/// Chunked form (derived here; reduces to the gated WY/UT form when alpha = e^g > 0). Write S_t = alpha_t S_{t-1}
/// + k_t u_t^T with u_t = gamma_t v_t - beta_t S_{t-1}^T k_t. Inside a chunk with start state S, let
/// P(i, j) = prod_{m=j+1}^{i} alpha_m (P(i, i) = 1) and a_i = prod_{m<=i} alpha_m = "P(i, -1)". Then
///   S_i = a_i S + sum_{j<=i} P(i, j) k_j u_j^T, so
///   (I + L) U = diag(gamma) V - diag(beta_i a_{i-1}) K S,   L_ij = beta_i P(i-1, j) (k_i . k_j) for j < i
///   O = scale (diag(a) Q S + tril_incl(P o Q K^T) U),       S <- a_last S + (diag(P(last, j)) K)^T U
/// The decay products are formed directly (no logarithms), so the chunked form is exact for every real alpha,
/// including alpha = 0 (a state reset) and alpha < 0; no fallback is needed.
#pragma once
#include "reference/types.h"

namespace statecut::ref {

HeadResult general_rule_recurrent(const Mat& q, const Mat& k, const Mat& v, const Vec& alpha, const Vec& beta,
                                  const Vec& gamma, double scale, const Mat* S0 = nullptr);
HeadResult general_rule_chunked(const Mat& q, const Mat& k, const Mat& v, const Vec& alpha, const Vec& beta,
                                const Vec& gamma, double scale, const Mat* S0 = nullptr, Index chunk = 64);

}  // namespace statecut::ref
