/// The decode loop of `statecut generate`: prefill the prompt into a DecodeCache (one forward_cached over it), then
/// one forward_cached step per new token, each token chosen from the previous position's logits (sampling.h).
///   ids_0 = pick(logits(prompt)[last]),  ids_i = pick(forward_cached(ids_{i−1})),  i < max_new_tokens
/// so N new tokens cost one prefill and N − 1 steps, run by a GreedyStepper (on CUDA replayed from one captured step,
/// the KV room of softmax layers reserved for max_new_tokens). Greedy: the stepper's own argmax picks ids_i (equal
/// to sample_next's greedy pick: the lowest id among equal maxima) and step i + 1 runs while the host reads ids_i;
/// sampling: each step is fed the host's draw. Greedy decoding therefore equals repeating "argmax of a full
/// forward over prompt + tokens so far" (tests/cli/generate_cli.cpp checks that on the shipped model).
/// Text: Tokenizer::decode (optimized/text/tokenizer.h) for every tokenizer, the byte-level one included, streamed by
/// TextStream (text_stream.h).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optimized/generate/sampling.h"
#include "optimized/models/model.h"

namespace statecut {

struct GenerateOptions {
  int64_t max_new_tokens = 64;
  SamplingOptions sampling;
  uint64_t seed = 42;                              ///< the sampler's std::mt19937_64 seed (unused when greedy)
  RecurrenceMode prefill_mode = RecurrenceMode::Chunk;
  std::vector<int64_t> stop_ids;                   ///< a row stops after emitting one of these (kept in its output)
  bool cuda_graphs = true;  ///< on CUDA, replay each step from a CUDA graph (GreedyStepper, fed the sampled ids)
  /// The prompt goes through in pieces of this many tokens, each continuing the cache the last left (0: at once):
  /// the prefill's activations are one piece's, not the whole prompt's (a 131k-token prompt held 3.5 GB on the
  /// shipped 7 MB model). A multiple of the chunk kernel's 64; the logits agree with one pass up to rounding.
  int64_t prefill_piece = 4096;
};

struct GenerateResult {
  std::vector<std::vector<int64_t>> tokens;  ///< per row, the new ids (≤ max_new_tokens)
  int64_t prompt_tokens = 0;                 ///< T of the prompt
  double prefill_seconds = 0.0;              ///< the prefill forward and the first pick
  double decode_seconds = 0.0;               ///< the steps after it (setup_seconds included)
  double setup_seconds = 0.0;                ///< the stepper's construction: the first step and, on CUDA, the capture
  int64_t steps = 0;  ///< steps run: new tokens − 1 when no row stopped early (greedy may have one more in flight)
  int64_t state_bytes = 0;                   ///< the cache at the end, whole batch (DecodeCache::bytes)
  bool cuda_graph = false;                   ///< the steps were replayed from a CUDA graph
};

/// prompt [B, T] int64 (T ≥ 1; on any device, moved to the model's). on_token(step, ids) is called with the B ids
/// picked at each step (ids of rows already stopped repeat their stop id). Throws one line on a bad option.
GenerateResult generate(CausalLM& model, const torch::Tensor& prompt, const GenerateOptions& opt,
                        const std::function<void(int64_t, const std::vector<int64_t>&)>& on_token = {});

}  // namespace statecut
