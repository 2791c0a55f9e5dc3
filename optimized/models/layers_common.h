/// Building blocks shared by the model families (LibTorch). Norms compute in fp32 (f64 for f64 inputs) and return
/// the input dtype, like fla's fused kernels.
///
///   rms_norm(x, w)             y = x · rsqrt(mean(x²) + eps) · w                      (over the last dim)
///   gated_rms_norm(x, z, w)    y = x · rsqrt(mean(x²) + eps) · w · z · sigmoid(z)     (fla FusedRMSNormGated, swish)
///   add_rms_norm(x, d, w)      (s, rms_norm(s, w)) with s = x + d in x's dtype        (residual add, then the norm)
///   rms_norm_zero_centered     y = x · rsqrt(mean(x²) + eps) · (1 + w), (1 + w) in fp32  (Gemma style: Qwen3.5's
///                              model and q/k norms; transformers scales in fp32 BEFORE the cast, unlike Llama)
///   qwen_gated_rms_norm(x,z,w) y = ((w · n) · silu(z)) with n = x · rsqrt(mean(x²) + eps) rounded to x's dtype and
///                              w · n rounded too (transformers' Qwen3_5RMSNormGated: weight w, NOT 1 + w)
///   l2_normalize(x)            y = x · rsqrt(Σ x² + eps), eps = 1e-6                  (fla l2norm, in the compute dtype)
///   causal_conv1d(x, w, b)     y_t,c = Σ_{j<W} w[c,0,j] · x_{t−W+1+j, c} (+ b_c), x_{<0} = 0; optional SiLU after
///                              (depthwise, weight [C,1,W]; index W−1 hits the current token, like nn.Conv1d with
///                              padding W−1 truncated to T)
///   gated_mlp(x)               down(silu(gate(x)) · up(x))
///   add_rms_norm_linear        (s, rms_norm(s, w) · Wᵀ) with s = x + d: a residual add, the next norm and the
///                              projection reading it (add_rms_norm_gated_mlp: the gated MLP reading it)
///   embed_tokens(ids, E)       h[b,t] = E[ids[b,t]]  (ids checked: [B,T], every id in [0, rows of E))
#pragma once
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace statecut {

class WeightSource;

/// fp32 for bf16/f16/f32 inputs, f64 for f64.
torch::Dtype compute_dtype(torch::Dtype d);

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);
torch::Tensor gated_rms_norm(const torch::Tensor& x, const torch::Tensor& gate, const torch::Tensor& weight, double eps);
/// d undefined: (x, rms_norm(x)). One launch on CUDA (a decode step's residual add and the next norm).
std::pair<torch::Tensor, torch::Tensor> add_rms_norm(const torch::Tensor& x, const torch::Tensor& d,
                                                     const torch::Tensor& weight, double eps);
torch::Tensor rms_norm_zero_centered(const torch::Tensor& x, const torch::Tensor& weight, double eps);
std::pair<torch::Tensor, torch::Tensor> add_rms_norm_zero_centered(const torch::Tensor& x, const torch::Tensor& d,
                                                                   const torch::Tensor& weight, double eps);
torch::Tensor qwen_gated_rms_norm(const torch::Tensor& x, const torch::Tensor& gate, const torch::Tensor& weight,
                                  double eps);
/// Returns the compute dtype (fp32/f64), not the input dtype.
torch::Tensor l2_normalize(const torch::Tensor& x, double eps = 1e-6);
/// x [B,T,C], weight [C,1,W], bias [C] or undefined.
/// CUDA bf16/fp16 and W <= 8: the fused kernels (kernels/fused_layer_ops.h), under autograd too (conv1d_autograd.h).
torch::Tensor causal_conv1d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, bool silu);
/// causal_conv1d on LibTorch operations whatever the device: fp32 (f64) copies, the depthwise conv1d, SiLU, the input
/// dtype; the path every other input takes (and the one STATECUT_FUSED=0 keeps), for tests that compare the two.
torch::Tensor causal_conv1d_libtorch(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                     bool silu);
/// x [...,in] · wᵀ with w [out,in]. Call it qualified, statecut::linear: ADL would also find torch::linear.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w);
torch::Tensor gated_mlp(const torch::Tensor& x, const torch::Tensor& gate_w, const torch::Tensor& up_w,
                        const torch::Tensor& down_w);
/// gated_mlp with gate and up stacked as the row halves of one matrix gate_up [2I, hidden] (pack_rows): one GEMM.
torch::Tensor gated_mlp_packed(const torch::Tensor& x, const torch::Tensor& gate_up, const torch::Tensor& down_w);
/// add_rms_norm (add_rms_norm_zero_centered) then statecut::linear of the norm by W: (s, y). At batch 1 on CUDA one
/// launch, bit for bit the two (kernels/fused_layer_ops.h gemv_norm: every block of the GEMV forms the normalised row
/// itself, its weight rows streaming into L2 meanwhile); the normalised row is then never written, so a caller that
/// needs it (hidden states, boundaries) calls add_rms_norm. d undefined: s = x.
std::pair<torch::Tensor, torch::Tensor> add_rms_norm_linear(const torch::Tensor& x, const torch::Tensor& d,
                                                            const torch::Tensor& weight, double eps,
                                                            const torch::Tensor& w, bool zero_centered = false);
/// add_rms_norm_linear whose first C = conv_w.size(0) output columns then pass through causal_conv1d_step(·, conv_w,
/// conv_b, silu, conv) (decode_cache.h; conv [1, W−1, C] shifted in place, created as zeros when undefined): a decode
/// step's residual add, norm, packed projection and short conv. Served in one launch where it applies (CUDA, one row,
/// W = 4: cuda::fused_add_rms_norm_gemv_conv, bit for bit the GEMV then the conv step); otherwise nullopt and nothing
/// touched, the caller runs add_rms_norm_linear and the conv step.
std::optional<std::pair<torch::Tensor, torch::Tensor>> add_rms_norm_linear_conv(
    const torch::Tensor& x, const torch::Tensor& d, const torch::Tensor& weight, double eps, const torch::Tensor& w,
    const torch::Tensor& conv_w, const torch::Tensor& conv_b, bool silu, torch::Tensor& conv,
    bool zero_centered = false);
/// The same before gated_mlp_packed: (s, gated_mlp_packed(rms_norm(s, w), gate_up, down_w)); on CUDA at batch 1 the
/// norm, the gate|up GEMV and silu·mul are one launch, the down projection a second.
std::pair<torch::Tensor, torch::Tensor> add_rms_norm_gated_mlp(const torch::Tensor& x, const torch::Tensor& d,
                                                               const torch::Tensor& weight, double eps,
                                                               const torch::Tensor& gate_up,
                                                               const torch::Tensor& down_w, bool zero_centered = false);

/// Row-stacks the defined tensors of `parts` (same trailing shape) into one new tensor, with zero rows up to a multiple
/// of 8 when `pad` (so every part of a bf16 GEMM output row starts 16-byte aligned), and makes each part — and its
/// entry in `params`, found by identity — a view of its rows: same names, same values, one GEMM instead of one per
/// part in a decode step (where the cost of a small GEMM is its launch). Training writes through the views.
torch::Tensor pack_rows(std::initializer_list<torch::Tensor*> parts, bool pad,
                        std::vector<std::pair<std::string, torch::Tensor>>& params);
/// Whether a forward takes a pack_rows matrix: it exists (CUDA) and no autograd records the pass (training goes through
/// the named views, one GEMM each, so gradients reach each parameter by name).
bool use_packed(const torch::Tensor& pack);

/// input_ids [B,T] (any integer dtype, any device) → E's rows [B,T,hidden] on E's device. Throws (TORCH_CHECK, one
/// line) when ids is not 2-D or an id lies outside [0, E.size(0)). The first step of every family's forward().
torch::Tensor embed_tokens(const torch::Tensor& input_ids, const torch::Tensor& embeddings);

/// The output head of a config that ties it to the embeddings (`tie_word_embeddings` true): the embeddings. A stored
/// lm_head.weight beside them is accepted when it equals them (a tied model saved with both names) and refused,
/// naming the file, when it differs — which of the two is the output head is then ambiguous (transformers 5 keeps
/// such a head untied and warns). Generated sources (statecut train) store nothing and are not compared.
torch::Tensor tied_output_head(const WeightSource& w, const torch::Tensor& embeddings,
                               const std::string& embeddings_name);

/// A config.json that no family can load: throws io::Error "<origin>: <what>" (every family's config errors).
[[noreturn]] void config_error(const std::string& origin, const std::string& what);
/// config.json field readers; a wrong type or missing required key throws io::Error "<origin>: '<key>': <problem>".
/// cfg_int: a JSON integer. 64.0 is refused: the libraries size tensors and ranges with these keys, and torch and
/// Python refuse a float there (nn.Linear(64.0, ...), range(24.0)), so such a config loads nowhere else.
int64_t cfg_int(const nlohmann::json& c, const std::string& key, const std::string& origin);
int64_t cfg_int(const nlohmann::json& c, const std::string& key, int64_t dflt, const std::string& origin);
/// A key the libraries only do arithmetic with ((i + 1) % full_attention_interval works with 4.0): an integer, or a
/// float with an integral value.
int64_t cfg_integral(const nlohmann::json& c, const std::string& key, int64_t dflt, const std::string& origin);
double cfg_double(const nlohmann::json& c, const std::string& key, double dflt, const std::string& origin);
/// A factor e that Python's int(base·e) turns back into `target` (fla's int(hidden·expand_k),
/// int(head_dim·expand_v)): target/base, or the first of the next few doubles up when the rounded quotient lands an
/// ulp low (44·(30/44) = 29.999999999999996); a JSON number written from it reads back as the same double. Throws config_error(origin,
/// "<name> cannot express <target>") when none does.
double factor_truncating_to(int64_t target, int64_t base, const std::string& name, const std::string& origin);
/// num_hidden_layers, at most kMaxLayers: the families list one entry per configured layer before any tensor is read,
/// so a count no checkpoint can hold (10^12 ran prune and verify out of memory) is refused here.
constexpr int64_t kMaxLayers = 1 << 16;  ///< the deepest models published have ~100 layers
int64_t cfg_layer_count(const nlohmann::json& c, const std::string& origin);
/// A norm epsilon: finite and >= 0 (a negative one makes the norm's square root NaN on small rows, which the forward
/// then blamed on the text).
double cfg_norm_eps(const nlohmann::json& c, const std::string& key, double dflt, const std::string& origin);
bool cfg_bool(const nlohmann::json& c, const std::string& key, bool dflt, const std::string& origin);
std::string cfg_string(const nlohmann::json& c, const std::string& key, const std::string& dflt,
                       const std::string& origin);

}  // namespace statecut
