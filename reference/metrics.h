/// State metrics of paper §2.2 (arXiv 2602.04852), for a state S [dk, dv] (or any matrix).
///
///   er(S) = ||S||_F^2 / ||S||_2^2                  effective (stable) rank, 1 <= er <= rank(S)
///   u(S)  = er(S) / min(dk, dv)                    rank utilization, in (0, 1]
///   kappa(S) = sigma_max / sigma_min               over the min(dk, dv) singular values (inf if singular)
///   nu(V; K) = er(V_par)                           App. F.1: V [T, dv], K [T, dk] (rows = time),
///       V_par = P V with P = K (K^T K)^+ K^T the projector onto the column space of K in R^T
///       (the paper's "V projected onto the row space of K" in its [d, T] layout). Eq. (4):
///       nu(V) / kappa(K)^2 <= er(S) for S = K^T V when K has full column rank.
///   R(q, eps) = (||S^T eps|| / ||S^T q||) * (||q|| / ||eps||)   readout amplification (§2.2.2): the
///       relative change of the readout o = S^T q per relative change of the query. max_{q,eps} R = kappa(S),
///       attained at q = the right singular vector of S^T for sigma_min, eps = the one for sigma_max (Prop. 2.1),
///       and kappa(S) >= 1 / sqrt(u(S)).
///
/// Guards follow the paper's script: a zero matrix has er = u = 0; non-finite input gives NaN.
#pragma once
#include "reference/types.h"

namespace statecut::ref {

double effective_rank(const Mat& S);
double rank_utilization(const Mat& S);
double condition_number(const Mat& S);
double nu(const Mat& V, const Mat& K);
double readout_amplification(const Mat& S, const Vec& q, const Vec& eps);

/// The pair (q, eps) that maximises readout_amplification for S (Prop. 2.1).
struct AmplificationPair {
  Vec q;
  Vec eps;
};
AmplificationPair max_amplification_pair(const Mat& S);

/// Everything above that depends on S alone, from ONE Jacobi SVD (each function above takes its own): for checks
/// that need all of them per head (verify's theorems run ~1,500 heads x windows on a 1.3B model). Same guards:
/// a zero S gives er = u = 0, kappa = inf; non-finite S gives NaN and empty vectors.
struct StateSpectrum {
  Vec sigma;                  ///< singular values, descending
  Mat U;                      ///< left singular vectors [dk, dk] (full)
  double er = 0, u = 0, kappa = 0;
  AmplificationPair pair;     ///< as max_amplification_pair(S)
};
StateSpectrum state_spectrum(const Mat& S);

}  // namespace statecut::ref
