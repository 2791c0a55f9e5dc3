#include "reference/primitives.h"

#include <cmath>
#include <string>

namespace statecut::ref {
namespace {

double sigmoid1(double x) {
  // Both branches evaluate exp of a non-positive number, so neither overflows.
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

std::string dims(const Mat& m) { return "[" + std::to_string(m.rows()) + ", " + std::to_string(m.cols()) + "]"; }

/// Rows of x scaled by 1/sqrt(mean over each group of group_size channels of x^2 + eps).
Mat rms_grouped(const Mat& x, double eps, Index group_size) {
  Mat y(x.rows(), x.cols());
  for (Index t = 0; t < x.rows(); ++t)
    for (Index c0 = 0; c0 < x.cols(); c0 += group_size) {
      const auto seg = x.row(t).segment(c0, group_size);
      const double ms = seg.squaredNorm() / static_cast<double>(group_size);
      y.row(t).segment(c0, group_size) = seg / std::sqrt(ms + eps);
    }
  return y;
}

}  // namespace

Mat silu(const Mat& x) { return x.unaryExpr([](double v) { return v * sigmoid1(v); }); }

Vec sigmoid(const Vec& x) { return x.unaryExpr([](double v) { return sigmoid1(v); }); }

double softplus(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }

Mat causal_depthwise_conv(const Mat& x, const Mat& w, const Vec* bias, bool apply_silu, const Mat* history) {
  const Index T = x.rows(), C = x.cols(), W = w.cols();
  if (w.rows() != C) throw ShapeError("causal_depthwise_conv: w is " + dims(w) + " but x has " + std::to_string(C) + " channels");
  if (W < 1) throw ShapeError("causal_depthwise_conv: w has no taps");
  if (bias && bias->size() != C)
    throw ShapeError("causal_depthwise_conv: bias has " + std::to_string(bias->size()) + " entries, expected " +
                     std::to_string(C));
  if (history && (history->rows() != W - 1 || history->cols() != C))
    throw ShapeError("causal_depthwise_conv: history is " + dims(*history) + ", expected [" + std::to_string(W - 1) +
                     ", " + std::to_string(C) + "]");
  // xx = [history; x]: row r of xx is input position r - (W-1).
  Mat xx = Mat::Zero(W - 1 + T, C);
  if (history) xx.topRows(W - 1) = *history;
  xx.bottomRows(T) = x;
  Mat y(T, C);
  for (Index t = 0; t < T; ++t)
    for (Index c = 0; c < C; ++c) {
      double acc = bias ? (*bias)(c) : 0.0;
      for (Index j = 0; j < W; ++j) acc += w(c, j) * xx(t + j, c);
      y(t, c) = acc;
    }
  return apply_silu ? silu(y) : y;
}

Mat l2norm_rows(const Mat& x, double eps) {
  Mat y(x.rows(), x.cols());
  for (Index t = 0; t < x.rows(); ++t) y.row(t) = x.row(t) / std::sqrt(x.row(t).squaredNorm() + eps);
  return y;
}

Mat rmsnorm_rows(const Mat& x, const Vec& w, double eps) {
  if (w.size() != x.cols())
    throw ShapeError("rmsnorm_rows: w has " + std::to_string(w.size()) + " entries but x has " +
                     std::to_string(x.cols()) + " columns");
  if (x.cols() == 0) return x;
  return rms_grouped(x, eps, x.cols()) * w.asDiagonal();
}

Mat gated_rmsnorm_rows(const Mat& x, const Mat& z, const Vec& w, double eps, bool norm_before_gate,
                       Index group_size) {
  if (z.rows() != x.rows() || z.cols() != x.cols())
    throw ShapeError("gated_rmsnorm_rows: z is " + dims(z) + " but x is " + dims(x));
  if (w.size() != x.cols())
    throw ShapeError("gated_rmsnorm_rows: w has " + std::to_string(w.size()) + " entries but x has " +
                     std::to_string(x.cols()) + " columns");
  const Index gs = group_size == 0 ? x.cols() : group_size;
  if (gs < 0 || (x.cols() > 0 && x.cols() % gs != 0))
    throw ShapeError("gated_rmsnorm_rows: group_size " + std::to_string(group_size) + " does not divide " +
                     std::to_string(x.cols()) + " columns");
  if (x.cols() == 0) return x;
  const Mat gate = silu(z);
  if (norm_before_gate) return (rms_grouped(x, eps, gs) * w.asDiagonal()).cwiseProduct(gate);
  return rms_grouped(x.cwiseProduct(gate), eps, gs) * w.asDiagonal();
}

Vec gdn_log_decay(const Vec& a, double A_log, double dt_bias) {
  const double A = std::exp(A_log);
  return a.unaryExpr([&](double v) { return -A * softplus(v + dt_bias); });
}

Mat keep_columns(const Mat& x, const std::vector<Index>& keep) {
  std::vector<bool> seen(static_cast<std::size_t>(x.cols()), false);
  Mat y(x.rows(), static_cast<Index>(keep.size()));
  for (std::size_t i = 0; i < keep.size(); ++i) {
    const Index c = keep[i];
    if (c < 0 || c >= x.cols())
      throw ShapeError("keep_columns: index " + std::to_string(c) + " outside [0, " + std::to_string(x.cols()) + ")");
    if (seen[static_cast<std::size_t>(c)]) throw ShapeError("keep_columns: index " + std::to_string(c) + " repeated");
    seen[static_cast<std::size_t>(c)] = true;
    y.col(static_cast<Index>(i)) = x.col(c);
  }
  return y;
}

}  // namespace statecut::ref
