#include "optimized/prune/calibration.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

namespace statecut {
namespace {

/// Per head [H, n, dk] f64 rows → R ← qr_r([R; rows]) batched over heads.
torch::Tensor tsqr_update(const torch::Tensor& r_prev, const torch::Tensor& rows) {
  const torch::Tensor stacked = r_prev.defined() ? torch::cat({r_prev, rows}, 1) : rows;
  return std::get<1>(torch::linalg_qr(stacked, "r"));
}

/// [B,T,H,d] → [H, B·T, d] f64 on `dev`, rows in (sequence, position) order.
torch::Tensor head_rows(const torch::Tensor& x, torch::Device dev) {
  const auto H = x.size(2), d = x.size(3);
  return x.detach().to(dev, torch::kFloat64).reshape({-1, H, d}).permute({1, 0, 2}).contiguous();
}

torch::Tensor l2norm_rows(const torch::Tensor& x /*[..., d] f64*/) {
  return x * torch::rsqrt((x * x).sum(-1, true) + 1e-6);
}

}  // namespace

torch::Tensor LayerCalibration::rms() const {
  if (!sumsq.defined() || rms_n <= 0) throw std::runtime_error("calibration: no RMS statistics collected");
  return torch::sqrt(sumsq / rms_n);
}

namespace {

/// The faithful subsample of every head: sorted row indices of M (Joint: [Q; K], Q rows first), one draw per
/// (layer, head) by the seed rule (reference/select_rng.h).
std::vector<std::vector<std::vector<ref::Index>>> faithful_rows_of(const std::vector<PrunableLayer>& layers,
                                                                  int64_t m_total, const CalibrationNeeds& needs) {
  std::vector<std::vector<std::vector<ref::Index>>> rows(layers.size());
  for (size_t li = 0; li < layers.size(); ++li)
    for (int h = 0; h < layers[li].num_key_heads; ++h) {
      ref::SelectRng rng = ref::SelectRng::for_head(needs.seed, layers[li].layer, h);
      rows[li].push_back(ref::faithful_subsample(m_total, needs.faithful_rows, rng));
    }
  return rows;
}

void accumulate_rms(const LayerBoundary& bd, LayerCalibration& lc) {
  const torch::Tensor a = bd.attn_in.detach().to(torch::kCPU, torch::kFloat64);
  const torch::Tensor s = (a * a).reshape({-1, a.size(-1)}).sum(0);
  lc.sumsq = lc.sumsq.defined() ? lc.sumsq + s : s;
  lc.rms_n += static_cast<double>(a.numel() / a.size(-1));
}

/// R ← qr_r([R; rows of this batch]) per head, folded where the activations are (f64 QR on the GPU too: it was 36
/// of 46.6 s of a 1.3B drrqr prune when folded on the host).
void accumulate_features(const LayerBoundary& bd, const torch::Tensor& q_host, const torch::Tensor& k_host,
                         ref::ScoreSide side, LayerCalibration& lc) {
  const torch::Device dev = bd.q.device();
  const torch::Tensor qd = dev.is_cpu() ? q_host : head_rows(bd.q, dev);
  const torch::Tensor kd = dev.is_cpu() ? k_host : head_rows(bd.k, dev);
  torch::Tensor rows;
  if (side == ref::ScoreSide::Joint) rows = torch::cat({qd, kd}, 1);
  else rows = side == ref::ScoreSide::QOnly ? qd : kd;
  torch::Tensor prev = lc.r.empty() ? torch::Tensor() : torch::stack(lc.r);
  const auto parts = tsqr_update(prev, rows).unbind(0);
  lc.r.assign(parts.begin(), parts.end());
}

/// Per head h, appends the rows t of x [H, nt, dk] whose global index base + t0 + t is in rows[h] (sorted).
void pick_rows(const torch::Tensor& x, const std::vector<std::vector<ref::Index>>& rows, int64_t base, int64_t t0,
               int64_t nt, std::vector<std::vector<torch::Tensor>>& parts) {
  parts.resize(rows.size());
  for (size_t h = 0; h < rows.size(); ++h) {
    const auto lo = std::lower_bound(rows[h].begin(), rows[h].end(), base + t0);
    const auto hi = std::lower_bound(lo, rows[h].end(), base + t0 + nt);
    if (lo == hi) continue;
    std::vector<int64_t> idx;
    for (auto it = lo; it != hi; ++it) idx.push_back(*it - base - t0);
    parts[h].push_back(x[static_cast<int64_t>(h)].index_select(0, torch::tensor(idx, torch::kInt64)).to(torch::kFloat32));
  }
}

void accumulate_pca(const torch::Tensor& q, const torch::Tensor& k, LayerCalibration& lc) {
  const torch::Tensor qh = l2norm_rows(q), kh = l2norm_rows(k);
  auto acc = [](std::vector<torch::Tensor>& v, const torch::Tensor& t) {
    if (v.empty()) {
      const auto parts = t.unbind(0);
      v.assign(parts.begin(), parts.end());
    } else {
      for (size_t h = 0; h < v.size(); ++h) v[h] = v[h] + t[h];
    }
  };
  acc(lc.pca_sum_q, qh.sum(1));
  acc(lc.pca_outer_q, torch::matmul(qh.transpose(1, 2), qh));
  acc(lc.pca_sum_k, kh.sum(1));
  acc(lc.pca_outer_k, torch::matmul(kh.transpose(1, 2), kh));
  lc.pca_n += static_cast<double>(q.size(1));
}

bool all_finite(const torch::Tensor& t) { return torch::isfinite(t).all().item<bool>(); }

/// The one-line error of an activation that is not finite (`what` ends in "is" / "are"); layer < 0 or head < 0: not
/// named.
CalibrationNotFinite not_finite(int64_t layer, int64_t head, const std::string& what, const char* pass = "forward") {
  std::string at;
  if (layer >= 0) at = "layer " + std::to_string(layer) + (head >= 0 ? " head " + std::to_string(head) : "") + ": ";
  return CalibrationNotFinite("calibration: " + at + what + " not finite (NaN or Inf): the model's " + pass +
                              " overflows on the calibration windows");
}

/// What the selectors read from one layer's boundary must be finite: the q/k projections' input (rms) and q, k
/// (features, rows, pca). A NaN or Inf there is a forward that overflowed on the windows (finite weights too large for
/// fp32, e.g. 3e38), named here by layer and head as each batch is folded, not by the selector afterwards ("select:
/// head 0: M has NaN or Inf"). Statistics in f64 would not help: the fp32 activations are already Inf, and f64 sums
/// of squares of finite fp32 values (< 1.2e77 each) do not overflow. One device sync per tensor when all is finite.
void check_boundary(int64_t layer, const LayerBoundary& bd, bool rms, bool qk) {
  if (rms && bd.attn_in.defined() && !all_finite(bd.attn_in))
    throw not_finite(layer, -1, "the input of the q/k projections is");
  if (!qk) return;
  for (const auto& [x, what] :
       {std::make_pair(bd.q, "the q activations are"), std::make_pair(bd.k, "the k activations are")}) {
    if (all_finite(x)) continue;
    for (int64_t h = 0; h < x.size(2); ++h)
      if (!all_finite(x.select(2, h))) throw not_finite(layer, h, what);
  }
}

/// The state of one calibration: the windows, what to collect, and the progress count shared by both passes.
struct CalibrationPass {
  CausalLM& model;
  const torch::Tensor& ids;
  const CalibrationNeeds& needs;
  const Progress& progress;
  std::vector<PrunableLayer> layers;
  int64_t N, L, batch, steps, done = 0;
  BlockHook before_block;
};

/// The no-grad pass: features (R), faithful rows, PCA sums and RMS, one mini-batch of windows at a time.
void boundary_pass(CalibrationPass& p, Calibration& cal) {
  const auto& needs = p.needs;
  const int64_t N = p.N, L = p.L;
  std::vector<std::vector<std::vector<ref::Index>>> take;  // [layer][head]: sorted rows of M
  if (needs.rows) take = faithful_rows_of(p.layers, N * L * (needs.side == ref::ScoreSide::Joint ? 2 : 1), needs);
  // per layer and head: the picked [m_b, dk] f32 pieces of Q (or the one side) and of K, in row order
  std::vector<std::vector<std::vector<torch::Tensor>>> row_parts(p.layers.size()), row_parts_k(p.layers.size());
  torch::NoGradGuard no_grad;
  std::map<int64_t, size_t> index_of;  // model layer → prunable-layer index
  for (size_t li = 0; li < p.layers.size(); ++li) index_of[p.layers[li].layer] = li;
  std::vector<char> seen(p.layers.size());
  int64_t b0 = 0, nb = 0;  // the current mini-batch: windows b0 … b0 + nb − 1
  // Folds one layer's boundary into its statistics as soon as its block has run (ForwardOptions::on_boundary): the
  // pass holds one layer's boundary tensors, not every layer's.
  auto fold = [&](int64_t layer, LayerBoundary& bd) {
    const auto it = index_of.find(layer);
    if (it == index_of.end()) return;
    const size_t li = it->second;
    seen[li] = 1;
    LayerCalibration& lc = cal.layers[li];
    check_boundary(layer, bd, needs.rms, needs.features || needs.rows || needs.pca);
    if (needs.rms) accumulate_rms(bd, lc);
    if (!(needs.features || needs.rows || needs.pca)) return;
    // The row picks and PCA sums stay on the host; the R factor is folded where the activations are.
    const torch::Device host(torch::kCPU);
    const bool host_copy = needs.rows || needs.pca || bd.q.device().is_cpu();
    const torch::Tensor q = host_copy ? head_rows(bd.q, host) : torch::Tensor();  // [H, nb·L, dk]
    const torch::Tensor k = host_copy ? head_rows(bd.k, host) : torch::Tensor();
    if (needs.features) accumulate_features(bd, q, k, needs.side, lc);
    if (needs.rows) {
      if (needs.side == ref::ScoreSide::Joint) {
        pick_rows(q, take[li], 0, b0 * L, nb * L, row_parts[li]);
        pick_rows(k, take[li], N * L, b0 * L, nb * L, row_parts_k[li]);
      } else {
        pick_rows(needs.side == ref::ScoreSide::QOnly ? q : k, take[li], 0, b0 * L, nb * L, row_parts[li]);
      }
    }
    if (needs.pca) accumulate_pca(q, k, lc);
  };
  ForwardOptions fo;
  fo.capture_boundary = true;
  fo.logits = false;  // only the boundaries are read
  fo.before_block = p.before_block;
  fo.on_boundary = fold;
  for (b0 = 0; b0 < N; b0 += p.batch) {
    nb = std::min(p.batch, N - b0);
    std::fill(seen.begin(), seen.end(), 0);
    p.model.forward(p.ids.narrow(0, b0, nb), fo);
    for (size_t li = 0; li < p.layers.size(); ++li)
      if (!seen[li])
        throw std::runtime_error("calibration: model returned no boundary tensors for layer " +
                                 std::to_string(p.layers[li].layer));
    if (p.progress) p.progress(++p.done, p.steps);
  }
  for (size_t li = 0; needs.rows && li < p.layers.size(); ++li) {
    row_parts[li].resize(take[li].size());
    row_parts_k[li].resize(take[li].size());
    for (size_t h = 0; h < take[li].size(); ++h) {
      std::vector<torch::Tensor> parts = row_parts[li][h];
      parts.insert(parts.end(), row_parts_k[li][h].begin(), row_parts_k[li][h].end());  // [Q rows; K rows]
      cal.layers[li].rows.push_back(torch::cat(parts, 0));
    }
  }
  for (auto& lc : cal.layers) {  // pad R to [dk, dk] when fewer rows than channels were seen
    for (auto& R : lc.r) {
      R = R.to(torch::kCPU);
      if (R.size(0) < R.size(1)) R = torch::cat({R, torch::zeros({R.size(1) - R.size(0), R.size(1)}, R.options())}, 0);
    }
  }
}

/// Makes only the q/k projection weights trainable for its lifetime, and restores every parameter's requires_grad
/// flag (and clears the gradients it made) however the scope ends: an exception leaves the model as it was.
class QkGradScope {
 public:
  QkGradScope(std::vector<std::pair<std::string, torch::Tensor>> params, const std::vector<PrunableLayer>& layers)
      : params_(std::move(params)) {
    for (auto& [name, t] : params_) saved_.push_back(t.requires_grad());
    for (auto& [name, t] : params_) t.requires_grad_(false);
    std::map<std::string, torch::Tensor> by_name(params_.begin(), params_.end());
    for (const auto& Lr : layers) {
      for (const std::string& n : {Lr.q_weight, Lr.k_weight}) {
        auto it = by_name.find(n);
        if (it == by_name.end()) throw_restoring("calibration: model has no parameter '" + n + "' for grad");
        if (!it->second.requires_grad()) {
          it->second.requires_grad_(true);
          it->second.mutable_grad() = torch::Tensor();
          trainable_.push_back(it->second);
        }
      }
    }
  }
  QkGradScope(const QkGradScope&) = delete;
  QkGradScope& operator=(const QkGradScope&) = delete;
  ~QkGradScope() { restore(); }
  torch::Tensor grad_of(const std::string& name) const {
    for (const auto& [n, t] : params_)
      if (n == name) return t.grad();
    return {};
  }

 private:
  void restore() {
    for (auto& t : trainable_) t.mutable_grad() = torch::Tensor();
    for (size_t i = 0; i < params_.size(); ++i) params_[i].second.requires_grad_(saved_[i]);
  }
  [[noreturn]] void throw_restoring(const std::string& msg) {
    restore();
    throw std::runtime_error(msg);
  }
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::vector<bool> saved_;
  std::vector<torch::Tensor> trainable_;
};

/// The loss of windows `x` is not finite: one no-grad forward finds the first layer whose q/k projections' input, or
/// whose q or k of a head, is not finite, and names it; past the last linear-attention layer the loss is named.
[[noreturn]] void throw_loss_not_finite(CalibrationPass& p, const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  ForwardOptions fo;
  fo.capture_boundary = true;
  fo.logits = false;
  fo.on_boundary = [](int64_t layer, LayerBoundary& bd) { check_boundary(layer, bd, true, true); };
  p.model.forward(x, fo);
  throw not_finite(-1, -1, "the loss is");
}

/// The gradient pass: Σ over sequences of ∂(mean next-token CE)/∂W for the q and k row blocks of every layer.
void gradient_pass(CalibrationPass& p, Calibration& cal) {
  const QkGradScope scope(p.model.named_parameters(), p.layers);
  const int64_t N = p.N, L = p.L;
  double loss_sum = 0;
  for (int64_t b0 = 0; b0 < N; b0 += p.batch) {
    const int64_t nb = std::min(p.batch, N - b0);
    const torch::Tensor x = p.ids.narrow(0, b0, nb);
    ForwardResult res = p.model.forward(x);
    const torch::Tensor logits = res.logits.narrow(1, 0, L - 1).reshape({-1, res.logits.size(-1)});
    const torch::Tensor target = x.narrow(1, 1, L - 1).reshape({-1}).to(logits.device());
    // Σ over the nb sequences of each sequence's mean CE (the paper's batch-1 losses, summed).
    const torch::Tensor loss = torch::nn::functional::cross_entropy(
        logits.scalar_type() == torch::kFloat64 ? logits : logits.to(torch::kFloat32), target) * nb;
    const double loss_value = loss.item<double>();
    if (!std::isfinite(loss_value)) throw_loss_not_finite(p, x);
    loss.backward();
    loss_sum += loss_value;
    if (p.progress) p.progress(++p.done, p.steps);
  }
  cal.mean_loss = loss_sum / static_cast<double>(N);
  for (size_t li = 0; li < p.layers.size(); ++li) {
    const auto& Lr = p.layers[li];
    const torch::Tensor gq = scope.grad_of(Lr.q_weight), gk = scope.grad_of(Lr.k_weight);
    if (!gq.defined() || !gk.defined())
      throw std::runtime_error("calibration: no gradient reached '" + Lr.q_weight + "' (model forward not differentiable)");
    cal.layers[li].grad_q = q_block_rows(gq, Lr).detach().to(torch::kCPU, torch::kFloat32).clone();
    cal.layers[li].grad_k = k_block_rows(gk, Lr).detach().to(torch::kCPU, torch::kFloat32).clone();
    // A finite loss whose backward overflowed.
    for (const auto& [g, what] : {std::make_pair(cal.layers[li].grad_q, "the loss gradient of Wq is"),
                                  std::make_pair(cal.layers[li].grad_k, "the loss gradient of Wk is")}) {
      if (all_finite(g)) continue;
      for (int64_t h = 0; h < Lr.num_key_heads; ++h)
        if (!all_finite(g.narrow(0, h * Lr.head_k_dim, Lr.head_k_dim))) throw not_finite(Lr.layer, h, what, "backward");
    }
  }
}

}  // namespace

CalibrationNeeds calibration_needs(ref::SelectMethod method, bool faithful) {
  CalibrationNeeds n;
  n.rms = method == ref::SelectMethod::SWanda;
  n.grad = method == ref::SelectMethod::Grad;
  n.pca = method == ref::SelectMethod::Pca;
  n.features = method == ref::SelectMethod::Drrqr && !faithful;
  n.rows = method == ref::SelectMethod::Drrqr && faithful;
  return n;
}

bool needs_calibration(ref::SelectMethod method) {
  const CalibrationNeeds n = calibration_needs(method, false);
  return n.rms || n.grad || n.pca || n.features;
}

Calibration calibrate(CausalLM& model, const torch::Tensor& ids, const CalibrationNeeds& needs, const Progress& progress,
                      const BlockHook& before_block) {
  if (ids.dim() != 2 || ids.size(0) < 1 || ids.size(1) < 2)
    throw std::runtime_error("calibration: token windows must be [N, L] with L >= 2");
  if (needs.grad && before_block)
    throw std::runtime_error("calibration: the gradient pass (--method grad) needs every block's weights in memory at "
                             "once; it cannot stream them");
  CalibrationPass p{model, ids, needs, progress, model.prunable_layers(), ids.size(0), ids.size(1), 0, 0, 0,
                    before_block};
  p.batch = needs.batch > 0 ? needs.batch : (model.vocab_size() > 4096 ? 1 : 4);
  const bool want_forward = needs.features || needs.rows || needs.pca || needs.rms;
  p.steps = (p.N + p.batch - 1) / p.batch * ((want_forward ? 1 : 0) + (needs.grad ? 1 : 0));
  Calibration cal;
  cal.tokens = p.N * p.L;
  cal.layers.resize(p.layers.size());
  for (size_t i = 0; i < p.layers.size(); ++i) cal.layers[i].layer = p.layers[i].layer;
  if (want_forward) boundary_pass(p, cal);
  if (needs.grad) gradient_pass(p, cal);
  return cal;
}

}  // namespace statecut
