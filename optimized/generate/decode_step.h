/// One greedy decode step of a whole model, repeated: ids [B,1] → forward_cached → argmax of the logits → ids.
/// On CUDA (builds with the kernels, LibTorch ≥ 1.10) the step is captured once into a CUDA graph and replayed, so a
/// step costs one graph launch instead of hundreds of kernel launches from the host (which dominate small batches).
/// Capture needs fixed shapes and addresses: every cache tensor is written in place (decode_cache.h), token ids are
/// not range-checked (argmax ids are in range), and the KV buffers of softmax layers (Qwen3.5) are reserved ahead for
/// the planned steps, the position read from device memory; a step past the reserved room drops the graph and goes on
/// eagerly (the buffers grow). Everything on CPU steps eagerly.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "optimized/models/model.h"

namespace statecut {

class GreedyStepper {
 public:
  /// cache: already prefilled (its tensors allocated); first_ids [B,1] int64 on the model's device. use_graph: capture
  /// when possible (graphed() says whether it did). planned_steps: how many step() calls the KV room is reserved for.
  /// Runs `warmup` greedy eager steps (they advance the cache), then one more eager step that consumes the current
  /// ids (on CUDA with a graph: on the capture stream, before capturing the step): afterwards logits() are that
  /// step's logits and ids() their argmax, on every device.
  GreedyStepper(CausalLM& model, DecodeCache& cache, const torch::Tensor& first_ids, bool use_graph,
                int64_t planned_steps = 256, int warmup = 2);
  ~GreedyStepper();
  GreedyStepper(const GreedyStepper&) = delete;
  GreedyStepper& operator=(const GreedyStepper&) = delete;

  /// One token for every row: feeds ids(); the step's logits [B,1,V] are logits() and their argmax the new ids().
  void step();
  /// One token for every row, feeding next_ids [B,1] instead of ids() (a sampler's choice: `statecut generate`).
  void step(const torch::Tensor& next_ids);
  /// Greedy decoding with a step in flight: post_ids() starts copying ids() to the host (on CUDA into pinned memory,
  /// queued behind the step just launched, without waiting) and take_ids() returns the oldest posted ids, waiting for
  /// that copy alone: the host reads step i's ids while step i+1 runs (`statecut generate`, greedy).
  void post_ids();
  std::vector<int64_t> take_ids();
  bool graphed() const;
  const torch::Tensor& ids() const { return ids_; }
  const torch::Tensor& logits() const { return logits_; }

 private:
  void eager_step();
  CausalLM& model_;
  DecodeCache& cache_;
  torch::Tensor ids_, logits_;
  torch::Tensor graph_logits_;  ///< the captured step's output buffer (rewritten by every replay)
  struct Graph;
  std::unique_ptr<Graph> graph_;
  struct Posted;
  std::deque<Posted> posted_;
};

/// A deep copy of a cache (every tensor cloned), e.g. to run the same step twice.
DecodeCache clone_cache(const DecodeCache& c);

}  // namespace statecut
