#include "optimized/models/full_attention.h"

#include <limits>

namespace statecut {

namespace {

torch::Dtype float_compute(torch::Dtype d) { return d == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32; }

torch::Tensor affine(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  auto y = torch::matmul(x, w.t());
  return b.defined() ? y + b : y;
}

}  // namespace

torch::Tensor rms_norm_zero_centered(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  const auto ct = float_compute(x.scalar_type());
  auto xf = x.to(ct);
  auto normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  // transformers multiplies by (1 + w) in fp32 BEFORE casting back (unlike Llama's cast-then-scale).
  return (normed * (1.0 + weight.to(ct))).to(x.scalar_type());
}

namespace {

/// full_attention / full_attention_cached: key, value null for a whole sequence; else the KV cache, appended to.
torch::Tensor attend(const torch::Tensor& x, const FullAttentionWeights& w, const FullAttentionConfig& cfg,
                     const RotaryEmbedding& rotary, const torch::Tensor& cos, const torch::Tensor& sin,
                     torch::Tensor* key, torch::Tensor* value) {
  TORCH_CHECK(x.dim() == 3, "full_attention: expected x [B,T,hidden], got ", x.sizes());
  TORCH_CHECK(cfg.num_kv_heads > 0 && cfg.num_heads % cfg.num_kv_heads == 0,
              "full_attention: num_attention_heads must be a multiple of num_key_value_heads");
  const int64_t B = x.size(0), T = x.size(1), H = cfg.num_heads, Hkv = cfg.num_kv_heads, hd = cfg.head_dim;

  torch::Tensor q, gate;
  auto qg = affine(x, w.q_proj, w.q_bias);
  if (cfg.output_gate) {
    qg = qg.view({B, T, H, 2 * hd});
    q = qg.narrow(3, 0, hd);
    gate = qg.narrow(3, hd, hd).reshape({B, T, H * hd});
  } else {
    q = qg.view({B, T, H, hd});
  }
  q = rms_norm_zero_centered(q, w.q_norm, cfg.eps);
  auto k = rms_norm_zero_centered(affine(x, w.k_proj, w.k_bias).view({B, T, Hkv, hd}), w.k_norm, cfg.eps);
  auto v = affine(x, w.v_proj, w.v_bias).view({B, T, Hkv, hd});
  q = rotary.apply(q, cos, sin);
  k = rotary.apply(k, cos, sin);

  // [B, heads, T, hd]; kv heads repeated to the query heads (head h reads kv head h / (H/Hkv)).
  const auto ct = float_compute(x.scalar_type());
  auto kp = k.permute({0, 2, 1, 3}), vp = v.permute({0, 2, 1, 3});  // [B, Hkv, T, hd]
  int64_t past = 0;
  if (key) {  // positions offset … offset+T−1 follow the cached ones
    if (key->defined() && key->size(2) > 0) {
      past = key->size(2);
      kp = torch::cat({*key, kp}, 2);
      vp = torch::cat({*value, vp}, 2);
    }
    *key = kp.contiguous();
    *value = vp.contiguous();
  }
  auto qh = q.permute({0, 2, 1, 3}).to(ct);
  auto kh = kp.repeat_interleave(H / Hkv, /*dim=*/1).to(ct);
  auto vh = vp.repeat_interleave(H / Hkv, /*dim=*/1).to(ct);
  auto scores = torch::matmul(qh, kh.transpose(2, 3)) * (1.0 / std::sqrt(static_cast<double>(hd)));
  // query i (position past + i) sees keys j <= past + i
  auto future =
      torch::ones({T, past + T}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(past + 1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  auto probs = torch::softmax(scores, -1);
  auto o = torch::matmul(probs, vh).permute({0, 2, 1, 3}).reshape({B, T, H * hd}).to(x.scalar_type());
  if (cfg.output_gate) o = o * torch::sigmoid(gate);
  return affine(o, w.o_proj, w.o_bias);
}

}  // namespace

torch::Tensor full_attention(const torch::Tensor& x, const FullAttentionWeights& w, const FullAttentionConfig& cfg,
                             const RotaryEmbedding& rotary, const torch::Tensor& cos, const torch::Tensor& sin) {
  return attend(x, w, cfg, rotary, cos, sin, nullptr, nullptr);
}

torch::Tensor full_attention_cached(const torch::Tensor& x, const FullAttentionWeights& w,
                                    const FullAttentionConfig& cfg, const RotaryEmbedding& rotary,
                                    const torch::Tensor& cos, const torch::Tensor& sin, torch::Tensor& key,
                                    torch::Tensor& value) {
  return attend(x, w, cfg, rotary, cos, sin, &key, &value);
}

}  // namespace statecut
