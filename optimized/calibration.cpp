#include "optimized/calibration.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

#include "optimized/text.h"

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

Calibration calibrate(CausalLM& model, const torch::Tensor& ids, const CalibrationNeeds& needs, const Progress& progress) {
  if (ids.dim() != 2 || ids.size(0) < 1 || ids.size(1) < 2)
    throw std::runtime_error("calibration: token windows must be [N, L] with L >= 2");
  const auto layers = model.prunable_layers();
  const int64_t N = ids.size(0), L = ids.size(1);
  const int64_t batch = needs.batch > 0 ? needs.batch : (model.vocab_size() > 4096 ? 1 : 4);
  Calibration cal;
  cal.tokens = N * L;
  cal.layers.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) cal.layers[i].layer = layers[i].layer;

  const bool want_forward = needs.features || needs.rows || needs.pca || needs.rms;
  // Faithful subsample: which rows of M (Joint: [Q; K], Q rows first) to keep, drawn once.
  const int64_t m_total = N * L * (needs.side == FeatureSide::Joint ? 2 : 1);
  std::vector<uint8_t> take;
  if (needs.rows) {
    take.assign(m_total, needs.faithful_rows >= m_total ? 1 : 0);
    if (needs.faithful_rows < m_total) {
      std::mt19937_64 rng(needs.seed);
      std::vector<int64_t> perm(m_total);
      std::iota(perm.begin(), perm.end(), 0);
      for (int64_t i = 0; i < needs.faithful_rows; ++i) {  // partial Fisher–Yates
        const int64_t j = i + static_cast<int64_t>(bounded_draw(rng, static_cast<uint64_t>(m_total - i)));
        std::swap(perm[i], perm[j]);
        take[perm[i]] = 1;
      }
    }
  }
  std::vector<std::vector<torch::Tensor>> row_parts(layers.size());  // per layer: [H, m_b, dk] f32 pieces, Q then K
  std::vector<std::vector<torch::Tensor>> row_parts_k(layers.size());

  const int64_t steps = (N + batch - 1) / batch * ((want_forward ? 1 : 0) + (needs.grad ? 1 : 0));
  int64_t done = 0;
  if (want_forward) {
    torch::NoGradGuard no_grad;
    ForwardOptions fo;
    fo.capture_boundary = true;
    for (int64_t b0 = 0; b0 < N; b0 += batch) {
      const int64_t nb = std::min(batch, N - b0);
      const torch::Tensor x = ids.narrow(0, b0, nb);
      ForwardResult res = model.forward(x, fo);
      for (size_t li = 0; li < layers.size(); ++li) {
        const int layer = layers[li].layer;
        if (layer >= static_cast<int>(res.boundary.size()) || !res.boundary[layer].q.defined())
          throw std::runtime_error("calibration: model returned no boundary tensors for layer " + std::to_string(layer));
        LayerBoundary& bd = res.boundary[layer];
        LayerCalibration& lc = cal.layers[li];
        if (needs.rms) {
          const torch::Tensor a = bd.attn_in.detach().to(torch::kCPU, torch::kFloat64);
          const torch::Tensor s = (a * a).reshape({-1, a.size(-1)}).sum(0);
          lc.sumsq = lc.sumsq.defined() ? lc.sumsq + s : s;
          lc.rms_n += static_cast<double>(a.numel() / a.size(-1));
        }
        if (needs.features || needs.rows || needs.pca) {
          // The R factor is folded where the activations are (f64 QR on the GPU too: it was 36 of 46.6 s of a
          // 1.3B drrqr prune when folded on the host); the row picks and PCA sums stay on the host.
          const torch::Device host(torch::kCPU), dev = bd.q.device();
          const bool host_copy = needs.rows || needs.pca || dev.is_cpu();
          const torch::Tensor q = host_copy ? head_rows(bd.q, host) : torch::Tensor();  // [H, nb·L, dk]
          const torch::Tensor k = host_copy ? head_rows(bd.k, host) : torch::Tensor();
          if (needs.features) {
            const torch::Tensor qd = dev.is_cpu() ? q : head_rows(bd.q, dev);
            const torch::Tensor kd = dev.is_cpu() ? k : head_rows(bd.k, dev);
            torch::Tensor rows;
            if (needs.side == FeatureSide::Joint) rows = torch::cat({qd, kd}, 1);
            else rows = needs.side == FeatureSide::QOnly ? qd : kd;
            torch::Tensor prev = lc.r.empty() ? torch::Tensor() : torch::stack(lc.r);
            const auto parts = tsqr_update(prev, rows).unbind(0);
            lc.r.assign(parts.begin(), parts.end());
          }
          if (needs.rows) {
            const int64_t t0 = b0 * L, nt = nb * L;
            auto pick = [&](const torch::Tensor& x, int64_t base, std::vector<torch::Tensor>& parts) {
              std::vector<int64_t> idx;
              for (int64_t t = 0; t < nt; ++t)
                if (take[base + t0 + t]) idx.push_back(t);
              if (!idx.empty()) parts.push_back(x.index_select(1, torch::tensor(idx, torch::kInt64)).to(torch::kFloat32));
            };
            if (needs.side == FeatureSide::Joint) {
              pick(q, 0, row_parts[li]);
              pick(k, N * L, row_parts_k[li]);
            } else {
              pick(needs.side == FeatureSide::QOnly ? q : k, 0, row_parts[li]);
            }
          }
          if (needs.pca) {
            const torch::Tensor qh = l2norm_rows(q), kh = l2norm_rows(k);
            auto acc = [](std::vector<torch::Tensor>& v, const torch::Tensor& t) {
              if (v.empty()) {
                const auto parts = t.unbind(0);
                v.assign(parts.begin(), parts.end());
              }
              else for (size_t h = 0; h < v.size(); ++h) v[h] = v[h] + t[h];
            };
            acc(lc.pca_sum_q, qh.sum(1));
            acc(lc.pca_outer_q, torch::matmul(qh.transpose(1, 2), qh));
            acc(lc.pca_sum_k, kh.sum(1));
            acc(lc.pca_outer_k, torch::matmul(kh.transpose(1, 2), kh));
            lc.pca_n += static_cast<double>(q.size(1));
          }
        }
      }
      if (progress) progress(++done, steps);
    }
    for (size_t li = 0; li < layers.size(); ++li) {
      if (!needs.rows) break;
      std::vector<torch::Tensor> parts = row_parts[li];
      parts.insert(parts.end(), row_parts_k[li].begin(), row_parts_k[li].end());  // [Q rows; K rows]
      const auto heads = torch::cat(parts, 1).unbind(0);
      cal.layers[li].rows.assign(heads.begin(), heads.end());
    }
    for (auto& lc : cal.layers) {  // pad R to [dk, dk] when fewer rows than channels were seen
      for (auto& R : lc.r) {
        R = R.to(torch::kCPU);
        if (R.size(0) < R.size(1)) R = torch::cat({R, torch::zeros({R.size(1) - R.size(0), R.size(1)}, R.options())}, 0);
      }
    }
  }

  if (needs.grad) {
    // Gradients of the q/k projection weights only; every other parameter is frozen for the pass.
    auto params = model.named_parameters();
    std::map<std::string, torch::Tensor> by_name(params.begin(), params.end());
    std::vector<torch::Tensor> frozen;
    for (auto& [name, p] : params) {
      if (p.requires_grad()) {
        frozen.push_back(p);
        p.requires_grad_(false);
      }
    }
    std::vector<torch::Tensor> trainable;
    for (const auto& Lr : layers) {
      for (const std::string& n : {Lr.q_weight, Lr.k_weight}) {
        auto it = by_name.find(n);
        if (it == by_name.end()) throw std::runtime_error("calibration: model has no parameter '" + n + "' for grad");
        if (!it->second.requires_grad()) {
          it->second.requires_grad_(true);
          trainable.push_back(it->second);
        }
      }
    }
    for (auto& p : trainable) p.mutable_grad() = torch::Tensor();
    double loss_sum = 0;
    for (int64_t b0 = 0; b0 < N; b0 += batch) {
      const int64_t nb = std::min(batch, N - b0);
      const torch::Tensor x = ids.narrow(0, b0, nb);
      ForwardResult res = model.forward(x);
      const torch::Tensor logits = res.logits.narrow(1, 0, L - 1).reshape({-1, res.logits.size(-1)});
      const torch::Tensor target = x.narrow(1, 1, L - 1).reshape({-1}).to(logits.device());
      // Σ over the nb sequences of each sequence's mean CE (the paper's batch-1 losses, summed).
      const torch::Tensor loss = torch::nn::functional::cross_entropy(
          logits.scalar_type() == torch::kFloat64 ? logits : logits.to(torch::kFloat32), target) * nb;
      loss.backward();
      loss_sum += loss.item<double>();
      if (progress) progress(++done, steps);
    }
    cal.mean_loss = loss_sum / static_cast<double>(N);
    for (size_t li = 0; li < layers.size(); ++li) {
      const auto& Lr = layers[li];
      const torch::Tensor gq = by_name[Lr.q_weight].grad(), gk = by_name[Lr.k_weight].grad();
      if (!gq.defined() || !gk.defined())
        throw std::runtime_error("calibration: no gradient reached '" + Lr.q_weight + "' (model forward not differentiable)");
      cal.layers[li].grad_q = q_block_rows(gq, Lr).detach().to(torch::kCPU, torch::kFloat32).clone();
      cal.layers[li].grad_k = k_block_rows(gk, Lr).detach().to(torch::kCPU, torch::kFloat32).clone();
    }
    for (auto& p : trainable) {
      p.mutable_grad() = torch::Tensor();
      p.requires_grad_(false);
    }
    for (auto& p : frozen) p.requires_grad_(true);
  }
  return cal;
}

}  // namespace statecut
