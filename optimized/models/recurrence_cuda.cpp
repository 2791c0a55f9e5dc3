// delta_rule_forward and linear_attention_forward: the families' entries to the (gated) delta rule and to gated linear
// attention; the CUDA kernels for bf16/fp16 activations on a CUDA device when the build has them, the LibTorch
// recurrences otherwise (contract in recurrence.h).
#include <string>

#include "optimized/models/fused_ops.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/recurrence.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include "kernels/binding/gated_delta_torch.h"
#endif

namespace statecut {

bool cuda_kernels_built() {
#ifdef STATECUT_WITH_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

bool delta_rule_uses_cuda_kernels(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  std::initializer_list<torch::Tensor> other_inputs) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  const auto dt = v.scalar_type();
  if (!v.is_cuda() || !q.is_cuda() || !k.is_cuda()) return false;
  // no backward in the kernels: a forward autograd records stays on LibTorch
  if (needs_autograd({q, k, v}) || needs_autograd(other_inputs)) return false;
  if (dt != torch::kBFloat16 && dt != torch::kFloat16) return false;  // the kernels take bf16/fp16 q, k, v only
  if (q.scalar_type() != dt || k.scalar_type() != dt) return false;
  if (q.dim() != 4 || v.dim() != 4) return false;
  const int64_t dk = q.size(3), dv = v.size(3);
  return dk >= 1 && dk <= 256 && dv >= 1 && dv <= 1024 && dv % 4 == 0;
#else
  (void)q, (void)k, (void)v, (void)other_inputs;
  return false;
#endif
}

torch::Tensor delta_rule_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& beta, const torch::Tensor& g, double scale, bool l2norm_qk,
                                 RecurrenceMode mode, torch::Tensor* final_state) {
  TORCH_CHECK(beta.defined(), "delta_rule_forward: beta is required");
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (delta_rule_uses_cuda_kernels(q, k, v, {beta, g})) {
    // Kernel layout = the families' layout: token-major [B,T,H,K] (seq_len = T), g/beta [B,T,Hv] fp32, state
    // [B,Hv,dk,dv] fp32 (kKV, state_v_first = false) = the boundary's key-major final_state.
    const c10::optional<at::Tensor> none;
    const c10::optional<at::Tensor> g_opt = g.defined() ? c10::optional<at::Tensor>(g.to(torch::kFloat32)) : none;
    const c10::optional<at::Tensor> b_opt(beta.to(torch::kFloat32));
    auto run = mode == RecurrenceMode::Chunk ? &cuda::gated_delta_rule_chunk : &cuda::gated_delta_rule_recurrent;
    auto [o, S] = run(q, k, v, g_opt, b_opt, scale, none, /*output_final_state=*/final_state != nullptr, none,
                      /*use_qk_l2norm_in_kernel=*/l2norm_qk, /*use_gate_in_kernel=*/false, none, none,
                      /*use_beta_sigmoid_in_kernel=*/false, /*state_v_first=*/false);
    if (final_state) *final_state = S;
    return o;
  }
#endif
  const auto cd = compute_dtype(v.scalar_type());
  auto qn = l2norm_qk ? l2_normalize(q) : q.to(cd);
  auto kn = l2norm_qk ? l2_normalize(k) : k.to(cd);
  return gated_delta_rule(qn, kn, v, beta, g, scale, torch::Tensor(), mode, final_state);
}

torch::Tensor linear_attention_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& value_scale, const torch::Tensor& g, double scale,
                                       const torch::Tensor& initial_state, RecurrenceMode mode,
                                       torch::Tensor* final_state) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (delta_rule_uses_cuda_kernels(q, k, v, {value_scale, g, initial_state})) {
    const auto f32 = [](const torch::Tensor& t) {
      return t.defined() ? c10::optional<at::Tensor>(t.to(torch::kFloat32)) : c10::optional<at::Tensor>();
    };
    auto [o, S] = cuda::gated_linear_attention_rule(mode == RecurrenceMode::Chunk, q, k, v, f32(g), f32(value_scale),
                                                    scale, f32(initial_state), final_state != nullptr,
                                                    c10::nullopt, /*state_v_first=*/false);
    if (final_state) *final_state = S;
    return o;
  }
#endif
  const auto cd = compute_dtype(v.scalar_type());
  const auto vs = value_scale.defined() ? v.to(cd) * value_scale.to(cd).unsqueeze(-1) : v;
  return gated_linear_attention(q.to(cd), k.to(cd), vs, g, scale, initial_state, mode, final_state);
}

}  // namespace statecut
