#include "reference/metrics.h"

#include <cmath>
#include <limits>

namespace statecut::ref {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Vec singular_values(const Mat& S) {
  Eigen::JacobiSVD<Mat> svd(S);  // Jacobi: high relative accuracy, sizes here are <= 256
  return svd.singularValues();
}

}  // namespace

double effective_rank(const Mat& S) {
  if (!S.allFinite()) return kNaN;
  // ||S||_F^2 / ||S||_2^2 = sum (sigma_i / sigma_max)^2: scale-free, so no under- or overflow of the squares
  const Vec sv = singular_values(S);
  if (sv.size() == 0 || sv(0) == 0.0) return 0.0;
  return (sv / sv(0)).squaredNorm();
}

double rank_utilization(const Mat& S) {
  const Index d = std::min(S.rows(), S.cols());
  if (d == 0) return kNaN;
  return effective_rank(S) / static_cast<double>(d);
}

double condition_number(const Mat& S) {
  if (!S.allFinite() || S.size() == 0) return kNaN;
  const Vec s = singular_values(S);
  const double s_min = s(s.size() - 1);
  if (s_min == 0.0) return std::numeric_limits<double>::infinity();
  return s(0) / s_min;
}

double nu(const Mat& V, const Mat& K) {
  if (V.rows() != K.rows()) throw ShapeError("nu: V and K must have the same number of rows (time steps)");
  // P V = K (K^T K)^+ K^T V, through a complete orthogonal decomposition (robust to rank deficiency).
  Eigen::CompleteOrthogonalDecomposition<Mat> cod(K);
  const Mat coeffs = cod.solve(V);  // least-squares K X ~= V
  const Mat v_par = K * coeffs;
  return effective_rank(v_par);
}

double readout_amplification(const Mat& S, const Vec& q, const Vec& eps) {
  if (q.size() != S.rows() || eps.size() != S.rows())
    throw ShapeError("readout_amplification: q and eps must have dk entries");
  const double num = (S.transpose() * eps).norm() * q.norm();
  const double den = (S.transpose() * q).norm() * eps.norm();
  if (den == 0.0) return std::numeric_limits<double>::infinity();
  return num / den;
}

AmplificationPair max_amplification_pair(const Mat& S) {
  // o = S^T q: the right singular vectors of S^T are the left singular vectors of S.
  Eigen::JacobiSVD<Mat> svd(S, Eigen::ComputeFullU);
  const Mat& U = svd.matrixU();
  const Index r = std::min(S.rows(), S.cols());
  return {U.col(r - 1), U.col(0)};
}

StateSpectrum state_spectrum(const Mat& S) {
  StateSpectrum sp;
  const Index r = std::min(S.rows(), S.cols());
  if (!S.allFinite() || r == 0) {
    sp.er = sp.u = sp.kappa = kNaN;
    return sp;
  }
  Eigen::JacobiSVD<Mat> svd(S, Eigen::ComputeFullU);
  sp.sigma = svd.singularValues();
  sp.U = svd.matrixU();
  const double s_max = sp.sigma(0), s_min = sp.sigma(r - 1);
  sp.er = s_max == 0.0 ? 0.0 : (sp.sigma / s_max).squaredNorm();  // as effective_rank: scale-free
  sp.u = sp.er / static_cast<double>(r);
  sp.kappa = s_min == 0.0 ? std::numeric_limits<double>::infinity() : s_max / s_min;
  sp.pair = {sp.U.col(r - 1), sp.U.col(0)};
  return sp;
}

}  // namespace statecut::ref
