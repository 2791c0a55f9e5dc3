// `config`: config.json carries exactly what fla / transformers need to rebuild the geometry the weights have,
// recomputed by each library's own rule (python int() truncation included):
//   fla delta_net        key_dim = int(hidden·expand_k), value_dim = int(hidden·expand_v), heads divide both
//   fla gated_deltanet   key_dim = num_heads·head_dim, head_v_dim = int(head_dim·expand_v), value_dim = num_v_heads·
//                        head_v_dim (a pruned config must raise expand_v so dv is kept: the paper code's bug)
//   HF mamba2            intermediate = int(expand·hidden), conv_dim = intermediate + 2·n_groups·state_size,
//                        in_proj rows = intermediate + conv_dim + num_heads
//   HF qwen3_5(_text)    in_proj_qkv rows = conv channels = 2·Hk·linear_key_head_dim + Hv·linear_value_head_dim
//   HF qwen3_next        in_proj_qkvz rows = Hk·(2·dk + 2·(Hv/Hk)·dv), conv channels = 2·Hk·dk + Hv·dv
#include <cmath>

#include "optimized/io/safetensors.h"
#include "optimized/models/families/fla_delta_net.h"
#include "optimized/models/families/fla_gated_deltanet.h"
#include "optimized/models/families/hf_mamba2.h"
#include "optimized/models/layers_common.h"
#include "optimized/verify/verify_checks.h"

namespace statecut::verify {
using nlohmann::json;

namespace {

/// One dimension the config implies for a tensor, and the rule that gives it.
struct Expect {
  std::string tensor;
  int64_t rows;      ///< expected size of dim 0
  std::string rule;  ///< how the library computes it from the config, with the numbers
  std::string fix;   ///< what the config should say instead, given the rows the weights have (may be empty)
};

std::string config_num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.10g", v);
  return b;
}

double get_double(const json& c, const char* key, double dflt, const std::string& origin) {
  return cfg_double(c, key, dflt, origin);
}

std::vector<Expect> fla_expectations(const Context& ctx, const json& c, std::vector<std::string>& notes) {
  const std::string& o = ctx.config_path;
  const bool gated = ctx.model_type == "gated_deltanet";
  const int64_t hidden = cfg_int(c, "hidden_size", o);
  const int64_t H = cfg_int(c, "num_heads", gated ? kFlaGatedDeltaNetDefaultHeads : kFlaDeltaNetDefaultHeads, o);
  std::vector<Expect> e;
  const auto v_rows = [&](int64_t i) { return ctx.weights->shape("model.layers." + std::to_string(i) + ".attn.v_proj.weight")[0]; };
  for (const auto& L : ctx.layers) {
    const std::string p = "model.layers." + std::to_string(L.layer) + ".attn.";
    const bool conv = ctx.weights->has(p + "q_conv1d.weight");
    if (!gated) {
      const double ek = get_double(c, "expand_k", 1.0, o), ev = get_double(c, "expand_v", 1.0, o);
      const auto key_dim = static_cast<int64_t>(static_cast<double>(hidden) * ek);
      const auto value_dim = static_cast<int64_t>(static_cast<double>(hidden) * ev);
      const int64_t have = ctx.weights->has(p + "q_proj.weight") ? ctx.weights->shape(p + "q_proj.weight")[0] : 0;
      const std::string rule = "fla: key_dim = int(hidden_size·expand_k) = int(" + std::to_string(hidden) + "·" +
                               config_num(ek) + ") = " + std::to_string(key_dim);
      const std::string fix = "expand_k = " + config_num(static_cast<double>(have) / hidden);
      for (const char* t : {"q_proj.weight", "k_proj.weight"}) e.push_back({p + t, key_dim, rule, fix});
      if (conv)
        for (const char* t : {"q_conv1d.weight", "k_conv1d.weight"}) e.push_back({p + t, key_dim, rule, fix});
      e.push_back({p + "v_proj.weight", value_dim,
                   "fla: value_dim = int(hidden_size·expand_v) = int(" + std::to_string(hidden) + "·" + config_num(ev) +
                       ") = " + std::to_string(value_dim),
                   "expand_v = " + config_num(static_cast<double>(v_rows(L.layer)) / hidden)});
      if (key_dim % H || value_dim % H)
        notes.push_back(o + ": key_dim " + std::to_string(key_dim) + " / value_dim " + std::to_string(value_dim) +
                        " not divisible by num_heads " + std::to_string(H));
    } else {
      const int64_t hd = cfg_int(c, "head_dim", kFlaGatedDeltaNetDefaultHeadDim, o);
      const int64_t Hv = cfg_int(c, "num_v_heads", H, o);
      const double ev = get_double(c, "expand_v", 2.0, o);
      const auto head_v = static_cast<int64_t>(static_cast<double>(hd) * ev);
      const int64_t key_dim = H * hd;
      const std::string krule = "fla: key_dim = num_heads·head_dim = " + std::to_string(H) + "·" + std::to_string(hd) +
                                " = " + std::to_string(key_dim);
      const int64_t have_k = ctx.weights->has(p + "q_proj.weight") ? ctx.weights->shape(p + "q_proj.weight")[0] : 0;
      const std::string kfix = "head_dim = " + std::to_string(have_k / std::max<int64_t>(H, 1));
      for (const char* t : {"q_proj.weight", "k_proj.weight"}) e.push_back({p + t, key_dim, krule, kfix});
      if (conv)
        for (const char* t : {"q_conv1d.weight", "k_conv1d.weight"}) e.push_back({p + t, key_dim, krule, kfix});
      const int64_t dv_have = v_rows(L.layer) / std::max<int64_t>(Hv, 1);
      const std::string vrule = "fla: head_v_dim = int(head_dim·expand_v) = int(" + std::to_string(hd) + "·" + config_num(ev) +
                                ") = " + std::to_string(head_v) + ", value_dim = num_v_heads·head_v_dim = " +
                                std::to_string(Hv * head_v);
      const std::string vfix = "expand_v = " + config_num(static_cast<double>(dv_have) / static_cast<double>(hd)) +
                               " (= dv " + std::to_string(dv_have) + " / head_dim " + std::to_string(hd) +
                               ", so that dv is kept)";
      e.push_back({p + "v_proj.weight", Hv * head_v, vrule, vfix});
      e.push_back({p + "o_norm.weight", head_v, vrule, vfix});
    }
  }
  return e;
}

std::vector<Expect> mamba2_expectations(const Context& ctx, const json& c) {
  const std::string& o = ctx.config_path;
  const int64_t hidden = cfg_int(c, "hidden_size", o);
  const double expand = get_double(c, "expand", 2.0, o);
  const auto inner = static_cast<int64_t>(expand * static_cast<double>(hidden));
  const int64_t G = cfg_int(c, "n_groups", kMamba2DefaultGroups, o), N = cfg_int(c, "state_size", o);
  const int64_t H = cfg_int(c, "num_heads", o), P = cfg_int(c, "head_dim", o);
  const int64_t conv_dim = inner + 2 * G * N;
  std::vector<Expect> e;
  for (const auto& L : ctx.layers) {
    const std::string p = "backbone.layers." + std::to_string(L.layer) + ".mixer.";
    const int64_t have = ctx.weights->has(p + "conv1d.weight") ? ctx.weights->shape(p + "conv1d.weight")[0] : 0;
    const std::string fix = "state_size = " + std::to_string((have - inner) / std::max<int64_t>(2 * G, 1));
    const std::string rule = "transformers: conv_dim = int(expand·hidden_size) + 2·n_groups·state_size = " +
                             std::to_string(inner) + " + 2·" + std::to_string(G) + "·" + std::to_string(N) + " = " +
                             std::to_string(conv_dim);
    e.push_back({p + "conv1d.weight", conv_dim, rule, fix});
    e.push_back({p + "in_proj.weight", inner + conv_dim + H, rule + ", in_proj rows = intermediate + conv_dim + num_heads", fix});
    e.push_back({p + "out_proj.weight", hidden, "out_proj rows = hidden_size", ""});
    if (H * P != inner)
      e.push_back({p + "norm.weight", H * P, "transformers: num_heads·head_dim must equal int(expand·hidden_size) = " +
                                                 std::to_string(inner), ""});
  }
  return e;
}

std::vector<Expect> qwen_expectations(const Context& ctx, const json& full) {
  const bool nested = ctx.model_type == "qwen3_5";
  const json& c = nested ? full.at("text_config") : full;
  const std::string o = ctx.config_path + (nested ? " (text_config)" : "");
  const int64_t Hk = cfg_int(c, "linear_num_key_heads", o), dk = cfg_int(c, "linear_key_head_dim", o);
  const int64_t Hv = cfg_int(c, "linear_num_value_heads", o), dv = cfg_int(c, "linear_value_head_dim", o);
  const int64_t conv = 2 * Hk * dk + Hv * dv;
  std::vector<Expect> e;
  for (const auto& L : ctx.layers) {
    const std::string& packed = L.q_weight;
    const int64_t conv_have = ctx.weights->has(L.q_conv) ? ctx.weights->shape(L.q_conv)[0] : 0;
    const std::string fix = "linear_key_head_dim = " + std::to_string((conv_have - Hv * dv) / std::max<int64_t>(2 * Hk, 1));
    const std::string rule = "transformers: conv_dim = 2·linear_num_key_heads·linear_key_head_dim + "
                             "linear_num_value_heads·linear_value_head_dim = 2·" + std::to_string(Hk) + "·" +
                             std::to_string(dk) + " + " + std::to_string(Hv) + "·" + std::to_string(dv) + " = " +
                             std::to_string(conv);
    e.push_back({L.q_conv, conv, rule, fix});
    if (ctx.model_type == "qwen3_next")
      e.push_back({packed, Hk * (2 * dk + 2 * (Hv / std::max<int64_t>(Hk, 1)) * dv),
                   "transformers: in_proj_qkvz rows = Hk·(2·dk + 2·(Hv/Hk)·dv)", fix});
    else
      e.push_back({packed, conv, rule + " = in_proj_qkv rows", fix});
  }
  return e;
}

}  // namespace

void check_config(Context& ctx, std::vector<CheckResult>& out) {
  if (!ctx.weights) {
    out.push_back(skipped("config", "the weights do not open: " + ctx.load_error));
    return;
  }
  if (ctx.layers.empty()) {
    out.push_back(skipped("config", ctx.no_layers_reason()));
    return;
  }
  CheckResult r;
  r.name = "config";
  r.relation = "==";
  r.threshold = 0;
  r.reason = "fla / transformers rebuild every layer from these fields; a field that disagrees with the weights "
             "makes the checkpoint unloadable there (or silently wrong)";
  std::vector<std::string> notes;
  std::vector<Expect> ex;
  if (ctx.model_type == "delta_net" || ctx.model_type == "gated_deltanet") ex = fla_expectations(ctx, ctx.config, notes);
  else if (ctx.model_type == "mamba2") ex = mamba2_expectations(ctx, ctx.config);
  else if (ctx.model_type.rfind("qwen3", 0) == 0) ex = qwen_expectations(ctx, ctx.config);
  else {
    out.push_back(skipped("config", "no library rule known for model_type '" + ctx.model_type + "'"));
    return;
  }
  std::vector<std::string> problems = notes;
  std::string first_fix;
  for (const auto& e : ex) {
    if (!ctx.weights->has(e.tensor)) {
      problems.push_back(e.tensor + ": missing (" + e.rule + ")");
      if (r.where.empty()) r.where = e.tensor;
      continue;
    }
    const int64_t have = ctx.weights->shape(e.tensor)[0];
    if (have == e.rows) continue;
    problems.push_back(ctx.config_path + ": " + e.tensor + " has " + std::to_string(have) + " rows but " + e.rule +
                       (e.fix.empty() ? "" : "; the weights need " + e.fix));
    if (r.where.empty()) r.where = e.tensor;
  }
  r.figure = static_cast<double>(problems.size());
  r.status = problems.empty() ? Status::Pass : Status::Fail;
  if (problems.empty()) {
    r.message = std::to_string(ex.size()) + " tensor shapes recomputed from config.json by the " +
                (ctx.model_type.rfind("qwen", 0) == 0 || ctx.model_type == "mamba2" ? "transformers" : "fla") +
                " rule all match";
  } else {
    r.message = first_problem(problems);
  }
  r.details["problems"] = problems;
  out.push_back(std::move(r));
}

}  // namespace statecut::verify
