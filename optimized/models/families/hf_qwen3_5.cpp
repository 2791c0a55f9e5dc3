// transformers Qwen3.5 / Qwen3-Next hybrid decoder (math in hf_qwen3_5.h).
#include "optimized/models/families/hf_qwen3_5.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "optimized/models/full_attention.h"
#include "optimized/io/safetensors.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/model_registry.h"
#include "optimized/models/decode_cache.h"
#include "optimized/models/recurrence.h"
#include "optimized/models/recurrence_cached.h"
#include "optimized/models/rotary.h"

namespace statecut {
namespace {

struct QwenConfig {
  int64_t vocab = 0, hidden = 0, layers = 0, intermediate = 0;
  int64_t hk = 0, hv = 0, dk = 0, dv = 0, conv = 4;  // linear attention
  int64_t heads = 0, kv_heads = 0, head_dim = 0;      // full attention
  double eps = 1e-6;
  bool attention_bias = false, output_gate = true, tie = false;
  std::vector<bool> full;  // per layer: full attention?
};

QwenConfig qwen_parse_config(const nlohmann::json& c, const std::string& origin, QwenLinearLayout layout) {
  QwenConfig m;
  m.vocab = cfg_int(c, "vocab_size", origin);
  m.hidden = cfg_int(c, "hidden_size", origin);
  m.layers = cfg_layer_count(c, origin);
  m.intermediate = cfg_int(c, "intermediate_size", origin);
  m.hk = cfg_int(c, "linear_num_key_heads", origin);
  m.hv = cfg_int(c, "linear_num_value_heads", origin);
  m.dk = cfg_int(c, "linear_key_head_dim", origin);
  m.dv = cfg_int(c, "linear_value_head_dim", origin);
  m.conv = cfg_int(c, "linear_conv_kernel_dim", 4, origin);
  m.heads = cfg_int(c, "num_attention_heads", origin);
  // The model classes' defaults where a config leaves a key out (transformers 5's Qwen3_5TextConfig /
  // Qwen3NextConfig): 4 / 2 key-value heads, head_dim 256, 512 experts, a quarter of each head rotated (rotary.h).
  m.kv_heads = cfg_int(c, "num_key_value_heads", layout == QwenLinearLayout::Packed ? 2 : 4, origin);
  if (m.vocab <= 0 || m.hidden <= 0 || m.layers <= 0 || m.intermediate <= 0 || m.hk <= 0 || m.hv <= 0 ||
      m.dk <= 0 || m.dv <= 0 || m.conv <= 0 || m.heads <= 0 || m.kv_heads <= 0)
    config_error(origin, "sizes, head counts and head dims must be positive");
  m.head_dim = cfg_int(c, "head_dim", 256, origin);
  if (m.head_dim <= 0) config_error(origin, "'head_dim' must be positive");
  m.eps = cfg_norm_eps(c, "rms_norm_eps", 1e-6, origin);
  m.attention_bias = cfg_bool(c, "attention_bias", false, origin);
  m.output_gate = cfg_bool(c, "attn_output_gate", true, origin);
  m.tie = cfg_bool(c, "tie_word_embeddings", false, origin);
  const std::string act = cfg_string(c, "hidden_act", "silu", origin);
  if (act != "silu") config_error(origin, "'hidden_act': only silu is supported, got '" + act + "'");
  if (m.hv % m.hk != 0) config_error(origin, "linear_num_value_heads must be a multiple of linear_num_key_heads");
  if (m.heads % m.kv_heads != 0) config_error(origin, "num_attention_heads must be a multiple of num_key_value_heads");

  m.full = qwen_full_attention_layers(c, m.layers, origin);
  if (layout == QwenLinearLayout::Packed) {  // Qwen3-Next: dense MLP only
    const int64_t experts = cfg_int(c, "num_experts", 512, origin);
    const int64_t step = cfg_integral(c, "decoder_sparse_step", 1, origin);
    if (experts > 0 && step <= 0)  // transformers divides by it (ZeroDivisionError); it was read as all dense
      config_error(origin, "'decoder_sparse_step' must be positive, got " + std::to_string(step));
    std::vector<int64_t> mlp_only;
    // a list of layer indices (null: none); anything else transformers cannot read (`i in "all"` is a TypeError)
    if (c.contains("mlp_only_layers") && !c.at("mlp_only_layers").is_null()) {
      const auto& ml = c.at("mlp_only_layers");
      if (!ml.is_array() || !std::all_of(ml.begin(), ml.end(), [](const auto& v) { return v.is_number_integer(); }))
        config_error(origin, "'mlp_only_layers': expected a list of layer indices, got " + ml.dump());
      for (const auto& v : ml) mlp_only.push_back(v.get<int64_t>());
    }
    for (int64_t i = 0; i < m.layers; ++i) {
      const bool dense = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
      if (!dense && experts > 0 && (i + 1) % step == 0)
        config_error(origin, "layer " + std::to_string(i) + " is a sparse-MoE layer (num_experts " +
                               std::to_string(experts) + "), which is not supported");
    }
  }
  return m;
}

struct QwenLayer {
  bool full = false;
  torch::Tensor input_norm, post_norm, gate_proj, up_proj, down_proj;
  // linear attention (Separate: qkv, z, b, a; Packed: qkvz, ba)
  torch::Tensor qkv, z, b, a, qkvz, ba, conv_w, dt_bias, A_log, norm, out_proj;
  FullAttentionWeights attn;
  /// CUDA, Separate layout: [qkv; z; b; a] (zero rows to a multiple of 8) and [gate; up] row-stacked, the named tensors
  /// views of them (pack_rows): one GEMM each where a decode step ran four and two.
  torch::Tensor in_pack, mlp_pack;
};

class QwenHybrid final : public CausalLM {
 public:
  QwenHybrid(const nlohmann::json& c, const WeightSource& w, torch::Dtype dtype, torch::Device device,
             QwenLinearLayout layout, std::string model_type, std::string prefix, const std::string& origin)
      : layout_(layout), type_(std::move(model_type)), prefix_(std::move(prefix)), device_(device) {
    cfg_ = qwen_parse_config(c, origin, layout);
    rotary_ = RotaryEmbedding::from_config(c, cfg_.head_dim, origin, 0.25);
    const auto& m = cfg_;
    const auto cd = compute_dtype(dtype);
    const int64_t H = m.hidden, key_dim = m.hk * m.dk, value_dim = m.hv * m.dv;
    auto get = [&](const std::string& name, std::vector<int64_t> shape, torch::Dtype dt) {
      auto t = w.get(name, shape, dt, device);
      params_.emplace_back(name, t);
      return t;
    };
    embeddings_ = get(prefix_ + "embed_tokens.weight", {m.vocab, H}, dtype);
    for (int64_t i = 0; i < m.layers; ++i) {
      const std::string p = prefix_ + "layers." + std::to_string(i) + ".";
      QwenLayer l;
      l.full = m.full[i];
      l.input_norm = get(p + "input_layernorm.weight", {H}, dtype);
      if (l.full) {
        const std::string a = p + "self_attn.";
        const int64_t qrows = m.heads * m.head_dim * (m.output_gate ? 2 : 1), kv = m.kv_heads * m.head_dim;
        l.attn.q_proj = get(a + "q_proj.weight", {qrows, H}, dtype);
        l.attn.k_proj = get(a + "k_proj.weight", {kv, H}, dtype);
        l.attn.v_proj = get(a + "v_proj.weight", {kv, H}, dtype);
        l.attn.o_proj = get(a + "o_proj.weight", {H, m.heads * m.head_dim}, dtype);
        l.attn.q_norm = get(a + "q_norm.weight", {m.head_dim}, dtype);
        l.attn.k_norm = get(a + "k_norm.weight", {m.head_dim}, dtype);
        if (m.attention_bias) {
          l.attn.q_bias = get(a + "q_proj.bias", {qrows}, dtype);
          l.attn.k_bias = get(a + "k_proj.bias", {kv}, dtype);
          l.attn.v_bias = get(a + "v_proj.bias", {kv}, dtype);
          l.attn.o_bias = get(a + "o_proj.bias", {H}, dtype);
        }
      } else {
        const std::string a = p + "linear_attn.";
        if (layout_ == QwenLinearLayout::Separate) {
          l.qkv = get(a + "in_proj_qkv.weight", {2 * key_dim + value_dim, H}, dtype);
          l.z = get(a + "in_proj_z.weight", {value_dim, H}, dtype);
          l.b = get(a + "in_proj_b.weight", {m.hv, H}, dtype);
          l.a = get(a + "in_proj_a.weight", {m.hv, H}, dtype);
        } else {
          l.qkvz = get(a + "in_proj_qkvz.weight", {2 * key_dim + 2 * value_dim, H}, dtype);
          l.ba = get(a + "in_proj_ba.weight", {2 * m.hv, H}, dtype);
        }
        l.conv_w = get(a + "conv1d.weight", {2 * key_dim + value_dim, 1, m.conv}, dtype);
        l.dt_bias = get(a + "dt_bias", {m.hv}, cd);
        l.A_log = get(a + "A_log", {m.hv}, cd);
        l.norm = get(a + "norm.weight", {m.dv}, dtype);
        l.out_proj = get(a + "out_proj.weight", {H, value_dim}, dtype);
      }
      l.post_norm = get(p + "post_attention_layernorm.weight", {H}, dtype);
      l.gate_proj = get(p + "mlp.gate_proj.weight", {m.intermediate, H}, dtype);
      l.up_proj = get(p + "mlp.up_proj.weight", {m.intermediate, H}, dtype);
      l.down_proj = get(p + "mlp.down_proj.weight", {H, m.intermediate}, dtype);
      if (device.is_cuda()) {
        if (!l.full && layout_ == QwenLinearLayout::Separate) l.in_pack = pack_rows({&l.qkv, &l.z, &l.b, &l.a}, true, params_);
        l.mlp_pack = pack_rows({&l.gate_proj, &l.up_proj}, true, params_);
      }
      layers_.push_back(std::move(l));
    }
    norm_ = get(prefix_ + "norm.weight", {H}, dtype);
    lm_head_ = m.tie ? tied_output_head(w, embeddings_, prefix_ + "embed_tokens.weight")
                     : get("lm_head.weight", {m.vocab, H}, dtype);
  }

  ForwardResult forward(const torch::Tensor& input_ids, const ForwardOptions& opt) override {
    ForwardResult res;
    if (opt.capture_boundary) res.boundary.resize(layers_.size());
    enter_block(opt, -1);
    return run(embed_tokens(input_ids, embeddings_), nullptr, opt, std::move(res));
  }

  /// forward() continuing from the cache: linear-attention layers from their conv window and state, softmax layers
  /// over their KV cache, RoPE at positions cache.position … .
  ForwardResult forward_cached(const torch::Tensor& input_ids, DecodeCache& cache, const ForwardOptions& opt) override {
    begin_cached_forward(cache, input_ids, layers_.size());
    auto res = run(embed_tokens_cached(input_ids, embeddings_, cache), &cache, opt, ForwardResult());
    end_cached_forward(cache, input_ids.size(1));
    return res;
  }

  const std::string& model_type() const override { return type_; }
  int64_t vocab_size() const override { return cfg_.vocab; }


  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() override { return params_; }
  const torch::Tensor& output_head() const override { return lm_head_; }

 private:
  /// The decoder over the embeddings h: a whole sequence (cache null) or continuing from the cache. Each block's output
  /// is added to the residual stream together with the next norm (add_rms_norm_zero_centered: one launch on CUDA, the
  /// same sum and norm as h + y then the norm). Layer boundaries are captured for a whole sequence only.
  ForwardResult run(torch::Tensor h, DecodeCache* cache, const ForwardOptions& opt, ForwardResult res) const {
    if (opt.output_hidden_states) res.hidden_states.push_back(h);
    torch::Tensor cos, sin;
    AttentionStep step;  // decoding: shared by the softmax layers of this call (made by the first one)
    if (!cache) std::tie(cos, sin) = rotary_.cos_sin(h.size(1), 0, h.scalar_type(), h.device());
    const FullAttentionConfig ac{cfg_.heads, cfg_.kv_heads, cfg_.head_dim, cfg_.eps, cfg_.output_gate};
    torch::Tensor delta, x;  // the last block's output, not yet added
    for (size_t i = 0; i < layers_.size(); ++i) {
      if (!cache) enter_block(opt, static_cast<int64_t>(i));
      const auto& l = layers_[i];
      std::tie(h, x) = add_rms_norm_zero_centered(h, delta, l.input_norm, cfg_.eps);
      if (opt.output_hidden_states && i > 0) res.hidden_states.push_back(h);  // after layers 0 … L−2
      torch::Tensor y;
      if (l.full) {
        if (cache && !step.positions.defined())
          step = attention_step(*cache, h.size(1), rotary_, h.scalar_type(), h.device());
        y = cache ? full_attention_cached(x, l.attn, ac, rotary_, step, *cache, cache->layers[i])
                  : full_attention(x, l.attn, ac, rotary_, cos, sin);
      } else {
        y = linear_mixer(x, l, opt.mode, opt.capture_boundary && !cache ? &res.boundary[i] : nullptr,
                         cache ? &cache->layers[i] : nullptr);
        if (!cache) hand_over_boundary(opt, res, i);
      }
      std::tie(h, x) = add_rms_norm_zero_centered(h, y, l.post_norm, cfg_.eps);
      delta = use_packed(l.mlp_pack) ? gated_mlp_packed(x, l.mlp_pack, l.down_proj)
                                 : gated_mlp(x, l.gate_proj, l.up_proj, l.down_proj);
    }
    if (!opt.logits && !cache) return res;
    if (!cache) enter_block(opt, static_cast<int64_t>(layers_.size()));
    const auto hn = add_rms_norm_zero_centered(h, delta, norm_, cfg_.eps).second;
    if (opt.output_hidden_states) res.hidden_states.push_back(hn);  // transformers records the normed last state
    if (cache || opt.head)
      res.logits = statecut::linear(last_position_if(hn, cache && opt.last_logits), lm_head_).to(torch::kFloat32);
    return res;
  }

  /// cache: null for a whole-sequence forward; else the layer's decode state, read and updated.
  torch::Tensor linear_mixer(const torch::Tensor& x, const QwenLayer& l, RecurrenceMode mode, LayerBoundary* bd,
                             LayerDecodeState* cache) const {
    const auto& m = cfg_;
    const int64_t Bsz = x.size(0), T = x.size(1), key_dim = m.hk * m.dk, value_dim = m.hv * m.dv, r = m.hv / m.hk;
    torch::Tensor mixed, z, b, a;
    if (use_packed(l.in_pack)) {  // pack_rows' order: qkv, z, b, a
      const auto y = statecut::linear(x, l.in_pack);
      const int64_t C = l.qkv.size(0);
      mixed = y.narrow(-1, 0, C);
      z = y.narrow(-1, C, value_dim).view({Bsz, T, m.hv, m.dv});
      b = y.narrow(-1, C + value_dim, m.hv);
      a = y.narrow(-1, C + value_dim + m.hv, m.hv);
    } else if (layout_ == QwenLinearLayout::Separate) {
      mixed = statecut::linear(x, l.qkv);
      z = statecut::linear(x, l.z).view({Bsz, T, m.hv, m.dv});
      b = statecut::linear(x, l.b);
      a = statecut::linear(x, l.a);
    } else {
      auto qkvz = statecut::linear(x, l.qkvz).view({Bsz, T, m.hk, 2 * m.dk + 2 * r * m.dv});
      auto q = qkvz.narrow(3, 0, m.dk).reshape({Bsz, T, key_dim});
      auto k = qkvz.narrow(3, m.dk, m.dk).reshape({Bsz, T, key_dim});
      auto v = qkvz.narrow(3, 2 * m.dk, r * m.dv).reshape({Bsz, T, value_dim});
      z = qkvz.narrow(3, 2 * m.dk + r * m.dv, r * m.dv).reshape({Bsz, T, m.hv, m.dv});
      auto ba = statecut::linear(x, l.ba).view({Bsz, T, m.hk, 2 * r});
      b = ba.narrow(3, 0, r).reshape({Bsz, T, m.hv});
      a = ba.narrow(3, r, r).reshape({Bsz, T, m.hv});
      mixed = torch::cat({q, k, v}, -1);
    }
    if (cache) cache->conv.resize(1);
    mixed = cache ? causal_conv1d_step(mixed, l.conv_w, torch::Tensor(), /*silu=*/true, cache->conv[0])
                  : causal_conv1d(mixed, l.conv_w, torch::Tensor(), /*silu=*/true);
    auto q = mixed.narrow(2, 0, key_dim).reshape({Bsz, T, m.hk, m.dk});
    auto k = mixed.narrow(2, key_dim, key_dim).reshape({Bsz, T, m.hk, m.dk});
    auto v = mixed.narrow(2, 2 * key_dim, value_dim).reshape({Bsz, T, m.hv, m.dv});
    const double scale = 1.0 / std::sqrt(static_cast<double>(m.dk));
    torch::Tensor o;
    if (cache && x.is_cuda() && !bd) {
      // Decoding on CUDA: beta's sigmoid and the decay run in the kernel, which reads b and a in place (one token; a
      // prefill forms them with LibTorch, in delta_rule_cached_logits).
      const GateInputs raw{a, l.A_log, l.dt_bias};
      o = delta_rule_cached_logits(q, k, v, b, /*round_beta=*/false, &raw, scale, /*l2norm_qk=*/true, mode,
                                   cache->state);
    } else {
      const auto ct = compute_dtype(x.scalar_type());
      auto beta = torch::sigmoid(b.to(ct));
      auto g = gate_from_inputs({a.to(ct), l.A_log.to(ct), l.dt_bias.to(ct)});
      torch::Tensor state;
      o = cache ? delta_rule_cached(q, k, v, beta, g, scale, /*l2norm_qk=*/true, mode, cache->state)
                : delta_rule_forward(q, k, v, beta, g, scale, /*l2norm_qk=*/true, mode, bd ? &state : nullptr);
      if (bd) {
        bd->attn_in = x;
        bd->q = q;
        bd->k = k;
        bd->v = v;
        bd->beta = beta;
        bd->g = g;
        bd->final_state = state;
      }
    }
    o = qwen_gated_rms_norm(o.to(x.scalar_type()), z, l.norm, m.eps);
    return statecut::linear(o.reshape({Bsz, T, value_dim}), l.out_proj);
  }

  QwenConfig cfg_;
  QwenLinearLayout layout_;
  std::string type_, prefix_;
  torch::Device device_;
  RotaryEmbedding rotary_;
  torch::Tensor embeddings_, norm_, lm_head_;
  std::vector<QwenLayer> layers_;
  std::vector<std::pair<std::string, torch::Tensor>> params_;
};

std::string origin_of(const nlohmann::json& c) { return c.value(kConfigPathKey, std::string("config.json")); }

}  // namespace

std::vector<bool> qwen_full_attention_layers(const nlohmann::json& c, int64_t num_layers, const std::string& origin) {
  std::vector<bool> full;
  // null is absent (transformers' default layout); any other non-list is refused, as transformers' validation does
  if (c.contains("layer_types") && !c.at("layer_types").is_null() && !c.at("layer_types").is_array())
    config_error(origin, "'layer_types': expected a list of \"linear_attention\" / \"full_attention\", got " +
                             c.at("layer_types").dump());
  if (c.contains("layer_types") && c.at("layer_types").is_array()) {
    const auto& lt = c.at("layer_types");
    if (static_cast<int64_t>(lt.size()) != num_layers)
      config_error(origin, "'layer_types' has " + std::to_string(lt.size()) + " entries for " +
                             std::to_string(num_layers) + " layers");
    for (const auto& t : lt) {
      std::string s = t.is_string() ? t.get<std::string>() : t.dump();
      // transformers (>= 5.13) renames the legacy spellings on load (remap_legacy_layer_types)
      if (s == "mamba") s = "linear_attention";
      if (s == "attention") s = "full_attention";
      if (s != "linear_attention" && s != "full_attention")
        config_error(origin, "'layer_types': unknown layer type '" + s + "'");
      full.push_back(s == "full_attention");
    }
  } else {  // older configs: every full_attention_interval-th layer is softmax attention
    const int64_t every = cfg_integral(c, "full_attention_interval", 4, origin);
    if (every <= 0) config_error(origin, "'full_attention_interval' must be positive");
    for (int64_t i = 0; i < num_layers; ++i) full.push_back((i + 1) % every == 0);
  }
  return full;
}

std::unique_ptr<CausalLM> make_qwen_hybrid(const nlohmann::json& text_config, const WeightSource& w,
                                           torch::Dtype dtype, torch::Device device, QwenLinearLayout layout,
                                           const std::string& model_type, const std::string& prefix) {
  return std::make_unique<QwenHybrid>(text_config, w, dtype, device, layout, model_type, prefix,
                                      origin_of(text_config));
}

std::vector<PrunableLayer> qwen_prunable_layers(const nlohmann::json& c, QwenLinearLayout layout,
                                                const std::string& prefix, const std::string& origin) {
  const bool packed = layout == QwenLinearLayout::Packed;
  const int64_t n_layers = cfg_layer_count(c, origin);
  const int64_t Hk = cfg_int(c, "linear_num_key_heads", origin);
  const int64_t dk = cfg_int(c, "linear_key_head_dim", origin);
  int64_t group = 0;  // qwen3_next: rows per key head of in_proj_qkvz, [q (dk) | k (dk) | v (r·dv) | z (r·dv)]
  if (packed) {
    const int64_t Hv = cfg_int(c, "linear_num_value_heads", origin), dv = cfg_int(c, "linear_value_head_dim", origin);
    if (Hk <= 0 || Hv % Hk != 0)
      config_error(origin, "linear_num_value_heads must be a multiple of linear_num_key_heads");
    group = 2 * dk + 2 * (Hv / Hk) * dv;
  }
  const std::vector<bool> full = qwen_full_attention_layers(c, n_layers, origin);
  std::vector<PrunableLayer> out;
  for (int64_t i = 0; i < n_layers; ++i) {
    if (full[i]) continue;
    PrunableLayer L = prunable_layer_shape(i, Hk, dk, origin);
    const std::string p = prefix + "layers." + std::to_string(i) + ".linear_attn.";
    // The conv channels are [q | k | v] in both layouts (transformers concatenates before the conv).
    if (packed) {
      L.q_weight = L.k_weight = p + "in_proj_qkvz.weight";
      L.k_row_offset = dk;
      L.q_row_stride = L.k_row_stride = group;
    } else {
      L.q_weight = L.k_weight = p + "in_proj_qkv.weight";
      L.k_row_offset = Hk * dk;
    }
    L.q_conv = L.k_conv = p + "conv1d.weight";
    L.k_conv_offset = Hk * dk;
    out.push_back(L);
  }
  return out;
}

nlohmann::json qwen_pruned_config(const nlohmann::json& config, int new_dk, const std::string&) {
  nlohmann::json c = config;
  c["linear_key_head_dim"] = new_dk;
  return c;
}

namespace {
/// The text config of a nested "qwen3_5" config (the multimodal release), or fails naming the file.
const nlohmann::json& nested_text_config(const nlohmann::json& c, const std::string& origin) {
  if (!c.contains("text_config") || !c.at("text_config").is_object())
    config_error(origin, "model_type 'qwen3_5' needs a \"text_config\" object");
  return c.at("text_config");
}
}  // namespace

void register_hf_qwen3_5() {
  FamilySpec flat;
  flat.model_type = "qwen3_5_text";
  flat.build = [](const nlohmann::json& c, const WeightSource& w, torch::Dtype dt, torch::Device dev) {
    return make_qwen_hybrid(c, w, dt, dev, QwenLinearLayout::Separate, "qwen3_5_text", "model.");
  };
  flat.prunable_layers = [](const nlohmann::json& c, const std::string& origin) {
    return qwen_prunable_layers(c, QwenLinearLayout::Separate, "model.", origin);
  };
  flat.pruned_config = qwen_pruned_config;
  flat.caps = {/*delta_rule=*/true, /*gated=*/true};
  register_family(flat);

  // The multimodal release nests the text model: config "text_config", tensors under model.language_model.
  FamilySpec nested = flat;
  nested.model_type = "qwen3_5";
  nested.build = [](const nlohmann::json& c, const WeightSource& w, torch::Dtype dt, torch::Device dev) {
    const std::string origin = origin_of(c);
    nlohmann::json text = nested_text_config(c, origin);
    text[kConfigPathKey] = origin + " (text_config)";
    // Which level ties the head: transformers 5 reads the composite config's tie_word_embeddings, 4.x the text
    // config's. One written level decides; two that disagree leave the output head ambiguous and are refused.
    const nlohmann::json* top = c.contains("tie_word_embeddings") ? &c.at("tie_word_embeddings") : nullptr;
    if (top && text.contains("tie_word_embeddings") && *top != text.at("tie_word_embeddings"))
      config_error(origin, "'tie_word_embeddings' is " + top->dump() + " but text_config's is " +
                               text.at("tie_word_embeddings").dump() + ": which output head is meant is ambiguous");
    if (top) text["tie_word_embeddings"] = *top;
    return make_qwen_hybrid(text, w, dt, dev, QwenLinearLayout::Separate, "qwen3_5", "model.language_model.");
  };
  nested.prunable_layers = [](const nlohmann::json& c, const std::string& origin) {
    return qwen_prunable_layers(nested_text_config(c, origin), QwenLinearLayout::Separate, "model.language_model.",
                                origin + " (text_config)");
  };
  nested.pruned_config = [](const nlohmann::json& config, int new_dk, const std::string& origin) {
    nlohmann::json c = config;
    c["text_config"] = qwen_pruned_config(nested_text_config(c, origin), new_dk, origin);
    return c;
  };
  register_family(std::move(nested));
}

}  // namespace statecut
