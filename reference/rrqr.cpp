// Strong rank-revealing QR (Gu & Eisenstat 1996) and the published code's DRRQR loop. Math: rrqr.h.
#include "reference/rrqr.h"

#include "reference/select_rng.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace statecut::ref {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();

void check_input(const Mat& M, Index k, double f) {
  if (M.rows() < 1 || M.cols() < 1)
    throw ShapeError("rrqr: M must be non-empty, got " + std::to_string(M.rows()) + "x" + std::to_string(M.cols()));
  if (!M.allFinite()) throw ShapeError("rrqr: M has NaN or Inf entries");
  if (k < 1 || k > M.cols())
    throw ShapeError("rrqr: k = " + std::to_string(k) + " must lie in 1.." + std::to_string(M.cols()) +
                     " (the number of columns)");
  if (!(f > 1.0) || !std::isfinite(f)) throw ShapeError("rrqr: f must be finite and > 1, got " + std::to_string(f));
}

// R [n, n] from an m x n upper-trapezoidal factor (zero rows appended when m < n).
Mat square_r(const Mat& packed, Index n) {
  Mat r = Mat::Zero(n, n);
  const Index p = std::min(packed.rows(), n);
  r.topRows(p) = packed.topRows(p).triangularView<Eigen::Upper>();
  return r;
}

Mat householder_r(const Mat& M) {
  Eigen::HouseholderQR<Mat> qr(M);
  return square_r(qr.matrixQR(), M.cols());
}

double sum_log_abs_diag(const Mat& r, Index k) {
  double s = 0.0;
  for (Index i = 0; i < k; ++i) s += std::log(std::abs(r(i, i)));
  return s;
}

// Row-major argmax of rho^2 = W^2 + (1/omega)^2 gamma^2, given 1/omega^2 per row.
void argmax_rho(const Mat& w, const Vec& inv_omega_sq, const Vec& gamma, Index* bi, Index* bj, double* best) {
  *best = -1.0;
  for (Index i = 0; i < w.rows(); ++i)
    for (Index j = 0; j < w.cols(); ++j) {
      const double v = w(i, j) * w(i, j) + inv_omega_sq(i) * gamma(j) * gamma(j);
      if (v > *best) {
        *best = v;
        *bi = i;
        *bj = j;
      }
    }
  *best = std::sqrt(std::max(*best, 0.0));
}

// Plane rotation on rows (p, q) of X, columns from c0 on: [xp; xq] <- [c s; -s c] [xp; xq].
void rotate_rows(Mat& X, Index p, Index q, double c, double s, Index c0) {
  for (Index j = c0; j < X.cols(); ++j) {
    const double a = X(p, j), b = X(q, j);
    X(p, j) = c * a + s * b;
    X(q, j) = -s * a + c * b;
  }
}
// The same rotation on columns (p, q): X <- X G^T for G above (what A^{-1} needs when A <- G A).
void rotate_cols(Mat& X, Index p, Index q, double c, double s) {
  for (Index i = 0; i < X.rows(); ++i) {
    const double a = X(i, p), b = X(i, q);
    X(i, p) = c * a + s * b;
    X(i, q) = -s * a + c * b;
  }
}

// The state of the strong loop on the leading kk columns of R [n, n].
struct StrongState {
  Mat& r;
  std::vector<Index>& perm;
  Index kk;
  Mat ainv;   // [kk, kk]
  Mat w;      // [kk, n-kk]  A^{-1} B
  Vec gamma;  // [n-kk]

  void refresh() {
    const Index n = r.cols();
    auto A = r.topLeftCorner(kk, kk).triangularView<Eigen::Upper>();
    ainv = A.solve(Mat::Identity(kk, kk));
    w = A.solve(r.topRightCorner(kk, n - kk));
    gamma = r.bottomRightCorner(n - kk, n - kk).colwise().norm().transpose();
  }

  // Exchange kept slot i with discarded slot j (0-based within B/C); |det A| grows by rho_ij.
  void swap(Index i, Index j) {
    const Index n = r.cols();
    // 1. cycle column i to slot kk-1: adjacent swaps, each followed by one Givens on rows (p, p+1).
    for (Index p = i; p + 1 < kk; ++p) {
      r.col(p).swap(r.col(p + 1));
      std::swap(perm[p], perm[p + 1]);
      ainv.row(p).swap(ainv.row(p + 1));
      w.row(p).swap(w.row(p + 1));
      const double a = r(p, p), b = r(p + 1, p), h = std::hypot(a, b);
      if (h == 0.0) continue;
      rotate_rows(r, p, p + 1, a / h, b / h, p);
      r(p + 1, p) = 0.0;
      rotate_cols(ainv, p, p + 1, a / h, b / h);
    }
    // 2. bring discarded column j to slot kk; one Householder on rows kk.. makes it (mu, 0, ...).
    if (j != 0) {
      r.col(kk).swap(r.col(kk + j));
      std::swap(perm[kk], perm[kk + j]);
      w.col(0).swap(w.col(j));
      std::swap(gamma(0), gamma(j));
    }
    if (n - kk > 1) {
      Vec ess(n - kk - 1);
      double tau = 0.0, beta = 0.0;
      r.col(kk).segment(kk, n - kk).makeHouseholder(ess, tau, beta);
      Vec work(n - kk);
      r.block(kk, kk, n - kk, n - kk).applyHouseholderOnTheLeft(ess, tau, work.data());
      r(kk, kk) = beta;
      r.col(kk).tail(n - kk - 1).setZero();
    }
    // 3. exchange slots kk-1 and kk and restore the triangle with one Givens on rows (kk-1, kk).
    const Index t = kk - 1;
    const double alpha = r(t, t), beta = r(t, kk), mu = r(kk, kk);
    const Vec u = -alpha * ainv.col(t).head(t);            // A1^{-1} a
    const Vec y = w.col(0).head(t) + u * w(t, 0);          // A1^{-1} b, since W(t,0) = beta/alpha
    const Eigen::RowVectorXd wlast = w.row(t).tail(n - kk - 1);  // b2^T / alpha
    r.col(t).swap(r.col(kk));
    std::swap(perm[t], perm[kk]);
    const double h = std::hypot(beta, mu), c = beta / h, s = mu / h;
    rotate_rows(r, t, kk, c, s, t);
    r(kk, t) = 0.0;
    // new W = A'^{-1} B' with A' = [A1 b; 0 h], B' = [a B1; c*alpha b2'^T] (rank-two update)
    const Eigen::RowVectorXd b2n = r.row(t).tail(n - kk - 1) / h;  // b2'^T / h
    w(t, 0) = r(t, kk) / h;
    w.col(0).head(t) = u - y * w(t, 0);
    if (n - kk > 1) {
      w.topRightCorner(t, n - kk - 1) += u * wlast - y * b2n;
      w.row(t).tail(n - kk - 1) = b2n;
    }
    ainv.col(t).head(t) = -y / h;
    ainv(t, t) = 1.0 / h;
    gamma = r.bottomRightCorner(n - kk, n - kk).colwise().norm().transpose();
  }
};

// Reorders the trailing columns kk.. of R by QRCP of its C block and makes C upper triangular.
void pivot_trailing(Mat& r, std::vector<Index>& perm, Index kk) {
  const Index n = r.cols();
  if (n - kk < 2) return;
  Eigen::ColPivHouseholderQR<Mat> qr(r.bottomRightCorner(n - kk, n - kk));
  const auto& idx = qr.colsPermutation().indices();
  const Mat top = r.topRightCorner(kk, n - kk);
  std::vector<Index> old(perm.begin() + kk, perm.end());
  for (Index j = 0; j < n - kk; ++j) {
    r.col(kk + j).head(kk) = top.col(idx(j));
    perm[kk + j] = old[idx(j)];
  }
  r.bottomRightCorner(n - kk, n - kk) = qr.matrixQR().triangularView<Eigen::Upper>();
}

void run_faithful(const Mat& M, Index k, const RrqrOptions& opt, RrqrResult& res) {
  const Index m = M.rows(), n = M.cols();
  Mat sub = M.cast<float>().cast<double>();  // rrqr.py works on a float32 copy
  if (m > opt.faithful_rows) {
    SelectRng rng = SelectRng::for_head(opt.seed, opt.layer, opt.head);
    const std::vector<Index> rows = faithful_subsample(m, opt.faithful_rows, rng);
    Mat picked(static_cast<Index>(rows.size()), n);
    for (std::size_t t = 0; t < rows.size(); ++t) picked.row(static_cast<Index>(t)) = sub.row(rows[t]);
    sub.swap(picked);
  }
  const Mat r0 = householder_r(sub);
  Eigen::ColPivHouseholderQR<Mat> qr(r0);
  res.r = square_r(qr.matrixQR(), n);
  for (Index j = 0; j < n; ++j) res.perm[j] = qr.colsPermutation().indices()(j);
  res.k_certified = k;
  res.log_abs_det.push_back(sum_log_abs_diag(res.r, k));
  if (k == n) return;
  while (res.swaps < opt.faithful_max_swaps) {
    if (res.r.diagonal().head(k).cwiseAbs().minCoeff() < opt.faithful_singular) break;
    auto A = res.r.topLeftCorner(k, k).triangularView<Eigen::Upper>();
    const Mat w = A.solve(res.r.topRightCorner(k, n - k));
    const Mat ainv = A.solve(Mat::Identity(k, k));
    const Vec inv_omega = ainv.rowwise().norm().array() + 1e-12;
    const Vec gamma = res.r.bottomRightCorner(n - k, n - k).colwise().norm().transpose();
    Index bi = 0, bj = 0;
    double best = 0.0;
    argmax_rho(w, inv_omega.array().square().matrix(), gamma, &bi, &bj, &best);
    if (best <= opt.f) break;
    std::swap(res.perm[bi], res.perm[k + bj]);
    Mat permuted(n, n);
    for (Index j = 0; j < n; ++j) permuted.col(j) = r0.col(res.perm[j]);
    res.r = householder_r(permuted);  // fresh unpivoted QR, as rrqr.py does after every swap
    ++res.swaps;
    res.log_abs_det.push_back(sum_log_abs_diag(res.r, k));
  }
}

}  // namespace

QrcpResult qrcp(const Mat& M) {
  if (M.rows() < 1 || M.cols() < 1) throw ShapeError("qrcp: M must be non-empty");
  if (!M.allFinite()) throw ShapeError("qrcp: M has NaN or Inf entries");
  Eigen::ColPivHouseholderQR<Mat> qr(M);
  const Index p = std::min(M.rows(), M.cols());
  QrcpResult res;
  res.r = qr.matrixQR().topRows(p).triangularView<Eigen::Upper>();
  res.q = qr.householderQ() * Mat::Identity(M.rows(), p);
  res.perm.resize(M.cols());
  for (Index j = 0; j < M.cols(); ++j) res.perm[j] = qr.colsPermutation().indices()(j);
  return res;
}

Mat compress_to_r(const Mat& M, Compression how, Compression* used) {
  if (M.rows() < 1 || M.cols() < 1) throw ShapeError("rrqr: M must be non-empty");
  const Index m = M.rows(), n = M.cols();
  if (how == Compression::Auto || how == Compression::Cholesky) {
    if (how == Compression::Cholesky || m >= 4 * n) {
      Mat g = Mat::Zero(n, n);
      g.selfadjointView<Eigen::Lower>().rankUpdate(M.transpose());
      Eigen::SelfAdjointEigenSolver<Mat> eig(g.selfadjointView<Eigen::Lower>(), Eigen::EigenvaluesOnly);
      const double lmax = eig.eigenvalues().maxCoeff(), lmin = eig.eigenvalues().minCoeff();
      // kappa(M)^2 = lmin/lmax; accepted when kappa <= 1e4 (Gram rounding eps*kappa^2 <= ~1e-8).
      const bool ok = lmax > 0.0 && lmin >= 1e-8 * lmax;
      Eigen::LLT<Mat> llt(g.selfadjointView<Eigen::Lower>());
      if (how == Compression::Cholesky || (ok && llt.info() == Eigen::Success)) {
        if (llt.info() != Eigen::Success) throw ShapeError("rrqr: Cholesky of M^T M failed (M rank deficient)");
        if (used) *used = Compression::Cholesky;
        return llt.matrixU();
      }
    }
  }
  if (used) *used = Compression::Householder;
  return householder_r(M);
}

RrqrCertificate rrqr_certificate(const Mat& r, Index k) {
  const Index n = r.cols();
  if (r.rows() != n || k < 1 || k > n) throw ShapeError("rrqr_certificate: need square R and 1 <= k <= n");
  RrqrCertificate c;
  auto A = r.topLeftCorner(k, k).triangularView<Eigen::Upper>();
  c.w = A.solve(r.topRightCorner(k, n - k));
  const Mat ainv = A.solve(Mat::Identity(k, k));
  c.omega = ainv.rowwise().norm().cwiseInverse();
  c.gamma = r.bottomRightCorner(n - k, n - k).colwise().norm().transpose();
  c.rho.resize(k, n - k);
  for (Index i = 0; i < k; ++i)
    for (Index j = 0; j < n - k; ++j) c.rho(i, j) = std::hypot(c.w(i, j), c.gamma(j) / c.omega(i));
  c.max_rho = c.rho.size() ? c.rho.maxCoeff() : 0.0;
  return c;
}

RrqrResult strong_rrqr(const Mat& M, Index k, const RrqrOptions& opt) {
  check_input(M, k, opt.f);
  const Index n = M.cols();
  RrqrResult res;
  res.k = k;
  res.perm.resize(n);
  if (opt.mode == DrrqrMode::Faithful) {
    if (opt.faithful_rows < 1) throw ShapeError("rrqr: faithful_rows must be >= 1");
    run_faithful(M, k, opt, res);
  } else {
    const Mat r0 = compress_to_r(M, opt.compression);
    Eigen::ColPivHouseholderQR<Mat> qr(r0);
    res.r = square_r(qr.matrixQR(), n);
    for (Index j = 0; j < n; ++j) res.perm[j] = qr.colsPermutation().indices()(j);
    // numerical rank: the certificate needs a non-singular A
    const double tol = 4.0 * n * kEps * std::abs(res.r(0, 0));
    Index rank = 0;
    while (rank < n && std::abs(res.r(rank, rank)) > tol) ++rank;
    const Index kk = std::min(k, rank);
    res.k_certified = kk;
    if (kk > 0 && kk < n) {
      StrongState st{res.r, res.perm, kk, {}, {}, {}};
      st.refresh();
      res.log_abs_det.push_back(sum_log_abs_diag(res.r, kk));
      while (true) {
        Index bi = 0, bj = 0;
        double best = 0.0;
        argmax_rho(st.w, st.ainv.rowwise().squaredNorm(), st.gamma, &bi, &bj, &best);
        if (best <= opt.f) {
          st.refresh();  // updates drift by ~eps per swap: confirm from a fresh solve
          argmax_rho(st.w, st.ainv.rowwise().squaredNorm(), st.gamma, &bi, &bj, &best);
          if (best <= opt.f) break;
        }
        if (opt.max_swaps >= 0 && res.swaps >= opt.max_swaps) break;
        if (res.swaps >= 1000 + n * n) break;  // unreachable in exact arithmetic (det bound); a guard
        st.swap(bi, bj);
        ++res.swaps;
        res.log_abs_det.push_back(sum_log_abs_diag(res.r, kk));
      }
    } else if (kk == n) {
      res.log_abs_det.push_back(sum_log_abs_diag(res.r, kk));
    }
    // C is left general by the swaps; QRCP of it restores the triangle and orders the trailing
    // columns (the next k - kk pivots when the rank is below k). Neither changes gamma or W's values.
    pivot_trailing(res.r, res.perm, kk);
  }
  if (res.k_certified > 0 && res.k_certified < n) {
    res.max_rho = rrqr_certificate(res.r, res.k_certified).max_rho;
    res.certified = res.max_rho <= opt.f;
  } else {
    res.certified = true;
  }
  return res;
}

std::vector<Index> drrqr_pivots(const Mat& M, Index k, const RrqrOptions& opt) {
  RrqrResult r = strong_rrqr(M, k, opt);
  return std::vector<Index>(r.perm.begin(), r.perm.begin() + k);
}

}  // namespace statecut::ref
