// fla Gated DeltaNet: config mapping (the decoder and the layer are shared, fla_delta_net.cpp).
#include "optimized/models/families/fla_gated_deltanet.h"

#include <cmath>

#include "optimized/models/families/fla_delta_net.h"
#include "optimized/models/layers_common.h"
#include "optimized/models/model_registry.h"

namespace statecut {

namespace {

std::unique_ptr<CausalLM> build_gated_deltanet(const nlohmann::json& c, const WeightSource& w, torch::Dtype dtype,
                                               torch::Device device) {
  const std::string origin = cfg_string(c, kConfigPathKey, "config.json", "config.json");
  FlaModelConfig m = parse_fla_decoder_config(c, origin);
  auto& L = m.layer;
  L.gated = true;
  L.use_beta = true;
  L.num_heads = cfg_int(c, "num_heads", kFlaGatedDeltaNetDefaultHeads, origin);
  L.num_v_heads = cfg_int(c, "num_v_heads", L.num_heads, origin);
  L.head_k_dim = cfg_int(c, "head_dim", kFlaGatedDeltaNetDefaultHeadDim, origin);
  const double expand_v = cfg_double(c, "expand_v", 2.0, origin);
  const double hv = static_cast<double>(L.head_k_dim) * expand_v;  // fla requires an integer head_v_dim
  L.head_v_dim = static_cast<int64_t>(std::llround(hv));
  if (std::fabs(hv - static_cast<double>(L.head_v_dim)) > 1e-5 * std::max(1.0, hv))
    throw io::Error(origin + ": head_dim·expand_v = " + std::to_string(hv) + " is not an integer");
  L.use_gate = cfg_bool(c, "use_gate", true, origin);
  if (L.num_heads <= 0 || L.head_k_dim <= 0 || L.head_v_dim <= 0 || L.num_v_heads <= 0)
    throw io::Error(origin + ": " + "num_heads, num_v_heads, head_dim and head_dim·expand_v must be positive");
  if (L.num_v_heads % L.num_heads)
    throw io::Error(origin + ": " + "num_v_heads = " + std::to_string(L.num_v_heads) + " is not a multiple of num_heads = " +
                           std::to_string(L.num_heads));
  return make_fla_causal_lm(m, w, dtype, device);
}

}  // namespace

void register_fla_gated_deltanet() {
  FamilySpec spec;
  spec.model_type = "gated_deltanet";
  spec.build = build_gated_deltanet;
  spec.prunable_layers = [](const nlohmann::json& c, const std::string& origin) {
    return fla_prunable_layers(c, cfg_int(c, "num_heads", kFlaGatedDeltaNetDefaultHeads, origin),
                               cfg_int(c, "head_dim", kFlaGatedDeltaNetDefaultHeadDim, origin), origin);
  };
  // head_dim = k' and expand_v = old dv / k', so that fla's head_v_dim = int(head_dim·expand_v) keeps dv (the
  // paper's code forgets expand_v and halves dv with dk).
  spec.pruned_config = [](const nlohmann::json& config, int new_dk, const std::string& origin) {
    nlohmann::json c = config;
    const int64_t hd = cfg_int(c, "head_dim", kFlaGatedDeltaNetDefaultHeadDim, origin);
    const auto dv = static_cast<int64_t>(static_cast<double>(hd) * cfg_double(c, "expand_v", 2.0, origin));
    const double e = factor_truncating_to(dv, new_dk, "expand_v (head_v_dim)", origin);
    c["head_dim"] = new_dk;
    c["expand_v"] = e;
    return c;
  };
  spec.caps = {/*delta_rule=*/true, /*gated=*/true};
  register_family(std::move(spec));
}

}  // namespace statecut
