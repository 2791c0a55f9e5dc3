// CE + T²-scaled KL distillation (loss.h).
#include "optimized/train/loss.h"

#include <stdexcept>

namespace statecut {

LossParts recovery_loss(const torch::Tensor& student, const torch::Tensor& teacher, const torch::Tensor& ids,
                        double temperature, double kd_weight) {
  TORCH_CHECK(student.dim() == 3 && ids.dim() == 2 && student.size(0) == ids.size(0) && student.size(1) == ids.size(1),
              "recovery_loss: logits [B,L,V] and ids [B,L] expected, got ", student.sizes(), " and ", ids.sizes());
  TORCH_CHECK(ids.size(1) >= 2, "recovery_loss: windows need at least 2 tokens");
  const auto cd = student.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const int64_t B = student.size(0), L = student.size(1), V = student.size(2);
  const auto s = student.to(cd);
  const auto logits = s.narrow(1, 0, L - 1).reshape({-1, V});
  const auto target = ids.narrow(1, 1, L - 1).reshape({-1}).to(s.device(), torch::kInt64);
  LossParts out;
  torch::Tensor ce = torch::nn::functional::cross_entropy(logits, target);
  out.total = ce;
  out.ce = ce.detach();
  if (teacher.defined()) {
    TORCH_CHECK(teacher.sizes() == student.sizes(), "recovery_loss: teacher logits ", teacher.sizes(),
                " differ from the student's ", student.sizes());
    const double T = temperature;
    const auto log_ps = torch::log_softmax(s.reshape({-1, V}) / T, -1);
    const auto log_pt = torch::log_softmax(teacher.detach().to(cd).reshape({-1, V}) / T, -1);
    // Σ_v p_t (log p_t − log p_s) / (B·L): F.kl_div(log_ps, p_t, reduction='batchmean') on [B·L, V].
    const auto kl = (log_pt.exp() * (log_pt - log_ps)).sum() / static_cast<double>(B * L);
    out.kd = kl.detach();
    out.total = ce + kl * (kd_weight * T * T);
  }
  return out;
}

}  // namespace statecut
