// Recurrences with a carried state (recurrence_cached.h): the CUDA decode / chunk kernels where delta_rule_forward
// uses them, the LibTorch recurrences otherwise.
#include "optimized/models/recurrence_cached.h"

#include "optimized/models/decode_cache.h"
#include "optimized/models/fused_ops.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/recurrence.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include "kernels/binding/gated_delta_torch.h"
#endif

namespace statecut {

namespace {

/// One token of the LibTorch recurrence (recurrence.cpp's run_recurrent for T = 1, same operations in the same order),
/// updating `state` in place: fewer operations per step than gated_delta_rule's general path (a CPU decode step is
/// bound by per-operation overhead). q, k [B,1,Hk,dk] already normalised, v [B,1,Hv,dv]; beta undefined = no delta.
torch::Tensor recurrent_step(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& beta, const torch::Tensor& g, double scale, torch::Tensor& state) {
  const auto cd = compute_dtype(v.scalar_type());
  const int64_t B = v.size(0), Hv = v.size(2), dv = v.size(3), Hk = k.size(2), dk = k.size(3);
  TORCH_CHECK(Hk > 0 && Hv % Hk == 0, "recurrent step: value heads ", Hv, " not a multiple of key heads ", Hk);
  auto qt = q.select(1, 0).to(cd), kt = k.select(1, 0).to(cd), vt = v.select(1, 0).to(cd);  // [B,H,d]
  if (Hv != Hk) qt = qt.repeat_interleave(Hv / Hk, 1), kt = kt.repeat_interleave(Hv / Hk, 1);
  if (!state.defined() || state.scalar_type() != cd || !state.is_contiguous() || state.device() != v.device())
    state = state.defined() ? state.to(v.device(), cd).contiguous() : torch::zeros({B, Hv, dk, dv}, v.options().dtype(cd));
  TORCH_CHECK(state.dim() == 4 && state.size(0) == B && state.size(1) == Hv && state.size(2) == dk && state.size(3) == dv,
              "recurrent step: state must be [", B, ",", Hv, ",", dk, ",", dv, "], got ", state.sizes());
  if (g.defined()) state.mul_(torch::exp(g.select(1, 0).to(cd)).unsqueeze(-1).unsqueeze(-1));
  if (beta.defined()) {
    auto pred = torch::matmul(kt.unsqueeze(-2), state).squeeze(-2);  // Sᵀk: [B,H,dv]
    vt = (vt - pred) * beta.select(1, 0).to(cd).unsqueeze(-1);
  }
  state.add_(kt.unsqueeze(-1) * vt.unsqueeze(-2));
  return torch::matmul((qt * scale).unsqueeze(-2), state).squeeze(-2).unsqueeze(1);  // [B,1,H,dv]
}

#ifdef STATECUT_WITH_CUDA_KERNELS
/// The kernels read and write fp32 key-major [B,Hv,dk,dv] (kKV) states, the cache's layout: an undefined state becomes
/// zeros of that shape, any other dtype or layout an fp32 contiguous copy.
void kernel_state(const torch::Tensor& k, const torch::Tensor& v, torch::Tensor& state) {
  if (state.defined() && state.scalar_type() == torch::kFloat32 && state.is_contiguous()) return;
  state = state.defined() ? state.to(torch::kFloat32).contiguous()
                          : torch::zeros({v.size(0), v.size(2), k.size(3), v.size(3)}, v.options().dtype(torch::kFloat32));
}

/// A kernel's optional fp32 input: undefined stays absent.
c10::optional<at::Tensor> fp32_opt(const torch::Tensor& t) {
  return t.defined() ? c10::optional<at::Tensor>(t.to(torch::kFloat32)) : c10::optional<at::Tensor>();
}
#endif

}  // namespace

torch::Tensor gate_from_inputs(const GateInputs& gate) {
  return -torch::exp(gate.A_log) * torch::softplus(gate.a + gate.dt_bias);
}

torch::Tensor delta_rule_cached(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& beta, const GateInputs& gate, double scale, bool l2norm_qk,
                                RecurrenceMode mode, torch::Tensor& state) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (delta_rule_uses_cuda_kernels(q, k, v, {beta, gate.a, gate.A_log, gate.dt_bias})) {
    TORCH_CHECK(beta.defined(), "delta_rule_cached: beta is required");
    const int64_t T = v.size(1);
    kernel_state(k, v, state);
    const c10::optional<at::Tensor> none;
    const c10::optional<at::Tensor> a(gate.a.to(torch::kFloat32)), b(beta.to(torch::kFloat32));
    const c10::optional<at::Tensor> A_log(gate.A_log), dt_bias(gate.dt_bias);
    if (T == 1)
      return cuda::gated_delta_rule_decode_(q, k, v, a, b, scale, state, none, l2norm_qk, /*use_gate_in_kernel=*/true,
                                            A_log, dt_bias, /*use_beta_sigmoid_in_kernel=*/false,
                                            /*state_v_first=*/false);
    auto run = mode == RecurrenceMode::Chunk ? &cuda::gated_delta_rule_chunk : &cuda::gated_delta_rule_recurrent;
    auto [o, S] = run(q, k, v, a, b, scale, c10::optional<at::Tensor>(state), /*output_final_state=*/true, none,
                      l2norm_qk, /*use_gate_in_kernel=*/true, A_log, dt_bias, false, false);
    assign_state(state, S);
    return o;
  }
#endif
  return delta_rule_cached(q, k, v, beta, gate_from_inputs(gate), scale, l2norm_qk, mode, state);
}

torch::Tensor delta_rule_cached(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& beta, const torch::Tensor& g, double scale, bool l2norm_qk,
                                RecurrenceMode mode, torch::Tensor& state) {
  TORCH_CHECK(beta.defined(), "delta_rule_cached: beta is required");
  TORCH_CHECK(v.dim() == 4 && k.dim() == 4, "delta_rule_cached: q, k [B,T,Hk,dk] and v [B,T,Hv,dv] expected");
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (delta_rule_uses_cuda_kernels(q, k, v, {beta, g})) {
    const int64_t T = v.size(1);
    kernel_state(k, v, state);
    const c10::optional<at::Tensor> none;
    const c10::optional<at::Tensor> g_opt = fp32_opt(g);
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
  const auto cd = compute_dtype(v.scalar_type());
  auto qn = l2norm_qk ? l2_normalize(q) : q.to(cd);
  auto kn = l2norm_qk ? l2_normalize(k) : k.to(cd);
  if (v.size(1) == 1) return recurrent_step(qn, kn, v, beta, g, scale, state);
  torch::Tensor S;
  auto o = gated_delta_rule(qn, kn, v, beta, g, scale, state, v.size(1) == 1 ? RecurrenceMode::Recurrent : mode, &S);
  assign_state(state, S);
  return o;
}

torch::Tensor delta_rule_cached_logits(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& beta_logits, bool round_beta, const GateInputs* gate,
                                       double scale, bool l2norm_qk, RecurrenceMode mode, torch::Tensor& state) {
  TORCH_CHECK(beta_logits.defined(), "delta_rule_cached_logits: beta logits are required");
#ifdef STATECUT_WITH_CUDA_KERNELS
  const torch::Tensor none_t;
  if (v.dim() == 4 && v.size(1) == 1 &&
      delta_rule_uses_cuda_kernels(q, k, v, {beta_logits, gate ? gate->a : none_t, gate ? gate->A_log : none_t,
                                             gate ? gate->dt_bias : none_t})) {
    kernel_state(k, v, state);
    const c10::optional<at::Tensor> none;
    const auto opt = [](const torch::Tensor& t) { return c10::optional<at::Tensor>(t); };
    return cuda::gated_delta_rule_decode_(q, k, v, gate ? opt(gate->a) : none, opt(beta_logits), scale, state, none,
                                          l2norm_qk, /*use_gate_in_kernel=*/gate != nullptr,
                                          gate ? opt(gate->A_log) : none, gate ? opt(gate->dt_bias) : none,
                                          /*use_beta_sigmoid_in_kernel=*/true, /*state_v_first=*/false, round_beta);
  }
#endif
  const auto cd = compute_dtype(v.scalar_type());
  const auto beta = round_beta ? torch::sigmoid(beta_logits).to(cd) : torch::sigmoid(beta_logits.to(cd));
  if (gate) return delta_rule_cached(q, k, v, beta, GateInputs{gate->a.to(cd), gate->A_log, gate->dt_bias}, scale,
                                     l2norm_qk, mode, state);
  return delta_rule_cached(q, k, v, beta, torch::Tensor(), scale, l2norm_qk, mode, state);
}

bool decode_fold_admits(int64_t B, int64_t Hk, int64_t Hv, int64_t dv, int64_t W) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  static const bool enabled = env_switch_on("STATECUT_DECODE_FOLD");
  return enabled && cuda::decode_fold_fits(Hk, Hv, dv, W) && cuda::decode_fold_pays(B, Hv);
#else
  (void)B, (void)Hk, (void)Hv, (void)dv, (void)W;
  return false;
#endif
}

torch::Tensor delta_rule_decode_folded(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& beta_logits, bool round_beta, const GateInputs* gate,
                                       double scale, bool l2norm_qk, const DecodeFoldInputs& fold,
                                       torch::Tensor& window, torch::Tensor& state) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  const torch::Tensor none_t;
  if (v.dim() != 4 || v.size(1) != 1 || !fold.conv_w.defined() || fold.conv_w.dim() != 3 ||
      !decode_fold_admits(v.size(0), k.size(2), v.size(2), v.size(3), fold.conv_w.size(2)) ||
      !delta_rule_uses_cuda_kernels(q, k, v, {beta_logits, gate ? gate->a : none_t, gate ? gate->A_log : none_t,
                                              gate ? gate->dt_bias : none_t}) ||
      !fused_ops_apply({q, k, v, beta_logits, fold.conv_w, fold.conv_b, fold.norm_w, fold.z}))
    return {};
  const int64_t B = v.size(0), C = fold.conv_w.size(0), W = fold.conv_w.size(2);
  const int64_t Cq = q.size(2) * q.size(3), Cv = v.size(2) * v.size(3);
  if (C != 2 * Cq + Cv || reinterpret_cast<uintptr_t>(fold.conv_w.data_ptr()) % 8 != 0) return {};
  if (!window.defined()) window = torch::zeros({B, W - 1, C}, v.options());
  if (!window.is_contiguous() || window.scalar_type() != v.scalar_type() || window.device() != v.device() ||
      window.sizes() != torch::IntArrayRef({B, W - 1, C}))
    return {};
  kernel_state(k, v, state);
  const c10::optional<at::Tensor> none;
  const auto opt = [](const torch::Tensor& t) { return c10::optional<at::Tensor>(t); };
  const cuda::DecodeFold f{window, fold.conv_w, fold.conv_b, /*q0=*/0, /*k0=*/Cq, /*v0=*/2 * Cq, fold.norm_w,
                           fold.eps, fold.z};
  return cuda::gated_delta_rule_decode_(q, k, v, gate ? opt(gate->a) : none, opt(beta_logits), scale, state, none,
                                        l2norm_qk, /*use_gate_in_kernel=*/gate != nullptr,
                                        gate ? opt(gate->A_log) : none, gate ? opt(gate->dt_bias) : none,
                                        /*use_beta_sigmoid_in_kernel=*/true, /*state_v_first=*/false, round_beta,
                                        /*delta=*/true, /*beta_dt=*/false, &f);
#else
  (void)q, (void)k, (void)v, (void)beta_logits, (void)round_beta, (void)gate, (void)scale, (void)l2norm_qk;
  (void)fold, (void)window, (void)state;
  return {};
#endif
}

torch::Tensor linear_attention_cached(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& g, double scale, RecurrenceMode mode, torch::Tensor& state,
                                      const torch::Tensor& value_scale) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (v.dim() == 4 && v.size(1) == 1 && delta_rule_uses_cuda_kernels(q, k, v, {g, value_scale})) {
    kernel_state(k, v, state);
    const c10::optional<at::Tensor> none;
    return cuda::gated_delta_rule_decode_(q, k, v, fp32_opt(g), fp32_opt(value_scale), scale, state, none,
                                          /*use_qk_l2norm_in_kernel=*/false, /*use_gate_in_kernel=*/false, none, none,
                                          /*use_beta_sigmoid_in_kernel=*/false, /*state_v_first=*/false,
                                          /*round_beta=*/false, /*delta=*/false);
  }
#endif
  const auto cd = compute_dtype(v.scalar_type());
  if (v.dim() == 4 && v.size(1) == 1) {
    const auto vs = value_scale.defined() ? v.to(cd) * value_scale.to(cd).unsqueeze(-1) : v;
    return recurrent_step(q, k, vs, torch::Tensor(), g, scale, state);
  }
  // A prompt (T > 1): the chunk or recurrent kernel from the carried state on CUDA, LibTorch otherwise
  torch::Tensor S;
  auto o = linear_attention_forward(q, k, v, value_scale, g, scale, state, mode, &S);
  assign_state(state, S);
  return o;
}

torch::Tensor linear_attention_cached_dt(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const GateInputs& gate, double scale, RecurrenceMode mode,
                                         torch::Tensor& state) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (v.dim() == 4 && v.size(1) == 1 && delta_rule_uses_cuda_kernels(q, k, v, {gate.a, gate.A_log, gate.dt_bias})) {
    kernel_state(k, v, state);
    const c10::optional<at::Tensor> none;
    return cuda::gated_delta_rule_decode_(q, k, v, c10::optional<at::Tensor>(gate.a), none, scale, state, none,
                                          /*use_qk_l2norm_in_kernel=*/false, /*use_gate_in_kernel=*/true,
                                          c10::optional<at::Tensor>(gate.A_log), fp32_opt(gate.dt_bias),
                                          /*use_beta_sigmoid_in_kernel=*/false, /*state_v_first=*/false,
                                          /*round_beta=*/false, /*delta=*/false, /*beta_dt=*/true);
  }
#endif
  const auto cd = compute_dtype(v.scalar_type());
  auto dt = gate.a.to(cd);
  if (gate.dt_bias.defined()) dt = dt + gate.dt_bias;
  dt = torch::softplus(dt);
  return linear_attention_cached(q, k, v, -torch::exp(gate.A_log) * dt, scale, mode, state, dt);
}

}  // namespace statecut
