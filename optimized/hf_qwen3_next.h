/// transformers' Qwen3NextForCausalLM (model_type "qwen3_next") with dense MLP layers: the hybrid model of
/// hf_qwen3_5.h in the packed layout (in_proj_qkvz / in_proj_ba interleaved per key head). Sparse-MoE layers
/// (num_experts > 0 outside mlp_only_layers) are rejected at load. Its q/k rows are interleaved per key head, which
/// PrunableLayer (one contiguous block) cannot describe, so prunable_layers() throws.
#pragma once

namespace statecut {

/// Registers "qwen3_next".
void register_hf_qwen3_next();

}  // namespace statecut
