/// The optimisation half of the recipe (anchor-original §5; flame / torchtitan defaults):
///   AdamW (decoupled weight decay, PyTorch's formula step for step):
///     p ← p·(1 − lr·wd);  m ← β1 m + (1−β1) g;  v ← β2 v + (1−β2) g²;
///     p ← p − (lr / (1−β1ᵗ)) · m / (√v / √(1−β2ᵗ) + eps)                 β 0.9/0.95, eps 1e-15, wd 0.1
///   learning rate at step s (0-based) of N, warmup W (torchtitan's warmup + cosine decay):
///     s < W: lr·(s+1)/(W+1);   else lr·(m + (1−m)·½(1 + cos(π·(s−W)/max(1, N−W))))    m = min_lr_ratio
///   gradient clipping: g ← g·c/(‖g‖ + 1e-6) when ‖g‖ > c (‖g‖ the 2-norm over every trained tensor), c = 1;
///   a step whose norm is NaN/Inf is skipped (flame's skip_nan_inf).
#pragma once
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace statecut {

struct AdamWConfig {
  double lr = 1e-4, beta1 = 0.9, beta2 = 0.95, eps = 1e-15, weight_decay = 0.1;
};

/// The learning rate of step `step` (0-based) of `total` steps.
double cosine_lr(double lr, int64_t step, int64_t total, int64_t warmup, double min_lr_ratio);

/// 2-norm over the gradients of `params` (undefined gradients count as zero), computed in f64.
double grad_norm(const std::vector<torch::Tensor>& params);
/// Scales every gradient by max_norm/(norm + 1e-6) when norm > max_norm; returns the norm before clipping.
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

class AdamW {
 public:
  /// params: named tensors whose .grad() the step reads (updated in place, no grad).
  AdamW(std::vector<std::pair<std::string, torch::Tensor>> params, AdamWConfig cfg);
  /// One step at learning rate `lr`; parameters with an undefined gradient are left alone.
  void step(double lr);
  int64_t steps() const { return step_; }
  const std::vector<std::pair<std::string, torch::Tensor>>& params() const { return params_; }
  /// The moments by name ("<name>.exp_avg", "<name>.exp_avg_sq"), for a resumable state.
  std::vector<std::pair<std::string, torch::Tensor>> state() const;
  /// Restores moments (shapes checked, copied in place) and the step count; throws std::runtime_error naming the
  /// missing tensor.
  void load_state(const std::vector<std::pair<std::string, torch::Tensor>>& state, int64_t steps);

 private:
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::vector<torch::Tensor> m_, v_;
  AdamWConfig cfg_;
  int64_t step_ = 0;
};

}  // namespace statecut
