// fla Gated DeltaNet: config mapping (the decoder and the layer are shared, fla_delta_net.cpp).
#include "optimized/fla_gated_deltanet.h"

#include <cmath>

#include "optimized/fla_delta_net.h"
#include "optimized/layers_common.h"
#include "optimized/model_registry.h"

namespace statecut {

void register_fla_gated_deltanet() {
  register_model_family("gated_deltanet", [](const nlohmann::json& c, const WeightSource& w, torch::Dtype dtype,
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
  });
}

}  // namespace statecut
