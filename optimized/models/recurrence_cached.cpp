// Recurrences with a carried state (recurrence_cached.h): the CUDA decode / chunk kernels where delta_rule_forward
// uses them, the LibTorch recurrences otherwise.
#include "optimized/models/recurrence_cached.h"

#include "optimized/models/decode_cache.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/recurrence.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include "kernels/binding/gated_delta_torch.h"
#endif

namespace statecut {

torch::Tensor delta_rule_cached(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& beta, const torch::Tensor& g, double scale, bool l2norm_qk,
                                RecurrenceMode mode, torch::Tensor& state) {
  TORCH_CHECK(beta.defined(), "delta_rule_cached: beta is required");
  TORCH_CHECK(v.dim() == 4 && k.dim() == 4, "delta_rule_cached: q, k [B,T,Hk,dk] and v [B,T,Hv,dv] expected");
  const int64_t B = v.size(0), T = v.size(1), Hv = v.size(2), dv = v.size(3), dk = k.size(3);
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (delta_rule_uses_cuda_kernels(q, k, v)) {
    // The kernels read and write fp32 key-major [B,Hv,dk,dv] (kKV) states: the cache's layout.
    if (!state.defined() || state.scalar_type() != torch::kFloat32 || !state.is_contiguous())
      state = state.defined() ? state.to(torch::kFloat32).contiguous()
                              : torch::zeros({B, Hv, dk, dv}, v.options().dtype(torch::kFloat32));
    const c10::optional<at::Tensor> none;
    const c10::optional<at::Tensor> g_opt = g.defined() ? c10::optional<at::Tensor>(g.to(torch::kFloat32)) : none;
    const c10::optional<at::Tensor> b_opt(beta.to(torch::kFloat32));
    if (T == 1)
      return cuda::gated_delta_rule_decode_(q, k, v, g_opt, b_opt, scale, state, none, /*use_qk_l2norm_in_kernel=*/l2norm_qk,
                                            /*use_gate_in_kernel=*/false, none, none,
                                            /*use_beta_sigmoid_in_kernel=*/false, /*state_v_first=*/false);
    auto run = mode == RecurrenceMode::Chunk ? &cuda::gated_delta_rule_chunk : &cuda::gated_delta_rule_recurrent;
    auto [o, S] = run(q, k, v, g_opt, b_opt, scale, c10::optional<at::Tensor>(state), /*output_final_state=*/true,
                      none, l2norm_qk, false, none, none, false, false);
    assign_state(state, S);
    return o;
  }
#endif
  (void)B, (void)T, (void)Hv, (void)dv, (void)dk;
  const auto cd = compute_dtype(v.scalar_type());
  auto qn = l2norm_qk ? l2_normalize(q) : q.to(cd);
  auto kn = l2norm_qk ? l2_normalize(k) : k.to(cd);
  torch::Tensor S;
  auto o = gated_delta_rule(qn, kn, v, beta, g, scale, state, v.size(1) == 1 ? RecurrenceMode::Recurrent : mode, &S);
  assign_state(state, S);
  return o;
}

torch::Tensor linear_attention_cached(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& g, double scale, RecurrenceMode mode, torch::Tensor& state) {
  torch::Tensor S;
  auto o = gated_linear_attention(q, k, v, g, scale, state, v.size(1) == 1 ? RecurrenceMode::Recurrent : mode, &S);
  assign_state(state, S);
  return o;
}

}  // namespace statecut
