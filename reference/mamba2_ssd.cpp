#include "reference/mamba2_ssd.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "reference/chunk_scan.h"
#include "reference/recurrence_checks.h"

namespace statecut::ref {
HeadResult mamba2_ssd_recurrent(const Mat& C, const Mat& B, const Mat& x, const Vec& dt, double A, double D,
                                const Mat* S0) {
  // Checked as linear attention: query C, key B, value x.
  detail::check_rule("mamba2_ssd_recurrent", C, B, x, S0, {{"dt", dt}});
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
  detail::check_rule(fn, C, B, x, S0, {{"dt", dt}});
  // Query C, key B, value x: the loop of linear attention.
  return detail::scan_chunks(fn, C, B, x, S0, chunk, [&](const detail::ChunkRows& c, Mat& S, auto& Y) {
    const Index n = c.n;
    const auto &Cc = c.Q, &Bc = c.K, &Xc = c.V;
    const Mat Xdt = dt.segment(c.c0, n).asDiagonal() * Xc;  // value = dt x
    // G = within-chunk cumsum of a = dt A (the "segsum" of SSD), L_ij = exp(a_{j+1} + ... + a_i).
    const detail::ChunkDecay dec = detail::chunk_decay(dt.segment(c.c0, n) * A);
    const Vec& G = dec.G;
    const Mat& Ldec = dec.D;
    const Mat CBL = (Cc * Bc.transpose()).cwiseProduct(Ldec);
    Y.noalias() = G.array().exp().matrix().asDiagonal() * Cc * S + CBL * Xdt + D * Xc;
    const Vec tail = Ldec.row(n - 1).transpose();  // exp(G_last - G_j)
    S = std::exp(G(n - 1)) * S + (tail.asDiagonal() * Bc).transpose() * Xdt;
  });
}

}  // namespace statecut::ref
