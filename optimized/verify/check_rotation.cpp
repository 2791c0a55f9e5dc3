// The rotated heads of a pca prune against the source (check_rotation.h has the bounds and why they hold).
#include "optimized/verify/check_rotation.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

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
  /// The block whose part of row i of `residual` [k', n] is largest.
  std::string largest_in(const torch::Tensor& residual, int64_t i) const {
    size_t best = 0;
    double v = -1;
    for (size_t b = 0; b < blocks.size(); ++b) {
      const double x = residual[i].narrow(0, col0[b], pruned[b].size(1)).norm().item<double>();
      if (x > v) v = x, best = b;
    }
    return blocks[best]->tensor;
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

/// T̂ known to δ_i ≤ this (|T̂T̂ᵀ − I| then bounded by ≤ 0.21): beyond it a row scaled by 10% could no longer be told
/// from rounding, and the head is reported as not determined rather than passed.
constexpr double kMaxDelta = 0.1;

}  // namespace

RotationSummary check_rotated_heads(const WeightSource& pruned, const WeightSource& src,
                                    const std::vector<RotatedHead>& heads, std::vector<std::string>& problems,
                                    std::string& where, RecoveredRotations* recovered) {
  RotationSummary sum;
  // raw() copies a whole tensor, and every head of a layer reads the same q/k/conv tensors: one layer's copies are kept
  // while its heads are checked (heads come in layer order; out of order would only cost copies).
  std::map<std::string, torch::Tensor> pruned_raw, source_raw;
  int cached_layer = -1;
  const auto raw = [](const WeightSource& ws, std::map<std::string, torch::Tensor>& cache, const std::string& name) {
    auto it = cache.find(name);
    if (it == cache.end()) it = cache.emplace(name, ws.raw(name)).first;
    return it->second;
  };
  for (const RotatedHead& h : heads) {
    if (h.layer != cached_layer) {
      pruned_raw.clear(), source_raw.clear();
      cached_layer = h.layer;
    }
    const std::string at = at_head(h.layer, h.head);
    Stack lin, sq;  // T-rotated blocks (q, k, a bias beside them) and (T∘T)-rotated ones (the convs and their bias)
    double u = 0, eta = 0;  // the coarsest stored dtype among the head's pruned blocks: u|x| + η
    std::vector<const RotatedBlock*> order;  // q before k, a block before its bias: the order messages name them in
    for (const RotatedBlock& b : h.blocks) order.push_back(&b);
    const auto order_of = [](const std::string& kind) {
      return (kind.find("conv") != std::string::npos ? 4 : 0) + (kind.find("bias") != std::string::npos ? 2 : 0) +
             (kind[0] == 'k' ? 1 : 0);
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](const RotatedBlock* a, const RotatedBlock* b) { return order_of(a->kind) < order_of(b->kind); });
    for (const RotatedBlock* bp : order) {
      const RotatedBlock& b = *bp;
      const torch::Tensor pt = raw(pruned, pruned_raw, b.tensor), st = raw(src, source_raw, b.tensor);
      u = std::max(u, unit_roundoff(pt.scalar_type()));
      eta = std::max(eta, subnormal_half_spacing(pt.scalar_type()));
      (b.kind.find("conv") != std::string::npos ? sq : lin).add(b, pruned_rows(pt, b.rows), source_rows(st, b.src_row0, h.dk));
    }
    if (lin.empty()) {
      ++sum.unchecked;
      continue;
    }
    lin.stack();
    if (!sq.empty()) sq.stack();
    const double ur = u / (1 - u);
    const int64_t dk = h.dk, kp = lin.P.size(0), n = lin.S.size(1);
    const auto fail = [&](const std::string& what) {
      problems.push_back(at + ": " + what);
      if (where.empty()) where = at + " rotation";
    };
    const auto channel = [&](int64_t i, const Stack& st) {
      return "channel " + std::to_string(i) + " of the rotation (" + st.rows_of(i) + ")";
    };
    // NaN or Inf in a rotated row: no bound below could see it (every comparison with NaN is false).
    bool finite = true;
    for (const Stack* st : {&lin, &sq})
      if (finite && !st->empty()) {
        const torch::Tensor bad = st->P.isfinite().logical_not().any(1);
        if (bad.any().item<bool>()) {
          const int64_t i = bad.nonzero()[0][0].item<int64_t>();
          fail(channel(i, *st) + ": holds NaN or Inf");
          finite = false;
        }
      }
    if (!finite) continue;

    // W = U Σ Vᵀ; its numerical row space V_r (σ > σ_max·max(dk, n)·ε, LAPACK's rank rule). A surgery's row lies in
    // it up to e_i, so the residual W'_i − W'_i V_r V_rᵀ is at most ‖e_i‖ (+ V_r's own f64 error), whatever κ(W) is.
    const auto [U, S, Vh] = torch::linalg_svd(lin.S, /*full_matrices=*/false);
    const double smax = S[0].item<double>();
    const int64_t rank = (S > smax * static_cast<double>(std::max(dk, n)) * kEps64).sum().item<int64_t>();
    const torch::Tensor Vr = Vh.narrow(0, 0, rank).t();  // [n, r]
    const torch::Tensor nWp = lin.P.norm(2, {1});       // ‖W'_i‖
    const torch::Tensor err = nWp * ur + std::sqrt(static_cast<double>(n)) * eta;  // ≥ ‖e_i‖
    ++sum.heads;
    std::string head_problem;
    // The row whose figure/bound is largest (NaN-safe: a ratio that is not ≤ 1 fails).
    const auto worst_of = [&](const torch::Tensor& figure, const torch::Tensor& bound) {
      const torch::Tensor q = torch::where(figure == 0, torch::zeros_like(figure), figure / bound);
      const int64_t i = q.argmax().item<int64_t>();
      const double qi = q[i].item<double>();
      sum.worst = std::max(sum.worst, qi);
      return std::make_pair(i, qi);
    };

    const torch::Tensor resid = lin.P - lin.P.matmul(Vr).matmul(Vr.t());
    const torch::Tensor res = resid.norm(2, {1});
    const auto [ri, rq] = worst_of(res, err + nWp * (8.0 * static_cast<double>(n) * kEps64));
    if (!(rq <= 1)) {
      fail(channel(ri, lin) + ": no rotation of the source's q/k rows (the largest misfit in " +
           lin.largest_in(resid, ri) + "): ‖W'_i − T̂_i W‖ = " + num(res[ri].item<double>() / nWp[ri].item<double>()) +
           " of ‖W'_i‖, rounding allows " + num(ur));
      continue;
    }
    // T̂ = W' W⁺, and how well the weights determine it: δ_i = ‖T̂_i − T_i‖ ≤ ‖e_i‖ / σ_min, plus the f64 slack.
    const double smin = rank == dk ? S[dk - 1].item<double>() : 0.0;
    const double slack = 4.0 * static_cast<double>(n * dk) * kEps64 * (smin > 0 ? smax / smin : INFINITY);
    const torch::Tensor delta = err / smin + slack;
    const double dmax = rank == dk ? delta.max().item<double>() : INFINITY;
    if (!(dmax <= kMaxDelta)) {
      ++sum.undetermined;
      if (sum.first_undetermined.empty())
        sum.first_undetermined =
            at + ": the source's q/k rows of this head " +
            (rank < dk ? "have rank " + std::to_string(rank) + " < dk " + std::to_string(dk)
                       : "are ill-conditioned (κ = " + num(smax / smin) + ")") +
            (std::isfinite(dmax) ? ", so T is known only to within " + num(dmax) : std::string(", so T is not determined")) +
            ": its rows' fit to the source was checked, their orthonormality and the conv filters could not be";
      continue;
    }
    const torch::Tensor T = lin.P.matmul(Vh.t()).div(S).matmul(U.t());  // [k', dk]

    // (T̂T̂ᵀ − I)_ij = T_i d_jᵀ + d_i T_jᵀ + d_i d_jᵀ with ‖d_i‖ ≤ δ_i, plus T's own f64 orthonormality.
    const torch::Tensor gram = (T.matmul(T.t()) - torch::eye(kp, torch::kFloat64)).abs();
    const torch::Tensor gbound = delta.unsqueeze(1) + delta.unsqueeze(0) + delta.unsqueeze(1) * delta.unsqueeze(0) +
                                 16.0 * static_cast<double>(dk) * kEps64;
    const torch::Tensor grow = (gram / gbound).amax(1);  // each row's worst entry, as a fraction of its bound
    const auto [oi, oq] = worst_of(grow, torch::ones_like(grow));
    if (!(oq <= 1))
      head_problem = channel(oi, lin) + ": the q/k rows fit the source's only through a T̂ whose rows are not " +
                     "orthonormal (|T̂T̂ᵀ − I| reaches " + num(gram[oi].max().item<double>()) + ", rounding allows " +
                     num(gbound[oi][gram[oi].argmax()].item<double>()) + "): zeroed, scaled or copied from another channel";

    if (head_problem.empty() && !sq.empty()) {
      // Row i of (T∘T − T̂∘T̂)C is Σ_d a_d b_d C_d with a = T_i − T̂_i (‖a‖ ≤ δ_i), |b_d| = |T_id + T̂_id| ≤ 2|T̂_id| + δ_i:
      // its norm is at most δ_i ‖diag(2|T̂_i| + δ_i) C‖_F.
      const torch::Tensor cresid = sq.P - (T * T).matmul(sq.S);
      const torch::Tensor cres = cresid.norm(2, {1});
      const torch::Tensor cn2 = sq.S.pow(2).sum(1);                                     // ‖C_d‖², [dk]
      const torch::Tensor weight = (2 * T.abs() + delta.unsqueeze(1)).pow(2);           // [k', dk]
      const torch::Tensor cbound = sq.P.norm(2, {1}) * ur + std::sqrt(static_cast<double>(sq.P.size(1))) * eta +
                                   delta * weight.matmul(cn2).sqrt() + static_cast<double>(dk) * kEps64 * cn2.sum().sqrt();
      const auto [ci, cq] = worst_of(cres, cbound);
      if (!(cq <= 1))
        head_problem = channel(ci, sq) + ": the conv filters are not (T̂∘T̂) times the source's (the largest misfit in " +
                       sq.largest_in(cresid, ci) + "): ‖C'_i − (T̂_i∘T̂_i)C‖ = " + num(cres[ci].item<double>()) +
                       ", rounding and T̂'s error allow " + num(cbound[ci].item<double>());
    }
    if (!head_problem.empty()) fail(head_problem);
    else if (recovered) (*recovered)[{h.layer, h.head}] = {T, delta};
  }
  return sum;
}

}  // namespace statecut::verify
