/// Elementwise and per-row primitives the models need, in double (DESIGN.md §3, anchor-fla.md §1.3).
///
///   silu(x)      = x * sigmoid(x)                                   elementwise, [any]
///   sigmoid(x)   = 1 / (1 + exp(-x))                                computed without overflow for either sign
///   softplus(x)  = log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))   exact for large |x| (no torch threshold)
///   causal_depthwise_conv, x [T, C], w [C, W]:
///       y_t,c = bias_c + sum_{j=0}^{W-1} w(c, j) * xx_{t + j - (W-1), c}
///       where xx is history [W-1, C] (oldest first; zeros when nullptr) followed by x, so w(c, W-1) multiplies
///       the current token. SiLU is applied to y when apply_silu. Equals the conv of the concatenation.
///   l2norm_rows(x)    = x_t / sqrt(sum_c x_tc^2 + eps)               fla's l2norm_fwd convention (eps inside)
///   rmsnorm_rows(x,w) = x_t / sqrt(mean_c x_tc^2 + eps) * w           w [C]
///   gated_rmsnorm_rows(x, z, w), x, z [T, C], w [C], groups of group_size consecutive channels (0 = whole row):
///       norm_before_gate (fla FusedRMSNormGated):     y = rmsnorm_grouped(x) * w * silu(z)
///       otherwise (Mamba-2 / transformers gated norm): y = rmsnorm_grouped(x * silu(z)) * w
///   gdn_log_decay(a)  = -exp(A_log) * softplus(a + dt_bias)           GDN log-decay g <= 0, [T]
///   keep_columns(x, keep) = x(:, keep)                                channel subset in the given order
///
/// Shape errors (and out-of-range or repeated keep indices) throw ShapeError naming the argument.
#pragma once
#include "reference/types.h"

namespace statecut::ref {

Mat silu(const Mat& x);
Vec sigmoid(const Vec& x);
double softplus(double x);

Mat causal_depthwise_conv(const Mat& x, const Mat& w, const Vec* bias = nullptr, bool apply_silu = true,
                          const Mat* history = nullptr);

Mat l2norm_rows(const Mat& x, double eps = 1e-6);
Mat rmsnorm_rows(const Mat& x, const Vec& w, double eps);
Mat gated_rmsnorm_rows(const Mat& x, const Mat& z, const Vec& w, double eps, bool norm_before_gate = true,
                       Index group_size = 0);

Vec gdn_log_decay(const Vec& a, double A_log, double dt_bias);

Mat keep_columns(const Mat& x, const std::vector<Index>& keep);

}  // namespace statecut::ref
