#include "reference/mamba2_ssd.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "reference/recurrence_checks.h"

namespace statecut::ref {
namespace {

void check_ssd(const char* fn, const Mat& C, const Mat& B, const Mat& x, const Vec& dt, const Mat* S0) {
  // As linear attention: query C, key B, value x.
  detail::check_qkv(fn, C, B, x, S0);
  detail::check_steps(fn, "dt", dt, C.rows());
}

}  // namespace

HeadResult mamba2_ssd_recurrent(const Mat& C, const Mat& B, const Mat& x, const Vec& dt, double A, double D,
                                const Mat* S0) {
  check_ssd("mamba2_ssd_recurrent", C, B, x, dt, S0);
  const Index T = C.rows();
  Mat S = detail::initial_state(S0, C.cols(), x.cols());
  Mat y(T, x.cols());
  for (Index t = 0; t < T; ++t) {
    S *= std::exp(dt(t) * A);
    S.noalias() += B.row(t).transpose() * (dt(t) * x.row(t));
    y.row(t).noalias() = C.row(t) * S + D * x.row(t);
  }
  return {y, S};
}

HeadResult mamba2_ssd_chunked(const Mat& C, const Mat& B, const Mat& x, const Vec& dt, double A, double D,
                              const Mat* S0, Index chunk) {
  const char* fn = "mamba2_ssd_chunked";
  check_ssd(fn, C, B, x, dt, S0);
  detail::check_chunk(fn, chunk);
  const Index T = C.rows();
  Mat S = detail::initial_state(S0, C.cols(), x.cols());
  Mat y(T, x.cols());
  for (Index c0 = 0; c0 < T; c0 += chunk) {
    const Index n = std::min(chunk, T - c0);
    const auto Cc = C.middleRows(c0, n);
    const auto Bc = B.middleRows(c0, n);
    const auto Xc = x.middleRows(c0, n);
    const Mat Xdt = dt.segment(c0, n).asDiagonal() * Xc;  // value = dt x
    Vec G(n);  // within-chunk cumsum of dt A (the "segsum" of SSD)
    double acc = 0.0;
    for (Index i = 0; i < n; ++i) G(i) = acc += dt(c0 + i) * A;
    // L_ij = exp(G_i - G_j) = exp(a_{j+1} + ... + a_i), summed directly (no cancellation of large cumsums).
    Mat Ldec = Mat::Zero(n, n);
    for (Index i = 0; i < n; ++i) {
      double part = 0.0;
      Ldec(i, i) = 1.0;
      for (Index j = i - 1; j >= 0; --j) Ldec(i, j) = std::exp(part += dt(c0 + j + 1) * A);
    }
    const Mat CBL = (Cc * Bc.transpose()).cwiseProduct(Ldec);
    y.middleRows(c0, n).noalias() = G.array().exp().matrix().asDiagonal() * Cc * S + CBL * Xdt + D * Xc;
    const Vec tail = Ldec.row(n - 1).transpose();  // exp(G_last - G_j)
    S = std::exp(G(n - 1)) * S + (tail.asDiagonal() * Bc).transpose() * Xdt;
  }
  return {y, S};
}

}  // namespace statecut::ref
