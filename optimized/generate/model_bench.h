/// `statecut bench`: what a checkpoint costs to run, measured on one device.
///   prefill   B×T random ids through forward_cached on an empty cache (the prompt pass that fills the state):
///             seconds (best of `repeats` after one warm-up), tokens/s = B·T / seconds.
///   decode    a P-token prompt prefilled (not timed), then `new_tokens` greedy steps (decode_step.h; a CUDA graph
///             replay per step on CUDA where possible): ms per step, tokens/s = B · steps / seconds.
///   memory    state bytes per sequence (recurrent states + conv windows; KV cache bytes per token for softmax layers),
///             peak device memory per measurement (CUDA caching allocator; CPU: not measured, -1).
///   floor     the bytes one step must move, weights read once (every parameter except an embedding table that is not
///             the output head: a step looks up only B of its rows, left out as ≤ B·hidden of a far larger W) plus
///             every sequence's state read and written plus, for softmax layers, every sequence's KV cache read once
///             (kv bytes per token κ times the mean filled length P̄ over the timed steps), over the copy bandwidth
///             measured in the same run: floor_ms(B) = (W + 2·B·s + B·κ·P̄) / bandwidth;
///             x_floor = ms_per_step / floor_ms.
/// Before timing, each decode batch checks itself: the replayed (or eager) step's logits against an eager step from
/// a copy of the same cache (relative error, `check_rel_err`) and finite logits.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "optimized/models/model.h"

namespace statecut {

struct BenchConfig {
  std::vector<std::pair<int64_t, int64_t>> prefill;  ///< (B, T)
  std::vector<int64_t> decode_batches;
  int64_t prompt = 512, new_tokens = 128;
  int repeats = 3;
  bool cuda_graphs = true;
  uint64_t seed = 42;
};

struct PrefillFigure {
  int64_t batch = 0, tokens = 0;
  double seconds = 0, tokens_per_s = 0;
  int64_t peak_bytes = -1;
  std::string error;  ///< non-empty: this size failed (e.g. out of memory), figures absent
};

struct DecodeFigure {
  int64_t batch = 0, steps = 0;
  double ms_per_step = 0, tokens_per_s = 0, floor_ms = -1, check_rel_err = -1;
  int64_t peak_bytes = -1;
  bool graphed = false;
  std::string error;
};

struct ModelBenchResult {
  std::string model_type, dtype, device;
  int64_t parameters = 0, weight_bytes_per_step = 0;
  int64_t state_bytes_per_seq = 0;     ///< recurrent states + conv windows, one sequence
  int64_t kv_bytes_per_token = 0;      ///< softmax layers' KV cache per sequence and token (0: none)
  double bandwidth_bytes_per_s = 0;    ///< measured copy bandwidth (2 × bytes / time of one large copy)
  int64_t max_batch_estimate = -1;     ///< CUDA: (device memory − weights) / bytes per sequence at the largest batch
  std::vector<PrefillFigure> prefill;
  std::vector<DecodeFigure> decode;
};

/// Runs the measurements of `cfg` on `model` (already on its device). progress(line) reports each figure as done.
ModelBenchResult bench_model(CausalLM& model, const BenchConfig& cfg,
                             const std::function<void(const std::string&)>& progress = {});

/// Copy bandwidth of `device` in bytes/s: one warm copy of a `bytes` buffer, 2·bytes per copy, best of 3.
double copy_bandwidth(torch::Device device, int64_t bytes);

}  // namespace statecut
