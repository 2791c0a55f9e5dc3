/// The state a CausalLM carries from one forward_cached() call to the next (incremental decoding), per block:
///   conv   the last W−1 INPUTS of each short convolution (what the next token's conv window reads), [B, W−1, C] in
///          the activation dtype; fla: q, k, v convs (3 entries); Mamba-2: the x|B|C conv; Qwen3.5: the q|k|v conv.
///          Zeros before the first token, so a prefill from an empty cache equals the zero-padded causal conv.
///   state  the recurrent state S [B, Hv, dk, dv], key-major, fp32 (f64 for f64 models), as LayerBoundary::final_state
///          (Mamba-2: [B, H, N, P]).
///   key, value   softmax-attention blocks (Qwen3.5 "full_attention"): every past position's k (after q/k norm and
///          RoPE) and v in a buffer of kv_capacity positions, [B, Hkv, kv_capacity, head_dim] in the activation dtype;
///          positions 0 … position−1 are filled, the rest are zeros that the attention masks out. The buffer grows
///          (reallocated and copied, to the next multiple of 64 at least twice as long) when a call needs more, and
///          reserve_kv() sizes it ahead, so a captured CUDA decode step keeps its addresses and shapes.
///   device_position   [1] int64 on the model's device = position, advanced by end_cached_forward inside the step: what
///          a replayed CUDA graph reads for RoPE, the KV slot and the mask (the host `position` is the captured value).
/// Per sequence the recurrent blocks hold a constant number of bytes (state + conv); only softmax blocks grow with T.
///
///   causal_conv1d_step(x, w, b, silu, conv):   y = causal_conv1d(cat(conv, x)) restricted to x's positions, and conv
///   ← the last W−1 rows of cat(conv, x) — written IN PLACE when conv already has its shape (so a captured CUDA graph
///   replays into the same memory).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace statecut {

struct LayerDecodeState {
  std::vector<torch::Tensor> conv;  ///< per short conv: [B, W−1, C] (empty: the block has no short conv)
  torch::Tensor state;              ///< [B, Hv, dk, dv] fp32/f64 (undefined for softmax blocks)
  torch::Tensor key, value;         ///< [B, Hkv, T_past, hd] (softmax blocks only)
};

struct DecodeCache {
  int64_t batch = 0;     ///< B, fixed by the first call
  int64_t position = 0;  ///< tokens consumed so far = the next token's position (RoPE offset)
  /// false: the model skips every host synchronisation in forward_cached (token ids are not range-checked), so one
  /// decode step can be captured into a CUDA graph. The caller then guarantees ids in [0, vocab).
  bool check_ids = true;
  std::vector<LayerDecodeState> layers;  ///< one per block, filled by the first forward_cached()
  int64_t kv_capacity = 0;               ///< positions the KV buffers hold (before their allocation: the size to take)
  torch::Tensor device_position;         ///< [1] int64 = position, on the device (softmax blocks only; see above)

  bool empty() const { return position == 0; }
  void clear();
  /// Bytes of the constant-size part (recurrent states + conv windows) for the whole batch.
  int64_t recurrent_bytes() const;
  /// Bytes of the filled part of the KV cache (softmax blocks: `position` positions) for the whole batch.
  int64_t kv_bytes() const;
  int64_t bytes() const { return recurrent_bytes() + kv_bytes(); }
};

/// A cache of `batch` sequences whose every defined tensor is f(the tensor of `c`) (a clone, a batch repeat, ...);
/// position and check_ids as in `c`. forward_cached updates a cache in place, so copies are made this way.
DecodeCache map_cache(const DecodeCache& c, int64_t batch, const std::function<torch::Tensor(const torch::Tensor&)>& f);

/// x [B,T,C] continuing the inputs held in `conv` ([B,W−1,C]; undefined or empty vector entry: zeros, allocated here
/// in x's dtype); weight [C,1,W], bias [C] or undefined. Returns y [B,T,C] as causal_conv1d (layers_common.h) of the
/// whole sequence would at these positions, in x's dtype. T = 1 uses the dot product over the window (no conv call).
torch::Tensor causal_conv1d_step(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                 bool silu, torch::Tensor& conv);

/// `dst` ← src: in place when dst is defined with src's shape, dtype and device (CUDA-graph friendly), else dst = src.
void assign_state(torch::Tensor& dst, const torch::Tensor& src);

/// The layer's entry, growing cache.layers to `num_layers` on first use; checks the batch size against the cache's.
LayerDecodeState& layer_state(DecodeCache& cache, size_t layer, size_t num_layers);

/// embed_tokens (layers_common.h), or without its id range check (a host synchronisation) when !cache.check_ids.
torch::Tensor embed_tokens_cached(const torch::Tensor& input_ids, const torch::Tensor& embeddings,
                                  const DecodeCache& cache);

/// Checks input_ids [B,T] against the cache (B fixed after the first call, T ≥ 1) and records B; throws one line.
void begin_cached_forward(DecodeCache& cache, const torch::Tensor& input_ids, size_t num_layers);
/// The end of every forward_cached: position += T, and device_position += T where it exists (recorded into a graph).
void end_cached_forward(DecodeCache& cache, int64_t T);

/// The positions position … position+T−1 as int64 [T] on `device`, computed from device_position (created from the
/// host position on first use), so a captured step reads the position of each replay.
torch::Tensor token_positions(DecodeCache& cache, int64_t T, torch::Device device);

/// Makes room for `positions` positions in total: every KV buffer already allocated that is shorter grows to exactly
/// that many (rounded up to 64; its filled part copied), and buffers allocated later take at least that many. No
/// effect on recurrent blocks.
void reserve_kv(DecodeCache& cache, int64_t positions);

/// Positions the KV buffers hold (the smallest over the softmax blocks); INT64_MAX when the model has none.
int64_t kv_room(const DecodeCache& cache);

/// layer.key / layer.value sized for positions 0 … needed−1 ([B, Hkv, ≥ needed, hd], `like`'s dtype and device): grown
/// as the header says when too short, keeping the first `filled` positions.
void ensure_kv_buffers(DecodeCache& cache, LayerDecodeState& layer, int64_t needed, int64_t filled,
                       const torch::Tensor& like_kv);

}  // namespace statecut
