#include "optimized/models/full_attention.h"

#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace statecut {

namespace {

torch::Tensor affine(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  auto y = statecut::linear(x, w);  // torch::matmul(x, wᵀ); the small-batch GEMV on CUDA
  return b.defined() ? y + b : y;
}

}  // namespace

namespace {

/// The attention's inputs for x's T tokens at the positions of cos/sin: q [B,T,H,hd], k, v [B,T,Hkv,hd] (q/k normed
/// and rotated) and the output gate [B,T,H·hd] (undefined without output_gate).
struct AttentionInputs {
  torch::Tensor q, k, v, gate;
};

AttentionInputs attention_inputs(const torch::Tensor& x, const FullAttentionWeights& w, const FullAttentionConfig& cfg,
                                 const RotaryEmbedding& rotary, const torch::Tensor& cos, const torch::Tensor& sin) {
  TORCH_CHECK(x.dim() == 3, "full_attention: expected x [B,T,hidden], got ", x.sizes());
  TORCH_CHECK(cfg.num_kv_heads > 0 && cfg.num_heads % cfg.num_kv_heads == 0,
              "full_attention: num_attention_heads must be a multiple of num_key_value_heads");
  const int64_t B = x.size(0), T = x.size(1), H = cfg.num_heads, Hkv = cfg.num_kv_heads, hd = cfg.head_dim;
  AttentionInputs in;
  auto qg = affine(x, w.q_proj, w.q_bias);
  if (cfg.output_gate) {
    qg = qg.view({B, T, H, 2 * hd});
    in.q = qg.narrow(3, 0, hd);
    in.gate = qg.narrow(3, hd, hd).reshape({B, T, H * hd});
  } else {
    in.q = qg.view({B, T, H, hd});
  }
  in.q = rotary.apply(rms_norm_zero_centered(in.q, w.q_norm, cfg.eps), cos, sin);
  auto k = rms_norm_zero_centered(affine(x, w.k_proj, w.k_bias).view({B, T, Hkv, hd}), w.k_norm, cfg.eps);
  in.k = rotary.apply(k, cos, sin);
  in.v = affine(x, w.v_proj, w.v_bias).view({B, T, Hkv, hd});
  return in;
}

/// o [B,T,H·hd] in x's dtype → the gated output projection.
torch::Tensor gated_out_proj(const torch::Tensor& o, const AttentionInputs& in, const FullAttentionWeights& w,
                             const FullAttentionConfig& cfg) {
  return affine(cfg.output_gate ? o * torch::sigmoid(in.gate) : o, w.o_proj, w.o_bias);
}

}  // namespace

torch::Tensor full_attention(const torch::Tensor& x, const FullAttentionWeights& w, const FullAttentionConfig& cfg,
                             const RotaryEmbedding& rotary, const torch::Tensor& cos, const torch::Tensor& sin) {
  const auto in = attention_inputs(x, w, cfg, rotary, cos, sin);
  const int64_t B = x.size(0), T = x.size(1), H = cfg.num_heads, Hkv = cfg.num_kv_heads, hd = cfg.head_dim;
  // [B, heads, T, hd]; kv heads repeated to the query heads (head h reads kv head h / (H/Hkv)).
  const auto ct = compute_dtype(x.scalar_type());
  auto qh = in.q.permute({0, 2, 1, 3}).to(ct);
  auto kh = in.k.permute({0, 2, 1, 3}).repeat_interleave(H / Hkv, /*dim=*/1).to(ct);
  auto vh = in.v.permute({0, 2, 1, 3}).repeat_interleave(H / Hkv, /*dim=*/1).to(ct);
  auto scores = torch::matmul(qh, kh.transpose(2, 3)) * (1.0 / std::sqrt(static_cast<double>(hd)));
  auto future = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  auto probs = torch::softmax(scores, -1);
  auto o = torch::matmul(probs, vh).permute({0, 2, 1, 3}).reshape({B, T, H * hd}).to(x.scalar_type());
  return gated_out_proj(o, in, w, cfg);
}

AttentionStep attention_step(DecodeCache& cache, int64_t T, const RotaryEmbedding& rotary, torch::Dtype dtype,
                             torch::Device device) {
  AttentionStep step;
  step.positions = token_positions(cache, T, device);
  std::tie(step.cos, step.sin) = rotary.cos_sin_at(step.positions, dtype);
  return step;
}

torch::Tensor full_attention_cached(const torch::Tensor& x, const FullAttentionWeights& w,
                                    const FullAttentionConfig& cfg, const RotaryEmbedding& rotary,
                                    AttentionStep& step, DecodeCache& cache, LayerDecodeState& layer) {
  TORCH_CHECK(step.positions.defined() && x.dim() >= 2 && step.positions.size(0) == x.size(1),
              "full_attention_cached: step is not for this call's tokens");
  const auto in = attention_inputs(x, w, cfg, rotary, step.cos, step.sin);  // checks x and the head counts
  const int64_t B = x.size(0), T = x.size(1), H = cfg.num_heads, Hkv = cfg.num_kv_heads, hd = cfg.head_dim;
  const int64_t r = H / Hkv;
  auto kp = in.k.permute({0, 2, 1, 3}), vp = in.v.permute({0, 2, 1, 3});  // [B, Hkv, T, hd]
  ensure_kv_buffers(cache, layer, cache.position + T, cache.position, kp);
  layer.key.index_copy_(2, step.positions, kp.contiguous());
  layer.value.index_copy_(2, step.positions, vp.contiguous());
  const int64_t cap = layer.key.size(2);
  if (!step.visible.defined() || step.visible.size(0) != r * T || step.visible.size(1) != cap) {
    // Row i·T + t of a kv head's group is query head i of the group at token t (qg below).
    auto visible = torch::arange(cap, step.positions.options()).unsqueeze(0) <= step.positions.unsqueeze(1);
    step.visible = visible.repeat({r, 1});  // [r·T, cap]
  }
  // Query head h = kv head h / r, row i·T + t of its group [B, Hkv, r·T, hd]: one pass over the buffer per kv head.
  auto qg = in.q.permute({0, 2, 1, 3}).reshape({B, Hkv, r * T, hd});
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  torch::Tensor o;
#if TORCH_VERSION_MAJOR >= 2
  if (x.is_cuda() && (x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kHalf)) {
    o = at::scaled_dot_product_attention(qg, layer.key, layer.value, step.visible, 0.0, /*is_causal=*/false, scale);
  }
#endif
  if (!o.defined()) {
    const auto ct = compute_dtype(x.scalar_type());
    auto scores = torch::matmul(qg.to(ct), layer.key.to(ct).transpose(2, 3)) * scale;
    scores = scores.masked_fill(step.visible.logical_not(), -std::numeric_limits<double>::infinity());
    o = torch::matmul(torch::softmax(scores, -1), layer.value.to(ct));
  }
  o = o.reshape({B, H, T, hd}).permute({0, 2, 1, 3}).reshape({B, T, H * hd}).to(x.scalar_type());
  return gated_out_proj(o, in, w, cfg);
}

}  // namespace statecut
