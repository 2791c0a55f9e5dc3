// transformers Mamba2ForCausalLM (math in hf_mamba2.h).
#include "optimized/models/families/hf_mamba2.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "optimized/io/safetensors.h"
#include "optimized/models/decode_cache.h"
#include "optimized/models/fused_ops.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/model_registry.h"
#include "optimized/models/recurrence.h"
#include "optimized/models/recurrence_cached.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include "kernels/binding/mamba2_step_torch.h"
#endif

namespace statecut {

torch::Tensor mamba2_ssm(const torch::Tensor& x, const torch::Tensor& Bm, const torch::Tensor& Cm,
                         const torch::Tensor& dt, const torch::Tensor& A, const torch::Tensor& D, RecurrenceMode mode,
                         torch::Tensor* final_state, torch::Tensor* log_decay, torch::Tensor* carried_state) {
  TORCH_CHECK(x.dim() == 4 && Bm.dim() == 4 && Cm.sizes() == Bm.sizes(), "mamba2_ssm: expected x [B,T,H,P], B, C [B,T,G,N]");
  TORCH_CHECK(x.size(2) % Bm.size(2) == 0, "mamba2_ssm: num_heads must be a multiple of n_groups");
  const auto ct = compute_dtype(x.scalar_type());
  auto dtf = dt.to(ct);
  auto g = dtf * A.to(ct);  // [B,T,H] log decay dt·A
  // value dt·x: C, B and x go as they are, dt as the value scale (bf16 on CUDA: the kernels scale x by dt in fp32
  // themselves, without their delta term)
  auto y = carried_state
               ? linear_attention_cached(Cm, Bm, x, g, /*scale=*/1.0, mode, *carried_state, /*value_scale=*/dtf)
               : linear_attention_forward(Cm, Bm, x, dtf, g, /*scale=*/1.0, torch::Tensor(), mode, final_state);
  if (log_decay) *log_decay = g;
  return y.to(ct) + x.to(ct) * D.to(ct).view({1, 1, -1, 1});
}

torch::Tensor mamba2_boundary_dt(CausalLM& model, int layer, const LayerBoundary& bd) {
  const std::string name = "backbone.layers." + std::to_string(layer) + ".mixer.A_log";
  for (const auto& [n, t] : model.named_parameters())
    if (n == name) {
      const auto A = -torch::exp(t.detach().to(bd.g.device(), torch::kFloat32));
      return bd.g.to(torch::kFloat32) / A.view({1, 1, -1});
    }
  throw std::runtime_error(name + ": not among the model's parameters (not a Mamba-2 model?)");
}

namespace {

/// transformers writes float('inf') into config.json as {"__float__": "Infinity"}; plain numbers and the strings
/// "inf"/"Infinity" are accepted too.
double json_float(const nlohmann::json& v, const std::string& origin, const std::string& key) {
  if (v.is_number()) return v.get<double>();
  const nlohmann::json* s = &v;
  if (v.is_object() && v.contains("__float__")) s = &v.at("__float__");
  if (s->is_string()) {
    const auto str = s->get<std::string>();
    if (str == "Infinity" || str == "inf" || str == "+inf") return std::numeric_limits<double>::infinity();
    if (str == "-Infinity" || str == "-inf") return -std::numeric_limits<double>::infinity();
  }
  config_error(origin, "'" + key + "': expected a number");
}

struct Mamba2Config {
  int64_t vocab = 0, hidden = 0, layers = 0, heads = 0, head_dim = 0, state = 0, groups = 1, conv = 4, inner = 0;
  double eps = 1e-5, dt_min = 0.0, dt_max = std::numeric_limits<double>::infinity();
  bool use_bias = false, conv_bias = true, residual_fp32 = true, tie = false;
  /// time_step_limit other than (0, inf): dt is clamped after the softplus (HF's default leaves it as it is).
  bool dt_clamped() const { return dt_min > 0.0 || std::isfinite(dt_max); }
};

Mamba2Config mamba2_parse_config(const nlohmann::json& c, const std::string& origin) {
  Mamba2Config m;
  m.vocab = cfg_int(c, "vocab_size", origin);
  m.hidden = cfg_int(c, "hidden_size", origin);
  m.layers = cfg_layer_count(c, origin);
  m.heads = cfg_int(c, "num_heads", origin);
  m.head_dim = cfg_int(c, "head_dim", origin);
  m.state = cfg_int(c, "state_size", origin);
  m.groups = cfg_int(c, "n_groups", kMamba2DefaultGroups, origin);
  m.conv = cfg_int(c, "conv_kernel", 4, origin);
  m.eps = cfg_norm_eps(c, "layer_norm_epsilon", 1e-5, origin);
  m.use_bias = cfg_bool(c, "use_bias", false, origin);
  m.conv_bias = cfg_bool(c, "use_conv_bias", true, origin);
  m.residual_fp32 = cfg_bool(c, "residual_in_fp32", true, origin);
  m.tie = cfg_bool(c, "tie_word_embeddings", false, origin);
  const double expand = cfg_double(c, "expand", 2.0, origin);
  m.inner = static_cast<int64_t>(expand * static_cast<double>(m.hidden));  // int(expand * hidden), like HF
  if (c.contains("time_step_limit") && !c.at("time_step_limit").is_null()) {
    const auto& lim = c.at("time_step_limit");
    if (!lim.is_array() || lim.size() != 2) config_error(origin, "'time_step_limit': expected [min, max]");
    m.dt_min = json_float(lim[0], origin, "time_step_limit");
    m.dt_max = json_float(lim[1], origin, "time_step_limit");
  }
  const std::string act = cfg_string(c, "hidden_act", "silu", origin);
  if (act != "silu" && act != "swish") config_error(origin, "'hidden_act': only silu is supported, got '" + act + "'");
  if (m.vocab <= 0 || m.hidden <= 0 || m.layers <= 0 || m.heads <= 0 || m.head_dim <= 0 || m.state <= 0 ||
      m.groups <= 0 || m.conv <= 0)
    config_error(origin, "vocab_size, hidden_size, num_hidden_layers, num_heads, head_dim, state_size, n_groups and "
                       "conv_kernel must be positive");
  if (m.heads * m.head_dim != m.inner)
    config_error(origin, "num_heads × head_dim = " + std::to_string(m.heads * m.head_dim) +
                           " differs from expand × hidden_size = " + std::to_string(m.inner));
  if (m.heads % m.groups != 0) config_error(origin, "num_heads must be a multiple of n_groups");
  // statecut chunks its own way, but transformers divides the sequence by chunk_size (default 256): a checkpoint that
  // cannot run there is refused here, not passed on
  if (cfg_int(c, "chunk_size", 256, origin) <= 0) config_error(origin, "'chunk_size' must be positive");
  return m;
}

/// transformers' Mamba2RMSNorm: normalise in fp32, cast back to the input dtype, then scale by w.
torch::Tensor hf_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  auto xf = x.to(compute_dtype(x.scalar_type()));
  auto n = xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps);
  return w * n.to(x.scalar_type());
}

/// transformers' MambaRMSNormGated: y·SiLU(z) in fp32, RMS over the whole last dim, cast back, then · w.
torch::Tensor hf_gated_norm_gate_first(const torch::Tensor& y, const torch::Tensor& z, const torch::Tensor& w,
                                       double eps) {
  const auto ct = compute_dtype(y.scalar_type());
  auto h = y.to(ct) * torch::silu(z.to(ct));
  h = h * torch::rsqrt(h.pow(2).mean(-1, true) + eps);
  return w * h.to(y.scalar_type());
}

/// The residual add and the next norm: (s, hf_rms_norm(s in w's dtype)) with s = res + delta in res's dtype (fp32
/// under residual_in_fp32: LibTorch's fp32 + bf16), s = res without delta. One kernel on CUDA (kernels/mamba2_step.h).
std::pair<torch::Tensor, torch::Tensor> residual_norm(const torch::Tensor& res, const torch::Tensor& delta,
                                                      const torch::Tensor& w, double eps) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (!needs_autograd({res, delta, w}) && fused_ops_usable({w, delta}) &&
      cuda::fused_mamba2_residual_norm_apply(res, delta, w))
    return cuda::fused_mamba2_residual_norm(res, delta, w, eps);
#endif
  auto s = delta.defined() ? res + delta : res;
  return {s, hf_rms_norm(s.to(w.scalar_type()), w, eps)};
}

/// The SSM output o [B,T,H,P] plus its D skip (o + x · D, in the compute dtype), then the gated norm with z: x [B,T,I]
/// (the conv output's x channels), z [B,T,I], D [H]. One kernel on CUDA (kernels/mamba2_step.h), in o's dtype; else
/// LibTorch in the compute dtype (mamba2_ssm's sum and hf_gated_norm_gate_first, the same operations).
torch::Tensor skip_gated_norm(const torch::Tensor& o, const torch::Tensor& x, const torch::Tensor& D,
                              const torch::Tensor& z, const torch::Tensor& w, double eps) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (!needs_autograd({o, x, z, w, D}) && fused_ops_usable({o, x, z, w}) &&
      cuda::fused_mamba2_gated_norm_apply(o, x, D, z, w))
    return cuda::fused_mamba2_gated_norm(o, x, D, o.size(-1), z, w, eps);
#endif
  const auto ct = compute_dtype(x.scalar_type());
  auto y = o.to(ct) + x.to(ct).reshape(o.sizes()) * D.to(ct).view({1, 1, -1, 1});
  return hf_gated_norm_gate_first(y.reshape(x.sizes()), z, w, eps);
}

struct Mamba2Layer {
  torch::Tensor norm, in_proj, in_bias, conv_w, conv_b, dt_bias, A_log, D, gated_norm, out_proj, out_bias;
};

class HfMamba2 final : public CausalLM {
 public:
  HfMamba2(const nlohmann::json& c, const WeightSource& w, torch::Dtype dtype, torch::Device device)
      : dtype_(dtype), device_(device) {
    const std::string origin = c.value(kConfigPathKey, std::string("config.json"));
    cfg_ = mamba2_parse_config(c, origin);
    const auto& m = cfg_;
    const auto cd = compute_dtype(dtype);
    const int64_t gn = m.groups * m.state, conv_dim = m.inner + 2 * gn, proj = m.inner + conv_dim + m.heads;
    auto get = [&](const std::string& name, std::vector<int64_t> shape, torch::Dtype dt) {
      auto t = w.get(name, shape, dt, device);
      params_.emplace_back(name, t);
      return t;
    };
    embeddings_ = get("backbone.embeddings.weight", {m.vocab, m.hidden}, dtype);
    for (int64_t i = 0; i < m.layers; ++i) {
      const std::string p = "backbone.layers." + std::to_string(i) + ".";
      const std::string x = p + "mixer.";
      Mamba2Layer l;
      l.norm = get(p + "norm.weight", {m.hidden}, dtype);
      l.in_proj = get(x + "in_proj.weight", {proj, m.hidden}, dtype);
      if (m.use_bias) l.in_bias = get(x + "in_proj.bias", {proj}, dtype);
      l.conv_w = get(x + "conv1d.weight", {conv_dim, 1, m.conv}, dtype);
      if (m.conv_bias) l.conv_b = get(x + "conv1d.bias", {conv_dim}, dtype);
      l.dt_bias = get(x + "dt_bias", {m.heads}, cd);
      l.A_log = get(x + "A_log", {m.heads}, cd);
      l.D = get(x + "D", {m.heads}, cd);
      l.gated_norm = get(x + "norm.weight", {m.inner}, dtype);
      l.out_proj = get(x + "out_proj.weight", {m.hidden, m.inner}, dtype);
      if (m.use_bias) l.out_bias = get(x + "out_proj.bias", {m.hidden}, dtype);
      layers_.push_back(std::move(l));
    }
    norm_f_ = get("backbone.norm_f.weight", {m.hidden}, dtype);
    lm_head_ = m.tie ? tied_output_head(w, embeddings_, "backbone.embeddings.weight")
                     : get("lm_head.weight", {m.vocab, m.hidden}, dtype);
  }

  ForwardResult forward(const torch::Tensor& input_ids, const ForwardOptions& opt) override {
    enter_block(opt, -1);
    auto h = embed_tokens(input_ids, embeddings_);
    ForwardResult res;
    if (opt.capture_boundary) res.boundary.resize(layers_.size());
    for (size_t i = 0; i < layers_.size(); ++i) {
      enter_block(opt, static_cast<int64_t>(i));
      const Mamba2Layer& l = layers_[i];
      auto x = hf_rms_norm(h.to(l.norm.scalar_type()), l.norm, cfg_.eps);
      auto residual = cfg_.residual_fp32 ? h.to(compute_dtype(h.scalar_type())) : h;
      h = residual + mixer(x, l, opt.mode, opt.capture_boundary ? &res.boundary[i] : nullptr, nullptr);
      hand_over_boundary(opt, res, i);
      if (opt.output_hidden_states) res.hidden_states.push_back(h);
    }
    if (!opt.logits) return res;
    enter_block(opt, static_cast<int64_t>(layers_.size()));
    auto hn = hf_rms_norm(h.to(norm_f_.scalar_type()), norm_f_, cfg_.eps);
    if (opt.output_hidden_states) res.hidden_states.push_back(hn);
    if (opt.head) res.logits = statecut::linear(hn.to(lm_head_.scalar_type()), lm_head_).to(torch::kFloat32);
    return res;
  }

  /// forward() with every block continuing from its cached conv window and SSM state.
  ForwardResult forward_cached(const torch::Tensor& input_ids, DecodeCache& cache, const ForwardOptions& opt) override {
    begin_cached_forward(cache, input_ids, layers_.size());
    auto h = embed_tokens_cached(input_ids, embeddings_, cache);
    ForwardResult res;
    // The residual stream `stream` and the last block's output `delta` travel to the next norm, which adds them
    // (residual_norm: one kernel with the norm on CUDA); forward()'s h after block i is stream + delta.
    torch::Tensor stream = cfg_.residual_fp32 ? h.to(compute_dtype(h.scalar_type())) : h, delta;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Mamba2Layer& l = layers_[i];
      torch::Tensor x;
      std::tie(stream, x) = residual_norm(stream, delta, l.norm, cfg_.eps);
      delta = mixer(x, l, opt.mode, nullptr, &cache.layers[i]);
      if (opt.output_hidden_states) res.hidden_states.push_back(stream + delta);
    }
    auto hn = residual_norm(stream, delta, norm_f_, cfg_.eps).second;
    if (opt.output_hidden_states) res.hidden_states.push_back(hn);
    res.logits =
        statecut::linear(last_position_if(hn, opt.last_logits).to(lm_head_.scalar_type()), lm_head_).to(torch::kFloat32);
    end_cached_forward(cache, input_ids.size(1));
    return res;
  }

  const std::string& model_type() const override { return type_; }
  int64_t vocab_size() const override { return cfg_.vocab; }


  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() override { return params_; }
  const torch::Tensor& output_head() const override { return lm_head_; }

 private:
  /// The block's mixer on its normalised input x (the residual add is the caller's): y W_outᵀ. cache: null for a
  /// whole-sequence forward; else the block's decode state, read and updated.
  torch::Tensor mixer(const torch::Tensor& x, const Mamba2Layer& l, RecurrenceMode mode, LayerBoundary* bd,
                      LayerDecodeState* cache) const {
    const auto& m = cfg_;
    const int64_t Bsz = x.size(0), T = x.size(1), gn = m.groups * m.state;
    auto proj = statecut::linear(x, l.in_proj);
    if (l.in_bias.defined()) proj = proj + l.in_bias;
    auto z = proj.narrow(2, 0, m.inner);
    auto xbc_in = proj.narrow(2, m.inner, m.inner + 2 * gn);
    if (cache) cache->conv.resize(1);
    auto xbc = cache ? causal_conv1d_step(xbc_in, l.conv_w, l.conv_b, /*silu=*/true, cache->conv[0])
                     : causal_conv1d(xbc_in, l.conv_w, l.conv_b, /*silu=*/true);
    auto dt_raw = proj.narrow(2, 2 * m.inner + 2 * gn, m.heads);
    auto xs = xbc.narrow(2, 0, m.inner).reshape({Bsz, T, m.heads, m.head_dim});
    auto Bm = xbc.narrow(2, m.inner, gn).reshape({Bsz, T, m.groups, m.state});
    auto Cm = xbc.narrow(2, m.inner + gn, gn).reshape({Bsz, T, m.groups, m.state});
    if (cache && !m.dt_clamped()) {
      // A decode step without a dt clamp: dt, its decay and the SSM in one kernel (one token on CUDA), then the D
      // skip and the gated norm in one (skip_gated_norm); the same operations as below otherwise.
      auto o = linear_attention_cached_dt(Cm, Bm, xs, GateInputs{dt_raw, l.A_log, l.dt_bias}, /*scale=*/1.0, mode,
                                          cache->state);
      auto yn = skip_gated_norm(o, xbc.narrow(2, 0, m.inner), l.D, z, l.gated_norm, m.eps);
      return out_projection(yn, l);
    }
    auto dt = torch::softplus(dt_raw.to(l.dt_bias.scalar_type()) + l.dt_bias);
    if (m.dt_clamped()) dt = torch::clamp(dt, m.dt_min, m.dt_max);
    auto A = -torch::exp(l.A_log);
    torch::Tensor state, g;
    auto y = mamba2_ssm(xs, Bm, Cm, dt, A, l.D, mode, bd ? &state : nullptr, bd ? &g : nullptr,
                        cache ? &cache->state : nullptr);
    if (bd) {
      bd->attn_in = x;
      bd->q = Cm;
      bd->k = Bm;
      bd->v = xs;
      bd->g = g;
      bd->final_state = state;
    }
    return out_projection(hf_gated_norm_gate_first(y.reshape({Bsz, T, m.inner}), z, l.gated_norm, m.eps), l);
  }

  static torch::Tensor out_projection(const torch::Tensor& yn, const Mamba2Layer& l) {
    auto out = statecut::linear(yn.to(l.out_proj.scalar_type()), l.out_proj);
    return l.out_bias.defined() ? out + l.out_bias : out;
  }

  Mamba2Config cfg_;
  torch::Dtype dtype_;
  torch::Device device_;
  std::string type_ = "mamba2";
  torch::Tensor embeddings_, norm_f_, lm_head_;
  std::vector<Mamba2Layer> layers_;
  std::vector<std::pair<std::string, torch::Tensor>> params_;
};

}  // namespace

void register_hf_mamba2() {
  FamilySpec spec;
  spec.model_type = "mamba2";
  spec.build = [](const nlohmann::json& c, const WeightSource& w, torch::Dtype dt,
                  torch::Device dev) -> std::unique_ptr<CausalLM> { return std::make_unique<HfMamba2>(c, w, dt, dev); };
  // Key = B, query = C, per group: in_proj rows [z (I) | x (I) | B (G·N) | C (G·N) | dt (H)], conv channels
  // [x | B | C], I = expand·hidden_size.
  spec.prunable_layers = [](const nlohmann::json& c, const std::string& origin) {
    const int64_t n_layers = cfg_layer_count(c, origin);
    const int64_t hidden = cfg_int(c, "hidden_size", origin);
    const auto I = static_cast<int64_t>(cfg_double(c, "expand", 2.0, origin) * static_cast<double>(hidden));
    const int64_t G = cfg_int(c, "n_groups", kMamba2DefaultGroups, origin);
    const int64_t N = cfg_int(c, "state_size", origin);
    std::vector<PrunableLayer> out;
    for (int64_t i = 0; i < n_layers; ++i) {
      PrunableLayer L = prunable_layer_shape(i, G, N, origin);
      const std::string p = "backbone.layers." + std::to_string(i) + ".mixer.";
      L.q_weight = L.k_weight = p + "in_proj.weight";
      L.k_row_offset = 2 * I;
      L.q_row_offset = 2 * I + G * N;
      L.q_conv = L.k_conv = p + "conv1d.weight";
      L.k_conv_offset = I;
      L.q_conv_offset = I + G * N;
      out.push_back(L);
    }
    return out;
  };
  spec.pruned_config = [](const nlohmann::json& config, int new_dk, const std::string&) {
    nlohmann::json c = config;
    c["state_size"] = new_dk;
    return c;
  };
  spec.caps = {/*delta_rule=*/false, /*gated=*/true};
  register_family(std::move(spec));
}

}  // namespace statecut
