/// Mamba-2 SSD seen as linear attention, one head (key = B, query = C, value = dt x, no scale):
///   S_t = exp(dt_t A) S_{t-1} + B_t (dt_t x_t)^T,   y_t = S_t^T C_t + D x_t
/// C, B: [T, N]  x: [T, P]  dt: [T] (already softplus(dt_raw + dt_bias))  A < 0 (any real accepted), D scalar
/// S0, state: [N, P] (key-major; mamba_ssm stores the transpose [P, N])  y = o: [T, P]; S0 nullptr = zero state.
///
/// Chunked form (SSD "segsum" form), per chunk with carried state S, a = dt A, G = within-chunk cumsum of a,
/// L_ij = exp(G_i - G_j) = exp(a_{j+1} + ... + a_i) for i >= j (0 above; summed directly, without cancellation):
///   Y = diag(exp(G)) C S + (C B^T o L) diag(dt) X + D X,   S <- exp(G_last) S + (diag(exp(G_last - G)) B)^T diag(dt) X
#pragma once
#include "reference/types.h"

namespace statecut::ref {

HeadResult mamba2_ssd_recurrent(const Mat& C, const Mat& B, const Mat& x, const Vec& dt, double A, double D,
                                const Mat* S0 = nullptr);
HeadResult mamba2_ssd_chunked(const Mat& C, const Mat& B, const Mat& x, const Vec& dt, double A, double D,
                              const Mat* S0 = nullptr, Index chunk = 64);

}  // namespace statecut::ref
