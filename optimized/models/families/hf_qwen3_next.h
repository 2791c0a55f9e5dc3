/// transformers' Qwen3NextForCausalLM (model_type "qwen3_next") with dense MLP layers: the hybrid model of
/// hf_qwen3_5.h in the packed layout (in_proj_qkvz / in_proj_ba interleaved per key head). Sparse-MoE layers
/// (num_experts > 0 outside mlp_only_layers) are rejected at load. Its q/k rows are interleaved per key head: each
/// prunable layer's q and k blocks have a row stride of the whole per-head group 2dk + 2r·dv (hf_qwen3_5.h).
#pragma once

namespace statecut {

/// Registers "qwen3_next".
void register_hf_qwen3_next();

}  // namespace statecut
