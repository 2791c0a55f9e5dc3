/// PCA compression of a head's key/query space (anchor-original §2.6; paper App. B). Not a channel
/// subset: a rotation T [r, dk] with orthonormal rows, absorbed as Wq <- T Wq, Wk <- T Wk.
///
/// Features: per token x [dk] after conv + SiLU, L2-normed with fla's convention
///   x_hat = x / sqrt(sum x^2 + 1e-6).
/// Statistics: s = sum_t x_hat_t, G = sum_t x_hat_t x_hat_t^T, n tokens; the covariance is
///   Cov = (G - n mu mu^T) / (n - 1),  mu = s / n       (K only by default; Joint averages the q and
/// k statistics, i.e. s = (s_q + s_k)/2, G = (G_q + G_k)/2, n unchanged; QOnly uses q alone).
/// T = the eigenvectors of Cov for the r largest eigenvalues, in descending order (adversarial:
/// the r smallest, ascending), one per row; the sign of each row is fixed so its largest-|.| entry is
/// positive (eigenvectors are defined up to sign).
/// Conv: the depthwise filter w [dk, taps] acts as diag(w_tap) per tap; in the rotated basis that is
/// T diag(w_tap) T^T [r, r], not diagonal. Its best diagonal approximation in Frobenius norm is its
/// diagonal (Prop. B.1), whose entries are sum_b T_ab^2 w_b: w_new = (T∘T) w  [r, taps].
#pragma once
#include "reference/types.h"

namespace statecut::ref {

/// Row-wise L2 norm with fla's eps: X [N, dk] -> X_hat.
Mat l2norm_rows_fla(const Mat& X);

/// Running first and second moments of feature rows (what the paper accumulates in fp32).
struct PcaStats {
  Vec sum;      ///< [dk]
  Mat outer;    ///< [dk, dk]
  double n = 0;
  void add(const Mat& X_hat);          ///< X_hat [N, dk] rows already L2-normed
  Mat covariance() const;              ///< (outer - n mu mu^T)/(n-1); throws ShapeError if n < 2
};
/// Joint statistics: the average of q's and k's sums and outer products (n unchanged).
PcaStats average_stats(const PcaStats& a, const PcaStats& b);

/// T [r, dk]: top-r (or, adversarial, bottom-r ascending) eigenvectors of the symmetric cov, rows.
/// Throws ShapeError unless 1 <= r <= dk and cov is square, symmetric and finite.
Mat pca_rotation(const Mat& cov, Index r, bool adversarial = false);

/// pca_rotation's T and all d eigenvalues of cov in T's order (descending; adversarial: ascending), from one
/// decomposition: for checks that weigh T's rows by their eigenvalues and gaps (verify's pca certificate).
struct PcaDecomposition {
  Mat T;           ///< [r, dk]
  Vec eigenvalues; ///< [dk]
};
PcaDecomposition pca_decomposition(const Mat& cov, Index r, bool adversarial = false);

/// Prop. B.1 mixing of a depthwise filter: w [dk, taps] -> (T∘T) w [r, taps].
Mat pca_conv_mixing(const Mat& T, const Mat& w);

/// The exact rotated per-tap operator T diag(w_tap) T^T (for tests and diagnostics).
Mat rotated_conv_tap(const Mat& T, const Vec& w_tap);

}  // namespace statecut::ref
