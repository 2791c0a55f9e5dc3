/// The recurrences of recurrence.h continuing from a carried state (incremental decoding, decode_cache.h).
///
///   delta_rule_cached        = delta_rule_forward (same inputs, same contract) with initial state `state`
///   linear_attention_cached  = linear_attention_forward (Mamba-2's SSD) with initial state `state`; one token on
///                              CUDA: the decode kernel with delta = false, a prompt the chunk (or recurrent) kernel
/// state: [B,Hv,dk,dv] key-major in the compute dtype (fp32; f64 for f64 activations), undefined = zeros. On return it
/// holds the final state, written in place when it was defined with that shape (CUDA graphs replay into it).
/// Metamorphic relation: run(x[0:T1+T2]) = run(x[T1:], state = run(x[0:T1])) up to rounding.
///
/// Dispatch, delta rule: the CUDA kernels under delta_rule_forward's conditions (bf16/fp16 on CUDA, dk ≤ 256, dv ≤ 1024,
/// dv % 4 == 0; delta_rule_uses_cuda_kernels): one token → gated_delta_rule_decode_ (the decode kernel, state
/// updated in place, fp32), T > 1 → gated_delta_rule_chunk (mode Chunk) or _recurrent with the state as
/// initial_state. Everything else: l2_normalize + gated_delta_rule on LibTorch, one token in the recurrent form.
#pragma once
#include <torch/torch.h>

#include "optimized/models/model.h"

namespace statecut {

torch::Tensor delta_rule_cached(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& beta, const torch::Tensor& g, double scale, bool l2norm_qk,
                                RecurrenceMode mode, torch::Tensor& state);

/// Gated DeltaNet's decay from its inputs, g = −exp(A_log) · softplus(a + dt_bias): a [B,T,Hv] logits in the compute
/// dtype, A_log and dt_bias [Hv]. The overload below hands them to the CUDA kernels (use_gate_in_kernel: one launch
/// per layer instead of six in a decode step) and otherwise computes g with LibTorch, as gate_from_inputs.
struct GateInputs {
  torch::Tensor a, A_log, dt_bias;
};
torch::Tensor gate_from_inputs(const GateInputs& gate);
torch::Tensor delta_rule_cached(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const torch::Tensor& beta, const GateInputs& gate, double scale, bool l2norm_qk,
                                RecurrenceMode mode, torch::Tensor& state);

/// The same from the projections' raw outputs, as a decode step has them: beta = sigmoid(beta_logits) (round_beta: in
/// the activation dtype, fla DeltaNet's rounding) and, with `gate`, g from gate->a, also raw. One token on the CUDA
/// kernels: the sigmoid, the gate and the reads of q, k, v, a and beta (slices of one packed projection output) all
/// happen in the decode kernel, no launch before it; otherwise beta and g are formed with LibTorch and handed to the
/// overloads above.
torch::Tensor delta_rule_cached_logits(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& beta_logits, bool round_beta, const GateInputs* gate,
                                       double scale, bool l2norm_qk, RecurrenceMode mode, torch::Tensor& state);

/// value_scale [B,T,Hv] (optional): b_t scaling each token's value, S_t = exp(g_t) S_{t-1} + b_t k_t v_tᵀ (Mamba-2:
/// b = dt). bf16/fp16 q, k, v on CUDA: the kernels without their delta term (delta = false; one token: the decode
/// kernel, state updated in place), output in v's dtype; otherwise LibTorch in the compute dtype.
torch::Tensor linear_attention_cached(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& g, double scale, RecurrenceMode mode, torch::Tensor& state,
                                      const torch::Tensor& value_scale = torch::Tensor());

/// Mamba-2's step from its raw dt input: dt = softplus(gate.a + gate.dt_bias), g = −exp(gate.A_log) · dt, then
/// linear_attention_cached(q, k, v, g, scale, mode, state, /*value_scale=*/dt). One token of bf16/fp16 on CUDA: dt
/// and g are formed in the decode kernel from `a` read in place (beta_dt), no launch before it; otherwise LibTorch in
/// the compute dtype (the same values as forming dt · A with A = −exp(A_log): one fp32 product either way).
torch::Tensor linear_attention_cached_dt(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const GateInputs& gate, double scale, RecurrenceMode mode,
                                         torch::Tensor& state);

}  // namespace statecut
