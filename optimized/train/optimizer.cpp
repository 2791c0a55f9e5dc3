// AdamW, the warmup + cosine schedule and gradient clipping (optimizer.h).
#include "optimized/train/optimizer.h"

#include <cmath>
#include <map>
#include <stdexcept>

namespace statecut {

double cosine_lr(double lr, int64_t step, int64_t total, int64_t warmup, double min_lr_ratio) {
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup + 1);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, total - warmup)));
  return lr * (min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

double grad_norm(const std::vector<torch::Tensor>& params) {
  // The squared norms summed on the gradients' device in f64, in parameter order, read back once (not once per
  // parameter: each read is a device sync); the same f64 additions as a host-side sum.
  torch::Tensor sq;
  for (const auto& p : params) {
    const auto& g = p.grad();
    if (!g.defined()) continue;
    auto s = g.to(torch::kFloat64).pow(2).sum();
    sq = sq.defined() ? sq + s.to(sq.device()) : s;
  }
  return sq.defined() ? std::sqrt(sq.item<double>()) : 0.0;
}

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  const double norm = grad_norm(params);
  if (std::isfinite(norm) && norm > max_norm) {
    const double c = max_norm / (norm + 1e-6);
    torch::NoGradGuard no_grad;
    for (const auto& p : params)
      if (p.grad().defined()) p.grad().mul_(c);
  }
  return norm;
}

AdamW::AdamW(std::vector<std::pair<std::string, torch::Tensor>> params, AdamWConfig cfg)
    : params_(std::move(params)), cfg_(cfg) {
  for (auto& [n, p] : params_) {
    m_.push_back(torch::zeros_like(p, p.options().requires_grad(false)));
    v_.push_back(torch::zeros_like(p, p.options().requires_grad(false)));
  }
}

void AdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  const double bc1 = 1.0 - std::pow(cfg_.beta1, static_cast<double>(step_));
  const double bc2 = 1.0 - std::pow(cfg_.beta2, static_cast<double>(step_));
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i].second;
    const auto& g = p.grad();
    if (!g.defined()) continue;
    p.mul_(1.0 - lr * cfg_.weight_decay);
    m_[i].mul_(cfg_.beta1).add_(g, 1.0 - cfg_.beta1);
    v_[i].mul_(cfg_.beta2).addcmul_(g, g, 1.0 - cfg_.beta2);
    const auto denom = (v_[i].sqrt() / std::sqrt(bc2)).add_(cfg_.eps);
    p.addcdiv_(m_[i], denom, -lr / bc1);
  }
}

std::vector<std::pair<std::string, torch::Tensor>> AdamW::state() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back(params_[i].first + ".exp_avg", m_[i]);
    out.emplace_back(params_[i].first + ".exp_avg_sq", v_[i]);
  }
  return out;
}

void AdamW::load_state(const std::vector<std::pair<std::string, torch::Tensor>>& state, int64_t steps) {
  std::map<std::string, torch::Tensor> by_name(state.begin(), state.end());
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    for (auto [suffix, dst] : {std::pair<const char*, torch::Tensor*>{".exp_avg", &m_[i]}, {".exp_avg_sq", &v_[i]}}) {
      auto it = by_name.find(params_[i].first + suffix);
      if (it == by_name.end()) throw std::runtime_error("optimizer state: missing '" + params_[i].first + suffix + "'");
      if (it->second.sizes() != dst->sizes())
        throw std::runtime_error("optimizer state: '" + params_[i].first + suffix + "' has the wrong shape");
      dst->copy_(it->second);
    }
  }
  step_ = steps;
}

}  // namespace statecut
