// fla DeltaNet / Gated DeltaNet decoder (math in fla_delta_net.h).
#include "optimized/models/families/fla_delta_net.h"

#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "optimized/models/decode_cache.h"
#include "optimized/models/fused_ops.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/model_registry.h"
#include "optimized/models/recurrence.h"
#include "optimized/models/recurrence_cached.h"

namespace statecut {
namespace {

struct FlaLayerWeights {
  torch::Tensor attn_norm, q_proj, k_proj, v_proj, b_proj, a_proj, A_log, dt_bias;
  torch::Tensor q_conv, k_conv, v_conv, q_conv_b, k_conv_b, v_conv_b;
  torch::Tensor g_proj, o_norm, o_proj, mlp_norm, gate_proj, up_proj, down_proj;
  /// CUDA: [q; k; v; g; b; a] (zero rows to a multiple of 8) and [gate; up] row-stacked, the separate tensors views
  /// into them (pack_layer).
  torch::Tensor in_pack, mlp_pack;
  /// CUDA, when q, k and v all take SiLU after the conv and have biases alike: [q_conv; k_conv; v_conv] (and biases),
  /// so a decode step runs one conv launch over the three (the cache then holds one [B, W−1, Cq+Ck+Cv] window).
  torch::Tensor conv_pack, conv_pack_b;
};

class FlaCausalLM final : public CausalLM {
 public:
  FlaCausalLM(FlaModelConfig cfg, const WeightSource& w, torch::Dtype dtype, torch::Device device)
      : cfg_(std::move(cfg)), dtype_(dtype), device_(device) {
    const auto& L = cfg_.layer;
    const int64_t H = cfg_.hidden_size, key_dim = L.num_heads * L.head_k_dim, value_dim = L.num_v_heads * L.head_v_dim;
    const auto cd = compute_dtype(dtype);
    auto get = [&](const std::string& name, std::vector<int64_t> shape, torch::Dtype dt) {
      auto t = w.get(name, shape, dt, device);
      params_.emplace_back(name, t);
      return t;
    };
    // fla's models (bc3b101) never hand config.conv_bias to their layers, so a checkpoint may say true and hold no
    // conv biases; the weights decide (a generated source, which lists no names, follows the config)
    const bool weights_listed = !w.names().empty();
    embeddings_ = get("model.embeddings.weight", {cfg_.vocab_size, H}, dtype);
    for (int64_t i = 0; i < cfg_.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      const std::string a = p + "attn.";
      FlaLayerWeights lw;
      lw.attn_norm = get(p + "attn_norm.weight", {H}, dtype);
      lw.q_proj = get(a + "q_proj.weight", {key_dim, H}, dtype);
      lw.k_proj = get(a + "k_proj.weight", {key_dim, H}, dtype);
      lw.v_proj = get(a + "v_proj.weight", {value_dim, H}, dtype);
      if (L.gated || L.use_beta) lw.b_proj = get(a + "b_proj.weight", {L.num_v_heads, H}, dtype);
      if (L.gated) {
        lw.a_proj = get(a + "a_proj.weight", {L.num_v_heads, H}, dtype);
        lw.A_log = get(a + "A_log", {L.num_v_heads}, cd);
        lw.dt_bias = get(a + "dt_bias", {L.num_v_heads}, cd);
      }
      if (L.use_short_conv) {
        lw.q_conv = get(a + "q_conv1d.weight", {key_dim, 1, L.conv_size}, dtype);
        lw.k_conv = get(a + "k_conv1d.weight", {key_dim, 1, L.conv_size}, dtype);
        lw.v_conv = get(a + "v_conv1d.weight", {value_dim, 1, L.conv_size}, dtype);
        if (weights_listed ? w.has(a + "q_conv1d.bias") : L.conv_bias) {
          lw.q_conv_b = get(a + "q_conv1d.bias", {key_dim}, dtype);
          lw.k_conv_b = get(a + "k_conv1d.bias", {key_dim}, dtype);
          lw.v_conv_b = get(a + "v_conv1d.bias", {value_dim}, dtype);
        }
      }
      if (L.use_gate) lw.g_proj = get(a + "g_proj.weight", {value_dim, H}, dtype);
      lw.o_norm = get(a + "o_norm.weight", {L.head_v_dim}, dtype);
      lw.o_proj = get(a + "o_proj.weight", {H, value_dim}, dtype);
      lw.mlp_norm = get(p + "mlp_norm.weight", {H}, dtype);
      lw.gate_proj = get(p + "mlp.gate_proj.weight", {cfg_.intermediate_size, H}, dtype);
      lw.up_proj = get(p + "mlp.up_proj.weight", {cfg_.intermediate_size, H}, dtype);
      lw.down_proj = get(p + "mlp.down_proj.weight", {H, cfg_.intermediate_size}, dtype);
      if (device.is_cuda()) pack_layer(lw);
      layers_.push_back(std::move(lw));
    }
    norm_ = get("model.norm.weight", {H}, dtype);
    lm_head_ = cfg_.tie_word_embeddings ? tied_output_head(w, embeddings_, "model.embeddings.weight")
                                        : get("lm_head.weight", {cfg_.vocab_size, H}, dtype);
  }

  ForwardResult forward(const torch::Tensor& input_ids, const ForwardOptions& opt) override {
    ForwardResult res;
    enter_block(opt, -1);
    auto h = embed_tokens(input_ids, embeddings_);
    if (opt.output_hidden_states) res.hidden_states.push_back(h);
    if (opt.capture_boundary) res.boundary.resize(layers_.size());
    torch::Tensor delta;  // the last layer's MLP output, added to h together with the next norm (add_rms_norm)
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      enter_block(opt, static_cast<int64_t>(i));
      const auto& lw = layers_[i];
      torch::Tensor x, y;
      std::tie(h, x) = add_rms_norm(h, delta, lw.attn_norm, cfg_.norm_eps);
      if (opt.output_hidden_states && i > 0) res.hidden_states.push_back(h);
      LayerBoundary* b = opt.capture_boundary ? &res.boundary[i] : nullptr;
      if (b) b->attn_in = x;
      std::tie(h, y) = add_rms_norm(h, attention(lw, x, opt.mode, b, nullptr), lw.mlp_norm, cfg_.norm_eps);
      hand_over_boundary(opt, res, i);
      delta = mlp(lw, y);
    }
    if (!opt.logits) return res;
    enter_block(opt, static_cast<int64_t>(layers_.size()));
    return finish(h, delta, std::move(res), false, opt.head);
  }

  /// The same blocks as forward(), each linear-attention layer continuing from its cached conv windows and state.
  ForwardResult forward_cached(const torch::Tensor& input_ids, DecodeCache& cache, const ForwardOptions& opt) override {
    begin_cached_forward(cache, input_ids, layers_.size());
    ForwardResult res;
    auto h = embed_tokens_cached(input_ids, embeddings_, cache);
    if (opt.output_hidden_states) res.hidden_states.push_back(h);
    torch::Tensor delta;  // as in forward()
    // With the packed projections, each residual add and norm goes with the GEMM that reads it (add_rms_norm_linear,
    // add_rms_norm_gated_mlp): one launch at batch 1 on CUDA; the normalised rows are never needed here.
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      const auto& lw = layers_[i];
      torch::Tensor x, proj, o;
      bool convolved = false;  // proj's q | k | v already through the short conv (conv_in_projection)
      if (use_packed(lw.in_pack)) {
        if (auto pc = conv_in_projection(lw, h, delta, cache.layers[i])) {
          std::tie(h, proj) = *pc;
          convolved = true;
        } else {
          std::tie(h, proj) = add_rms_norm_linear(h, delta, lw.attn_norm, cfg_.norm_eps, lw.in_pack);
        }
      } else {
        std::tie(h, x) = add_rms_norm(h, delta, lw.attn_norm, cfg_.norm_eps);
      }
      if (opt.output_hidden_states && i > 0) res.hidden_states.push_back(h);
      o = attention(lw, x, opt.mode, nullptr, &cache.layers[i], proj, convolved);
      if (use_packed(lw.mlp_pack)) {
        std::tie(h, delta) = add_rms_norm_gated_mlp(h, o, lw.mlp_norm, cfg_.norm_eps, lw.mlp_pack, lw.down_proj);
      } else {
        torch::Tensor y;
        std::tie(h, y) = add_rms_norm(h, o, lw.mlp_norm, cfg_.norm_eps);
        delta = mlp(lw, y);
      }
    }
    end_cached_forward(cache, input_ids.size(1));
    return finish(h, delta, std::move(res), opt.last_logits);
  }

  /// The last residual add, the final norm (its output is the last hidden state) and the head; last_only: the head
  /// (and, without hidden states, the add and norm) on the last position alone (ForwardOptions::last_logits); without
  /// `head` the logits are left out (ForwardOptions::head).
  ForwardResult finish(const torch::Tensor& h, const torch::Tensor& delta, ForwardResult res, bool last_only = false,
                       bool head = true) const {
    if (!head) {
      if (!res.hidden_states.empty()) res.hidden_states.push_back(add_rms_norm(h, delta, norm_, cfg_.norm_eps).second);
      return res;
    }
    if (res.hidden_states.empty()) {  // the normalised row is not asked for: the norm may go with the head's GEMV
      res.logits = add_rms_norm_linear(last_position_if(h, last_only), last_position_if(delta, last_only), norm_,
                                       cfg_.norm_eps, lm_head_)
                       .second.to(torch::kFloat32);
      return res;
    }
    auto x = add_rms_norm(h, delta, norm_, cfg_.norm_eps).second;
    res.hidden_states.push_back(x);  // non-empty: asked for (the embeddings are in)
    res.logits = statecut::linear(last_position_if(x, last_only), lm_head_).to(torch::kFloat32);
    return res;
  }

  const std::string& model_type() const override { return cfg_.model_type; }
  int64_t vocab_size() const override { return cfg_.vocab_size; }


  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() override { return params_; }
  const torch::Tensor& output_head() const override { return lm_head_; }

 private:
  /// On CUDA the projections that read one input are stored as row blocks of one matrix and the named tensors become
  /// views of it (same memory, same names: training and LoRA write through them): one GEMM instead of up to six per
  /// layer in a decode step, whose cost at batch 1 is the number of launches. Used without autograd (use_packed).
  /// The row blocks keep 16-byte alignment for the fused kernels that read them in place: the wide ones (q, k, v, the
  /// output gate g) first, the few rows of b and a after, and zero rows up to a multiple of 8 so every row of the
  /// packed output starts aligned (Gated DeltaNet 1.3B: 9,228 rows, the gate at 6,156 — the gated norm read it one
  /// element at a time, 8.6 µs a call at batch 1).
  void pack_layer(FlaLayerWeights& lw) {
    auto pack = [this](std::initializer_list<torch::Tensor*> parts, bool pad = true) {
      return pack_rows(parts, pad, params_);
    };
    lw.in_pack = pack({&lw.q_proj, &lw.k_proj, &lw.v_proj, &lw.g_proj, &lw.b_proj, &lw.a_proj});
    lw.mlp_pack = pack({&lw.gate_proj, &lw.up_proj});
    const bool biases_alike = lw.q_conv_b.defined() == lw.k_conv_b.defined() &&
                              lw.q_conv_b.defined() == lw.v_conv_b.defined();
    if (cfg_.layer.use_short_conv && cfg_.layer.qk_activation == "silu" && biases_alike) {
      lw.conv_pack = pack({&lw.q_conv, &lw.k_conv, &lw.v_conv}, /*pad=*/false);
      if (lw.q_conv_b.defined()) lw.conv_pack_b = pack({&lw.q_conv_b, &lw.k_conv_b, &lw.v_conv_b}, false);
    }
  }

  /// The decode conv over q | k | v as one launch (conv_pack), the cache's window held as one tensor; a cache written
  /// by the three-conv path (an autograd-mode step) is joined first. Returns the [B, T, Cq+Ck+Cv] output.
  static torch::Tensor stacked_conv_step(const FlaLayerWeights& lw, const torch::Tensor& qkv, LayerDecodeState& c) {
    return causal_conv1d_step(qkv, lw.conv_pack, lw.conv_pack_b, /*silu=*/true, stacked_window(c));
  }
  /// The cache's window as one stacked tensor (undefined before the first step), joined if the three-conv path wrote it.
  static torch::Tensor& stacked_window(LayerDecodeState& c) {
    if (c.conv.size() == 3 && c.conv[0].defined()) c.conv = {torch::cat({c.conv[0], c.conv[1], c.conv[2]}, -1)};
    c.conv.resize(1);
    return c.conv[0];
  }
  /// The layer runs its decode conv over the stacked q | k | v (stacked_conv_step's condition but the cache).
  bool stacked_conv_layer(const FlaLayerWeights& lw) const {
    return cfg_.layer.use_short_conv && lw.conv_pack.defined();
  }
  /// A stacked-conv layer whose decode step the fold may take (delta_rule_decode_folded's layer rules; it then asks
  /// decode_fold_admits and the kernels' conditions).
  bool fold_candidate(const FlaLayerWeights& lw) const {
    const auto& L = cfg_.layer;
    return stacked_conv_layer(lw) && lw.b_proj.defined() && !L.allow_neg_eigval && L.qk_norm != "sum";
  }
  /// A decode step's add, norm, packed projection and stacked short conv in one launch (add_rms_norm_linear_conv:
  /// one row on CUDA) where the decode fold will not take the conv (a layer it serves keeps the plain projection);
  /// nullopt otherwise, the cache's window then at most joined into its stacked form (stacked_window), which the
  /// stacked conv step that follows takes anyway.
  std::optional<std::pair<torch::Tensor, torch::Tensor>> conv_in_projection(const FlaLayerWeights& lw,
                                                                            const torch::Tensor& h,
                                                                            const torch::Tensor& delta,
                                                                            LayerDecodeState& c) const {
    const auto& L = cfg_.layer;
    if (!stacked_conv_layer(lw) || h.dim() != 3 || h.size(0) != 1 || h.size(1) != 1) return {};
    if (fold_candidate(lw) && decode_fold_admits(1, L.num_heads, L.num_v_heads, L.head_v_dim, lw.conv_pack.size(2)))
      return {};
    return add_rms_norm_linear_conv(h, delta, lw.attn_norm, cfg_.norm_eps, lw.in_pack, lw.conv_pack, lw.conv_pack_b,
                                    /*silu=*/true, stacked_window(c));
  }
  /// The other way: a stacked window (from stacked_conv_step) split for the three-conv path.
  static void split_conv_window(const FlaLayerWeights& lw, LayerDecodeState& c) {
    if (c.conv.size() == 1 && c.conv[0].defined()) {
      const int64_t Cq = lw.q_conv.size(0), Ck = lw.k_conv.size(0), Cv = lw.v_conv.size(0);
      const auto w = c.conv[0];
      c.conv = {w.narrow(-1, 0, Cq).contiguous(), w.narrow(-1, Cq, Ck).contiguous(), w.narrow(-1, Cq + Ck, Cv).contiguous()};
    }
    c.conv.resize(3);
  }


  torch::Tensor mlp(const FlaLayerWeights& lw, const torch::Tensor& x) const {
    if (!use_packed(lw.mlp_pack)) return gated_mlp(x, lw.gate_proj, lw.up_proj, lw.down_proj);
    return gated_mlp_packed(x, lw.mlp_pack, lw.down_proj);
  }

  /// cache: null for a whole-sequence forward; else the layer's decode state, read and updated.
  /// projected: the packed projection's output when the caller formed it (add_rms_norm_linear; x is then undefined);
  /// convolved: its q | k | v columns are already the short conv's output (conv_in_projection).
  torch::Tensor attention(const FlaLayerWeights& lw, const torch::Tensor& x_in, RecurrenceMode mode, LayerBoundary* b,
                          LayerDecodeState* cache, const torch::Tensor& projected = {}, bool convolved = false) {
    const auto& L = cfg_.layer;
    const auto& x = projected.defined() ? projected : x_in;  // for its shape, device and options only
    const int64_t B = x.size(0), T = x.size(1);
    const auto cd = compute_dtype(dtype_);
    const bool qk_silu = L.qk_activation == "silu";
    // q, k, v and the b / a / g inputs: one GEMM over the packed rows, or one per projection
    torch::Tensor q, k, v, b_in, a_in, z, qkv;
    if (use_packed(lw.in_pack)) {
      const auto y = projected.defined() ? projected : statecut::linear(x_in, lw.in_pack);
      qkv = y.narrow(-1, 0, lw.q_proj.size(0) + lw.k_proj.size(0) + lw.v_proj.size(0));
      int64_t off = 0;
      auto take = [&](const torch::Tensor& w) {
        if (!w.defined()) return torch::Tensor();
        auto t = y.narrow(-1, off, w.size(0));
        off += w.size(0);
        return t;
      };
      q = take(lw.q_proj), k = take(lw.k_proj), v = take(lw.v_proj), z = take(lw.g_proj);  // pack_layer's order
      b_in = take(lw.b_proj), a_in = take(lw.a_proj);
    } else {
      auto lin = [&x_in](const torch::Tensor& w) { return w.defined() ? statecut::linear(x_in, w) : torch::Tensor(); };
      q = lin(lw.q_proj), k = lin(lw.k_proj), v = lin(lw.v_proj);
      b_in = lin(lw.b_proj), a_in = lin(lw.a_proj), z = lin(lw.g_proj);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(L.head_k_dim));
    const bool l2 = L.qk_norm == "l2";
    if (!convolved && cache && qkv.defined() && fold_candidate(lw)) {
      // A CUDA decode step: the conv and the output norm in the decode kernel's launch where it can take them
      const GateInputs raw{a_in, lw.A_log, lw.dt_bias};
      const DecodeFoldInputs fold{lw.conv_pack, lw.conv_pack_b, lw.o_norm,
                                  L.use_gate ? z.reshape({B, T, L.num_v_heads, L.head_v_dim}) : torch::Tensor(),
                                  L.norm_eps};
      auto o = delta_rule_decode_folded(q.reshape({B, T, L.num_heads, L.head_k_dim}),
                                        k.reshape({B, T, L.num_heads, L.head_k_dim}),
                                        v.reshape({B, T, L.num_v_heads, L.head_v_dim}), b_in, /*round_beta=*/!L.gated,
                                        L.gated ? &raw : nullptr, scale, l2, fold, stacked_window(*cache),
                                        cache->state);
      if (o.defined()) return statecut::linear(o.reshape({B, T, L.num_v_heads * L.head_v_dim}), lw.o_proj);
    }
    if (convolved) {
      // q, k, v: the conv's output, taken from the projection above
    } else if (cache && qkv.defined() && stacked_conv_layer(lw)) {
      const auto y = stacked_conv_step(lw, qkv, *cache);
      const int64_t Cq = lw.q_proj.size(0), Ck = lw.k_proj.size(0);
      q = y.narrow(-1, 0, Cq), k = y.narrow(-1, Cq, Ck), v = y.narrow(-1, Cq + Ck, lw.v_proj.size(0));
    } else if (L.use_short_conv && cache) {
      split_conv_window(lw, *cache);
      q = causal_conv1d_step(q, lw.q_conv, lw.q_conv_b, qk_silu, cache->conv[0]);
      k = causal_conv1d_step(k, lw.k_conv, lw.k_conv_b, qk_silu, cache->conv[1]);
      v = causal_conv1d_step(v, lw.v_conv, lw.v_conv_b, true, cache->conv[2]);
    } else if (L.use_short_conv) {
      q = causal_conv1d(q, lw.q_conv, lw.q_conv_b, qk_silu);
      k = causal_conv1d(k, lw.k_conv, lw.k_conv_b, qk_silu);
      v = causal_conv1d(v, lw.v_conv, lw.v_conv_b, true);
    } else {
      if (qk_silu) q = torch::silu(q), k = torch::silu(k);
      v = torch::silu(v);
    }
    q = q.reshape({B, T, L.num_heads, L.head_k_dim});
    k = k.reshape({B, T, L.num_heads, L.head_k_dim});
    v = v.reshape({B, T, L.num_v_heads, L.head_v_dim});
    if (L.qk_activation == "relu") {
      q = torch::relu(q), k = torch::relu(k);
    } else if (L.qk_activation == "elu") {
      q = torch::elu(q) + 1.0, k = torch::elu(k) + 1.0;
    }
    if (L.qk_norm == "sum") q = q / q.sum(-1, true), k = k / k.sum(-1, true);

    if (cache && x.is_cuda() && lw.b_proj.defined() && !L.allow_neg_eigval) {
      // Decoding on CUDA: beta's sigmoid (DeltaNet: rounded to the model dtype, as fla computes it there) and the
      // gate run in the kernel, which reads its inputs in place.
      const GateInputs raw{a_in, lw.A_log, lw.dt_bias};
      auto o = delta_rule_cached_logits(q, k, v, b_in, /*round_beta=*/!L.gated, L.gated ? &raw : nullptr, scale, l2,
                                        mode, cache->state);
      return output(lw, o, z, B, T);
    }
    torch::Tensor beta;
    if (lw.b_proj.defined()) {
      const auto& logits = b_in;
      if (L.gated)
        beta = torch::sigmoid(logits.to(cd));
      else if (x.is_cuda())  // DeltaNet sigmoids in the model dtype, outside the kernel (one rounding, two launches)
        beta = torch::sigmoid(logits).to(cd);
      else
        beta = torch::sigmoid(logits.to(cd)).to(dtype_).to(cd);
    } else {
      beta = torch::ones({B, T, L.num_v_heads}, x.options().dtype(cd));
    }
    if (L.allow_neg_eigval) beta = beta * 2.0;
    torch::Tensor g;
    GateInputs gate;  // decoding on CUDA: the kernels compute g from these
    if (L.gated) {
      gate = {a_in.to(cd), lw.A_log, lw.dt_bias};
      if (!cache || !x.is_cuda()) g = gate_from_inputs(gate), gate = {};
    }

    torch::Tensor S;
    auto o = !cache           ? delta_rule_forward(q, k, v, beta, g, scale, l2, mode, b ? &S : nullptr)
             : gate.a.defined() ? delta_rule_cached(q, k, v, beta, gate, scale, l2, mode, cache->state)
                                : delta_rule_cached(q, k, v, beta, g, scale, l2, mode, cache->state);
    if (b) {
      b->q = q, b->k = k, b->v = v, b->beta = beta, b->g = g;
      b->final_state = S;
    }
    return output(lw, o, z, B, T);
  }

  /// The attention output o [B,T,Hv,dv] through the output norm (gated by z when use_gate) and o_proj.
  torch::Tensor output(const FlaLayerWeights& lw, torch::Tensor o, const torch::Tensor& z, int64_t B, int64_t T) const {
    const auto& L = cfg_.layer;
    o = o.to(dtype_);
    if (L.use_gate) {
      o = gated_rms_norm(o, z.reshape({B, T, L.num_v_heads, L.head_v_dim}), lw.o_norm, L.norm_eps);
    } else {
      o = rms_norm(o, lw.o_norm, L.norm_eps);
    }
    return statecut::linear(o.reshape({B, T, L.num_v_heads * L.head_v_dim}), lw.o_proj);
  }

  FlaModelConfig cfg_;
  torch::Dtype dtype_;
  torch::Device device_;
  torch::Tensor embeddings_, norm_, lm_head_;
  std::vector<FlaLayerWeights> layers_;
  std::vector<std::pair<std::string, torch::Tensor>> params_;
};

}  // namespace

FlaModelConfig parse_fla_decoder_config(const nlohmann::json& c, const std::string& origin) {
  FlaModelConfig m;
  m.model_type = cfg_string(c, "model_type", "", origin);
  m.vocab_size = cfg_int(c, "vocab_size", origin);
  m.hidden_size = cfg_int(c, "hidden_size", origin);
  m.num_layers = cfg_layer_count(c, origin);
  m.norm_eps = cfg_norm_eps(c, "norm_eps", 1e-6, origin);
  m.tie_word_embeddings = cfg_bool(c, "tie_word_embeddings", false, origin);
  if (m.vocab_size <= 0 || m.hidden_size <= 0 || m.num_layers <= 0)
    config_error(origin, "vocab_size, hidden_size and num_hidden_layers must be positive");
  if (c.contains("attn") && !c["attn"].is_null())
    config_error(origin, "'attn': hybrid softmax-attention layers are not supported");
  if (c.contains("attnres_block_size") && !c["attnres_block_size"].is_null())
    config_error(origin, "'attnres_block_size': fla's attention residuals are not supported");
  const auto act = cfg_string(c, "hidden_act", "swish", origin);
  if (act != "swish" && act != "silu") config_error(origin, "'hidden_act': only swish is supported, got '" + act + "'");
  // fla's layers assert mode in {chunk, fused_recurrent} (statecut's own kernels do not depend on it): another value
  // cannot load in fla, so it is refused rather than carried into a pruned checkpoint
  const auto mode = cfg_string(c, "attn_mode", "chunk", origin);  // null reads as absent
  if (mode != "chunk" && mode != "fused_recurrent")
    config_error(origin, "'attn_mode': fla runs chunk or fused_recurrent, got '" + mode + "'");
  if (c.contains("intermediate_size") && !c["intermediate_size"].is_null()) {
    m.intermediate_size = cfg_int(c, "intermediate_size", origin);
  } else {  // fla GatedMLP: int(hidden · ratio · 2/3) rounded up to a multiple of 256
    const double ratio = cfg_double(c, "hidden_ratio", 4.0, origin);
    const auto raw = static_cast<int64_t>(static_cast<double>(m.hidden_size) * ratio * 2.0 / 3.0);
    m.intermediate_size = 256 * ((raw + 255) / 256);
  }
  m.layer.norm_eps = m.norm_eps;
  m.layer.conv_size = cfg_int(c, "conv_size", 4, origin);
  m.layer.use_short_conv = cfg_bool(c, "use_short_conv", true, origin);
  m.layer.conv_bias = cfg_bool(c, "conv_bias", false, origin);
  m.layer.allow_neg_eigval = cfg_bool(c, "allow_neg_eigval", false, origin);
  if (m.layer.conv_size <= 0) config_error(origin, "'conv_size' must be positive");
  return m;
}

std::unique_ptr<CausalLM> make_fla_causal_lm(const FlaModelConfig& cfg, const WeightSource& w, torch::Dtype dtype,
                                             torch::Device device) {
  return std::make_unique<FlaCausalLM>(cfg, w, dtype, device);
}

std::vector<PrunableLayer> fla_prunable_layers(const nlohmann::json& c, int64_t heads, int64_t dk,
                                               const std::string& origin) {
  const int64_t n_layers = cfg_layer_count(c, origin);
  std::set<int64_t> attn_layers;  // fla hybrids: config "attn": {"layers": [...]} are softmax attention
  if (c.contains("attn") && c["attn"].is_object() && c["attn"].contains("layers") && c["attn"]["layers"].is_array())
    for (const auto& l : c["attn"]["layers"])
      if (l.is_number_integer()) attn_layers.insert(l.get<int64_t>());
  const bool conv = cfg_bool(c, "use_short_conv", true, origin);
  std::vector<PrunableLayer> out;
  for (int64_t i = 0; i < n_layers; ++i) {
    if (attn_layers.count(i)) continue;
    PrunableLayer L = prunable_layer_shape(i, heads, dk, origin);
    const std::string p = "model.layers." + std::to_string(i) + ".attn.";
    L.q_weight = p + "q_proj.weight";
    L.k_weight = p + "k_proj.weight";
    if (conv) {
      L.q_conv = p + "q_conv1d.weight";
      L.k_conv = p + "k_conv1d.weight";
    }
    out.push_back(L);
  }
  return out;
}

namespace {

/// delta_net's key geometry: H = num_heads, dk = int(hidden_size·expand_k) / H.
std::pair<int64_t, int64_t> delta_net_heads_and_dk(const nlohmann::json& c, const std::string& origin) {
  const int64_t hidden = cfg_int(c, "hidden_size", origin);
  const int64_t H = cfg_int(c, "num_heads", kFlaDeltaNetDefaultHeads, origin);
  const auto key_dim = static_cast<int64_t>(static_cast<double>(hidden) * cfg_double(c, "expand_k", 1.0, origin));
  if (H <= 0 || key_dim <= 0 || key_dim % H != 0)
    config_error(origin, "key_dim " + std::to_string(key_dim) + " not a positive multiple of num_heads");
  return {H, key_dim / H};
}

std::unique_ptr<CausalLM> build_delta_net(const nlohmann::json& c, const WeightSource& w, torch::Dtype dtype,
                                          torch::Device device) {
  const std::string origin = cfg_string(c, kConfigPathKey, "config.json", "config.json");
  FlaModelConfig m = parse_fla_decoder_config(c, origin);
  auto& L = m.layer;
  L.gated = false;
  L.num_heads = L.num_v_heads = cfg_int(c, "num_heads", kFlaDeltaNetDefaultHeads, origin);
  const double expand_k = cfg_double(c, "expand_k", 1.0, origin), expand_v = cfg_double(c, "expand_v", 1.0, origin);
  const auto key_dim = static_cast<int64_t>(static_cast<double>(m.hidden_size) * expand_k);    // python int()
  const auto value_dim = static_cast<int64_t>(static_cast<double>(m.hidden_size) * expand_v);
  if (L.num_heads <= 0 || key_dim <= 0 || value_dim <= 0 || key_dim % L.num_heads || value_dim % L.num_heads)
    config_error(origin, "hidden_size·expand_k and hidden_size·expand_v must be positive multiples of num_heads");
  L.head_k_dim = key_dim / L.num_heads;
  L.head_v_dim = value_dim / L.num_heads;
  L.use_beta = cfg_bool(c, "use_beta", true, origin);
  L.use_gate = cfg_bool(c, "use_gate", false, origin);
  L.qk_activation = cfg_string(c, "qk_activation", "silu", origin);
  L.qk_norm = cfg_string(c, "qk_norm", "l2", origin);
  if (L.qk_activation != "silu" && L.qk_activation != "relu" && L.qk_activation != "elu" &&
      L.qk_activation != "identity")
    config_error(origin, "'qk_activation': unknown '" + L.qk_activation + "'");
  if (L.qk_norm != "l2" && L.qk_norm != "sum") config_error(origin, "'qk_norm': unknown '" + L.qk_norm + "'");
  return make_fla_causal_lm(m, w, dtype, device);
}

}  // namespace

void register_fla_delta_net() {
  FamilySpec spec;
  spec.model_type = "delta_net";
  spec.build = build_delta_net;
  spec.prunable_layers = [](const nlohmann::json& c, const std::string& origin) {
    const auto [H, dk] = delta_net_heads_and_dk(c, origin);
    return fla_prunable_layers(c, H, dk, origin);
  };
  // expand_k = H·k'/hidden_size, such that fla's int(hidden·expand_k) gives back key_dim H·k'.
  spec.pruned_config = [](const nlohmann::json& config, int new_dk, const std::string& origin) {
    nlohmann::json c = config;
    const int64_t hidden = cfg_int(c, "hidden_size", origin);
    const int64_t H = cfg_int(c, "num_heads", kFlaDeltaNetDefaultHeads, origin);
    const double e = factor_truncating_to(H * new_dk, hidden, "expand_k (key_dim)", origin);
    c["expand_k"] = e;
    return c;
  };
  spec.caps = {/*delta_rule=*/true, /*gated=*/false};
  register_family(std::move(spec));
}

}  // namespace statecut
