/// fla Gated DeltaNet (`model_type: gated_deltanet`), incl. grouped value heads (num_v_heads > num_heads).
/// The decoder and the layer are shared with DeltaNet (fla_delta_net.h); this file maps the config.
#pragma once
#include <cstdint>

namespace statecut {

/// fla's GatedDeltaNetConfig defaults of num_heads and head_dim (also read by prunable_layers_from_config and
/// pruned_config).
inline constexpr int64_t kFlaGatedDeltaNetDefaultHeads = 6;
inline constexpr int64_t kFlaGatedDeltaNetDefaultHeadDim = 256;

/// Registers `gated_deltanet`.
void register_fla_gated_deltanet();

}  // namespace statecut
