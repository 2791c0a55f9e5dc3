// PCA rotation of a head's key space and the Prop. B.1 conv mixing. Math: pca.h.
#include "reference/pca.h"

#include <cmath>
#include <string>

namespace statecut::ref {

Mat l2norm_rows_fla(const Mat& X) {
  const Vec inv = (X.rowwise().squaredNorm().array() + 1e-6).rsqrt();
  return inv.asDiagonal() * X;
}

void PcaStats::add(const Mat& X_hat) {
  if (sum.size() == 0) {
    sum = Vec::Zero(X_hat.cols());
    outer = Mat::Zero(X_hat.cols(), X_hat.cols());
  }
  if (X_hat.cols() != sum.size())
    throw ShapeError("pca: feature rows have " + std::to_string(X_hat.cols()) + " channels, statistics have " +
                     std::to_string(sum.size()));
  sum += X_hat.colwise().sum().transpose();
  outer.noalias() += X_hat.transpose() * X_hat;
  n += static_cast<double>(X_hat.rows());
}

Mat PcaStats::covariance() const {
  if (n < 2) throw ShapeError("pca: need at least 2 tokens for a covariance, got " + std::to_string(n));
  const Vec mu = sum / n;
  return (outer - n * mu * mu.transpose()) / (n - 1.0);
}

PcaStats average_stats(const PcaStats& a, const PcaStats& b) {
  if (a.sum.size() != b.sum.size()) throw ShapeError("pca: q and k statistics have different widths");
  PcaStats s;
  s.sum = (a.sum + b.sum) / 2.0;
  s.outer = (a.outer + b.outer) / 2.0;
  s.n = a.n;
  return s;
}

PcaDecomposition pca_decomposition(const Mat& cov, Index r, bool adversarial) {
  const Index d = cov.rows();
  if (cov.cols() != d || d < 1) throw ShapeError("pca: covariance must be square and non-empty");
  if (!cov.allFinite()) throw ShapeError("pca: covariance has NaN or Inf");
  if ((cov - cov.transpose()).cwiseAbs().maxCoeff() > 1e-12 * (1.0 + cov.cwiseAbs().maxCoeff()))
    throw ShapeError("pca: covariance is not symmetric");
  if (r < 1 || r > d)
    throw ShapeError("pca: rank r = " + std::to_string(r) + " must lie in 1.." + std::to_string(d));
  Eigen::SelfAdjointEigenSolver<Mat> eig(cov);  // eigenvalues ascending
  PcaDecomposition out;
  out.eigenvalues = adversarial ? Vec(eig.eigenvalues()) : Vec(eig.eigenvalues().reverse());
  Mat& T = out.T;
  T.resize(r, d);
  for (Index a = 0; a < r; ++a) {
    Vec v = eig.eigenvectors().col(adversarial ? a : d - 1 - a);
    Index imax = 0;
    v.cwiseAbs().maxCoeff(&imax);
    if (v(imax) < 0) v = -v;
    T.row(a) = v.transpose();
  }
  return out;
}

Mat pca_rotation(const Mat& cov, Index r, bool adversarial) { return pca_decomposition(cov, r, adversarial).T; }

Mat pca_conv_mixing(const Mat& T, const Mat& w) {
  if (T.cols() != w.rows())
    throw ShapeError("pca: rotation has " + std::to_string(T.cols()) + " columns, conv filter has " +
                     std::to_string(w.rows()) + " channels");
  return T.cwiseAbs2() * w;
}

Mat rotated_conv_tap(const Mat& T, const Vec& w_tap) {
  if (T.cols() != w_tap.size()) throw ShapeError("pca: rotation and filter tap disagree in width");
  return T * w_tap.asDiagonal() * T.transpose();
}

}  // namespace statecut::ref
