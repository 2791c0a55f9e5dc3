/// fla Gated DeltaNet (`model_type: gated_deltanet`), incl. grouped value heads (num_v_heads > num_heads).
/// The decoder and the layer are shared with DeltaNet (fla_delta_net.h); this file maps the config.
#pragma once

namespace statecut {

/// Registers `gated_deltanet`.
void register_fla_gated_deltanet();

}  // namespace statecut
