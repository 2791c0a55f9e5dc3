/// The recovery loss of the paper's recipe (anchor-original §5, flame's train.py):
///   L = CE + w·T²·KL(softmax(t/T) ‖ softmax(s/T))
/// CE  = mean over the B·(L−1) positions of −log softmax(s_p)[ids_{p+1}]            (causal LM, next token)
/// KL  = Σ_v p_t(v) (log p_t(v) − log p_s(v)) averaged over all B·L positions        (kl_div 'batchmean' over the
///       flattened [B·L, V] logits, as flame computes it), with p = softmax(logits / T)
/// Computed in fp32 (f64 when the logits are f64). The teacher's logits carry no gradient.
#pragma once
#include <torch/torch.h>

namespace statecut {

struct LossParts {
  torch::Tensor total;  ///< scalar, differentiable w.r.t. the student's logits
  torch::Tensor ce, kd;  ///< scalars (kd undefined without a teacher), detached
};

/// student, teacher: [B, L, V] logits (teacher undefined: CE only); ids [B, L] int64, L >= 2.
LossParts recovery_loss(const torch::Tensor& student, const torch::Tensor& teacher, const torch::Tensor& ids,
                        double temperature, double kd_weight);

}  // namespace statecut
