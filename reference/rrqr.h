/// Rank-revealing QR for column selection (DRRQR of the paper; Gu & Eisenstat, SIAM J. Sci. Comput.
/// 17(4), 1996, "Efficient algorithms for computing a strong rank-revealing QR factorization").
///
/// M [m, n] (rows = samples, columns = channels), k in 1..n. With M Pi = Q R and
///   R = [ A  B ]   A [k, k] upper triangular, B [k, n-k], C [n-k, n-k] (any shape: only its column
///       [ 0  C ]   norms gamma_j(C) = ||C[:, j]||_2 enter),  omega_i(A) = 1 / ||row i of A^{-1}||_2,
/// the swap of kept column i with discarded column j multiplies |det A| by exactly
///   rho_ij = sqrt( (A^{-1} B)_ij^2 + (gamma_j(C) / omega_i(A))^2 ).
/// QRCP (Businger–Golub) gives a rank-revealing start; the strong-RRQR loop swaps the argmax pair
/// while max rho > f (f > 1). On termination (the certificate max rho <= f) Theorem 3.2 gives
///   |(A^{-1}B)_ij| <= f,  gamma_j(C)/omega_i(A) <= f,
///   sigma_i(A) >= sigma_i(M) / sqrt(1 + f^2 k (n-k)),  sigma_j(C) <= sigma_{k+j}(M) sqrt(1 + f^2 k (n-k)),
/// and every swap grows |det A| by more than f, so #swaps <= log_f( prod_{i<=k} sigma_i(M) / |det A_0| ).
///
/// Only the R factor matters: M Pi = Q (R0 Pi) for M = Q R0, so QRCP pivots (trailing column norms),
/// A, B and C — hence every rho — are those of R0 [n, n]. `compress_to_r` forms R0 once (Householder
/// QR, or the Cholesky factor of M^T M when that is provably accurate enough, see below) and all the
/// pivoting runs on the n x n problem; the selected columns are exactly those of M.
///
/// Default mode (Strong): QRCP of R0, then swaps with per-swap O(n^2) updates — adjacent column
/// swaps + Givens to move column i to slot k, one Householder on C to bring column j to slot k+1,
/// one Givens for the exchange; A^{-1}, A^{-1}B and gamma are updated by the resulting rank-one
/// formulas, not recomputed — until the certificate holds. The certificate is re-checked from a
/// fresh factorisation at the end (updates drift at ~eps per swap); if it fails the loop resumes.
/// If the numerical rank r of M is below k (|R_ii| <= n eps |R_11| after QRCP) the swaps run on the
/// leading r columns and the remaining k - r pivots are QRCP's.
///
/// Faithful mode reproduces the published rrqr.py: M is rounded to float32, 5,000 rows are drawn
/// without replacement when m > 5,000 (faithful_subsample of select_rng.h, seeded by the seed rule with
/// opt.seed, opt.layer, opt.head; the rows keep their order), QRCP, then at most 20 swaps of the first-in-row-major
/// argmax, stopping when min |A_ii| < 1e-9 or max rho <= f, with omega_i = 1/(||row_i A^{-1}|| + 1e-12)
/// and a fresh unpivoted QR after every swap (of the subsample's R factor; equal up to row signs,
/// which rho ignores).
#pragma once
#include "reference/types.h"

#include <cstdint>
#include <vector>

namespace statecut::ref {

/// QR with column pivoting of M [m, n]: M.col(perm[j]) == (Q R).col(j).
struct QrcpResult {
  Mat q;                    ///< [m, min(m, n)] orthonormal columns
  Mat r;                    ///< [min(m, n), n] upper trapezoidal, |R_ii| non-increasing
  std::vector<Index> perm;  ///< column permutation, size n
};
QrcpResult qrcp(const Mat& M);

/// How the n x n problem was formed.
enum class Compression { Auto, Householder, Cholesky };
/// R0 [n, n] with R0^T R0 = M^T M (in exact arithmetic), zero-padded when m < n. Auto uses the
/// Cholesky factor of the Gram when m >= 4n and its condition estimate is <= 1e4 (then the Gram's
/// rounding, ~eps kappa^2 relative, perturbs R0 no more than a 1e-8 relative backward error of M);
/// otherwise Householder QR of M (backward stable). `used` reports the choice.
Mat compress_to_r(const Mat& M, Compression how = Compression::Auto, Compression* used = nullptr);

enum class DrrqrMode { Strong, Faithful };

struct RrqrOptions {
  double f = 1.5;                        ///< > 1
  DrrqrMode mode = DrrqrMode::Strong;
  Compression compression = Compression::Auto;
  Index max_swaps = -1;                  ///< Strong: -1 = unbounded (the det bound terminates it)
  // faithful mode only
  Index faithful_rows = 5000;
  Index faithful_max_swaps = 20;
  double faithful_singular = 1e-9;
  std::uint64_t seed = 42;  ///< the row subsample: SelectRng::for_head(seed, layer, head) (select_rng.h)
  Index layer = 0;
  Index head = 0;
};

struct RrqrResult {
  std::vector<Index> perm;   ///< full column permutation; the first k entries are the kept columns
  Mat r;                     ///< [n, n] R factor of (compressed) M[:, perm], upper triangular
  Index k = 0;
  Index k_certified = 0;     ///< leading block the certificate refers to: min(k, numerical rank)
  Index swaps = 0;
  double max_rho = 0.0;      ///< max rho_ij at exit (fresh factorisation), 0 when k == n
  bool certified = false;    ///< max_rho <= f held at exit (Strong mode always, unless max_swaps hit)
  std::vector<double> log_abs_det;  ///< log|det A| after QRCP and after each swap (k_certified block)
};

/// Strong RRQR / faithful DRRQR of M [m, n] for k columns. Throws ShapeError on k outside 1..n,
/// f <= 1, an empty or non-finite M.
RrqrResult strong_rrqr(const Mat& M, Index k, const RrqrOptions& opt = {});

/// The quantities of the certificate for a given R [n, n] (upper triangular in its leading k block):
/// W = A^{-1}B [k, n-k], omega [k], gamma [n-k], rho [k, n-k].
struct RrqrCertificate {
  Mat w;
  Vec omega;
  Vec gamma;
  Mat rho;
  double max_rho = 0.0;
};
RrqrCertificate rrqr_certificate(const Mat& r, Index k);

/// The paper's selection: the first k pivots of strong_rrqr (pivot order, not sorted).
std::vector<Index> drrqr_pivots(const Mat& M, Index k, const RrqrOptions& opt = {});

}  // namespace statecut::ref
