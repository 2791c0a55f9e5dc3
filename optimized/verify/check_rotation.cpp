// The rotated heads of a pca prune against the source (check_rotation.h has the bounds and why they hold).
#include "optimized/verify/check_rotation.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "optimized/verify/verify_context.h"
#include "optimized/verify/verify_report.h"

namespace statecut::verify {

namespace {

constexpr double kEps64 = std::numeric_limits<double>::epsilon() / 2;  // f64's unit roundoff

std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

/// One side of a head's stacked blocks: the blocks' rows side by side, and where each block's columns start.
struct Stack {
  std::vector<const RotatedBlock*> blocks;
  std::vector<int64_t> col0;
  std::vector<torch::Tensor> pruned, source;  ///< [k', n_b] and [dk, n_b], f64
  torch::Tensor P, S;                         ///< concatenated

  void add(const RotatedBlock& b, const torch::Tensor& p, const torch::Tensor& s) {
    col0.push_back(pruned.empty() ? 0 : col0.back() + pruned.back().size(1));
    blocks.push_back(&b);
    pruned.push_back(p);
    source.push_back(s);
  }
  bool empty() const { return blocks.empty(); }
  void stack() {
    P = torch::cat(pruned, 1);
    S = torch::cat(source, 1);
  }
  /// Channel i's rows in every block of the stack: "q_proj.weight row 3, k_proj.weight row 3".
  std::string rows_of(int64_t i) const {
    std::string out;
    for (const RotatedBlock* b : blocks)
      out += (out.empty() ? "" : ", ") + b->tensor + " row " + std::to_string(b->rows[static_cast<size_t>(i)]);
    return out;
  }
};

torch::Tensor pruned_rows(const torch::Tensor& t, const std::vector<int64_t>& rows) {
  return t.index_select(0, torch::tensor(rows, torch::kInt64))
      .reshape({static_cast<int64_t>(rows.size()), -1})
      .to(torch::kFloat64);
}

torch::Tensor source_rows(const torch::Tensor& t, int64_t row0, int64_t dk) {
  return t.narrow(0, row0, dk).reshape({dk, -1}).to(torch::kFloat64);
}

double fro(const torch::Tensor& x) { return x.numel() == 0 ? 0.0 : x.norm().item<double>(); }

/// figure ≤ bound as a ratio (0/0: both exactly zero, a pass).
double ratio(double figure, double bound) { return figure == 0 ? 0.0 : bound > 0 ? figure / bound : INFINITY; }

}  // namespace

RotationSummary check_rotated_heads(const WeightSource& pruned, const WeightSource& src,
                                    const std::vector<RotatedHead>& heads, std::vector<std::string>& problems,
                                    std::string& where) {
  RotationSummary sum;
  for (const RotatedHead& h : heads) {
    const std::string at = at_head(h.layer, h.head);
    Stack lin, sq;  // T-rotated blocks (q, k, a bias beside them) and (T∘T)-rotated ones (the convs and their bias)
    double u = 0;   // the coarsest stored dtype among the head's pruned blocks
    std::vector<const RotatedBlock*> order;  // q before k, a block before its bias: the order messages name them in
    for (const RotatedBlock& b : h.blocks) order.push_back(&b);
    const auto rank = [](const std::string& kind) {
      return (kind.find("conv") != std::string::npos ? 4 : 0) + (kind.find("bias") != std::string::npos ? 2 : 0) +
             (kind[0] == 'k' ? 1 : 0);
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](const RotatedBlock* a, const RotatedBlock* b) { return rank(a->kind) < rank(b->kind); });
    for (const RotatedBlock* bp : order) {
      const RotatedBlock& b = *bp;
      const torch::Tensor pt = pruned.raw(b.tensor), st = src.raw(b.tensor);
      u = std::max(u, unit_roundoff(pt.scalar_type()));
      (b.kind.find("conv") != std::string::npos ? sq : lin).add(b, pruned_rows(pt, b.rows), source_rows(st, b.src_row0, h.dk));
    }
    if (lin.empty()) {
      ++sum.unchecked;
      continue;
    }
    lin.stack();
    const int64_t dk = h.dk, kp = lin.P.size(0), n = lin.S.size(1);
    if (n < dk) {  // fewer columns than source channels: T is not determined by the weights
      ++sum.unchecked;
      continue;
    }
    // T̂ᵀ = R⁻¹ Qᵀ W'ᵀ with Wᵀ = QR: the least-squares solution of T̂ W ≈ W'.
    const auto [Q, R] = torch::linalg_qr(lin.S.t());
    const torch::Tensor sv = torch::linalg_svdvals(R);
    const double smax = sv[0].item<double>(), smin = sv[dk - 1].item<double>();
    if (!(smin > 0) || !std::isfinite(smax)) {
      problems.push_back(at + ": the source's q/k rows of this head are rank-deficient (σ_min = " + num(smin) +
                         "): no rotation of them can be recovered");
      if (where.empty()) where = at + " rotation";
      continue;
    }
    const torch::Tensor T = torch::linalg_solve_triangular(R, Q.t().matmul(lin.P.t()), /*upper=*/true).t();  // [k', dk]
    const double slack = 4.0 * static_cast<double>(n * dk) * kEps64 * (smax / smin);
    const double ur = u / (1 - u);
    // Row by row (least squares is: row i of T̂ fits row i of W' alone): e_i = W'_i − T_i W, ‖e_i‖ ≤ ur‖W'_i‖,
    // the residual's row i is e_i (I − W⁺W), δ_i = ‖T̂_i − T_i‖ = ‖e_i W⁺‖ ≤ ur‖W'_i‖ / σ_min.
    const torch::Tensor nWp = lin.P.norm(2, {1});                           // ‖W'_i‖
    const torch::Tensor delta = nWp * (ur / smin) + slack;                  // δ_i
    ++sum.heads;
    std::string head_problem;
    // The row whose figure/bound is largest; a failure message for it when it exceeds 1.
    const auto worst_of = [&](const torch::Tensor& figure, const torch::Tensor& bound) {
      const torch::Tensor q = torch::where(figure == 0, torch::zeros_like(figure), figure / bound);
      const int64_t i = q.argmax().item<int64_t>();
      sum.worst = std::max(sum.worst, q[i].item<double>());
      return std::make_pair(i, q[i].item<double>());
    };
    const auto channel = [&](int64_t i, const Stack& st) {
      return "channel " + std::to_string(i) + " of the rotation (" + st.rows_of(i) + ")";
    };

    const torch::Tensor res = (lin.P - T.matmul(lin.S)).norm(2, {1});
    const auto [ri, rq] = worst_of(res, nWp * ur + slack * smax);
    if (rq > 1)
      head_problem = channel(ri, lin) + ": no rotation of the source's q/k rows: ‖W'_i − T̂_i W‖ = " +
                     num(res[ri].item<double>() / nWp[ri].item<double>()) + " of ‖W'_i‖, rounding allows " + num(ur);

    // (T̂T̂ᵀ − I)_ij = T_i d_jᵀ + d_i T_jᵀ + d_i d_jᵀ with ‖d_i‖ ≤ δ_i, plus T's own f64 orthonormality.
    const torch::Tensor gram = (T.matmul(T.t()) - torch::eye(kp, torch::kFloat64)).abs();
    const torch::Tensor gbound = delta.unsqueeze(1) + delta.unsqueeze(0) + delta.unsqueeze(1) * delta.unsqueeze(0) +
                                 16.0 * static_cast<double>(dk) * kEps64;
    const torch::Tensor grow = (gram / gbound).amax(1);  // each row's worst entry, as a fraction of its bound
    const auto [oi, oq] = worst_of(grow, torch::ones_like(grow));
    if (head_problem.empty() && oq > 1)
      head_problem = channel(oi, lin) + ": the q/k rows fit the source's only through a T̂ whose rows are not " +
                     "orthonormal (|T̂T̂ᵀ − I| reaches " + num(gram[oi].max().item<double>()) + ", rounding allows " +
                     num(gbound[oi][gram[oi].argmax()].item<double>()) + "): zeroed, scaled or copied from another channel";

    if (head_problem.empty() && !sq.empty()) {
      // Row i of (T∘T − T̂∘T̂)C is Σ_d a_d b_d C_d with a = T_i − T̂_i (‖a‖ ≤ δ_i), |b_d| = |T_id + T̂_id| ≤ 2|T̂_id| + δ_i:
      // its norm is at most δ_i ‖diag(2|T̂_i| + δ_i) C‖_F.
      sq.stack();
      const torch::Tensor cres = (sq.P - (T * T).matmul(sq.S)).norm(2, {1});
      const torch::Tensor cn2 = sq.S.pow(2).sum(1);                                     // ‖C_d‖², [dk]
      const torch::Tensor weight = (2 * T.abs() + delta.unsqueeze(1)).pow(2);           // [k', dk]
      const torch::Tensor cbound = sq.P.norm(2, {1}) * ur + delta * weight.matmul(cn2).sqrt() +
                                   static_cast<double>(dk) * kEps64 * cn2.sum().sqrt();
      const auto [ci, cq] = worst_of(cres, cbound);
      if (cq > 1)
        head_problem = channel(ci, sq) + ": the conv filters are not (T̂∘T̂) times the source's: ‖C'_i − (T̂_i∘T̂_i)C‖ = " +
                       num(cres[ci].item<double>()) + ", rounding and T̂'s error allow " + num(cbound[ci].item<double>());
    }
    if (!head_problem.empty()) {
      problems.push_back(at + ": " + head_problem);
      if (where.empty()) where = at + " rotation";
    }
  }
  return sum;
}

}  // namespace statecut::verify
