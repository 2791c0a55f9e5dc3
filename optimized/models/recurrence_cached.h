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

/// A decode step's short conv (SiLU, over the stacked q | k | v window) and its output norm, inside the decode kernel's
/// launch (kernels/binding/gated_delta_torch.h, DecodeFold): two launches fewer a layer, bit for bit the conv step, the
/// step and the norm as three (tests/gpu/decode_fold_cuda.cpp).
struct DecodeFoldInputs {
  torch::Tensor conv_w, conv_b;  ///< [Cq+Ck+Cv, 1, W] stacked q | k | v (pack order), and its bias or undefined
  torch::Tensor norm_w, z;       ///< the output norm's weight [dv]; fla's output gate [B,1,Hv,dv] or undefined
  double eps = 1e-6;
};

/// Whether the fold's shape rules and the switch admit a step of B sequences, Hk key heads, Hv value heads of dv and
/// a conv of width W (the first checks of delta_rule_decode_folded): a caller that would run the conv elsewhere asks
/// first, so the conv runs once.
bool decode_fold_admits(int64_t B, int64_t Hk, int64_t Hv, int64_t dv, int64_t W);

/// delta_rule_cached_logits' step from the raw projections q, k [B,1,Hk,dk] and v [B,1,Hv,dv] (before the conv),
/// `window` the layer's stacked conv window [B, W−1, C] (undefined: zeros), shifted in place. Returns the normalised
/// output [B,1,Hv,dv] when the fold serves the step: one token on the CUDA kernels and their fused ops
/// (delta_rule_uses_cuda_kernels, fused_ops_apply), Hv = Hk, dv ≤ 128 with dv % 8 == 0, W = 4, a contiguous window of
/// that shape, B·Hv blocks within one wave (cuda::decode_fold_pays: the small batches where it was measured faster),
/// and the environment not saying STATECUT_DECODE_FOLD=0 (the switch that lets one benchmark call time
/// both ways). Otherwise an undefined tensor, nothing touched: the caller runs the conv, the step and the norm.
torch::Tensor delta_rule_decode_folded(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                       const torch::Tensor& beta_logits, bool round_beta, const GateInputs* gate,
                                       double scale, bool l2norm_qk, const DecodeFoldInputs& fold,
                                       torch::Tensor& window, torch::Tensor& state);

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
