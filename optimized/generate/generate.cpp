// The decode loop (generate.h).
#include "optimized/generate/generate.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>

#include "optimized/generate/decode_step.h"
#include "optimized/io/option_error.h"
#include "optimized/models/decode_cache.h"

namespace statecut {

namespace {
/// 16,384 positions: 200 MB of KV buffers a sequence for the Qwen3.5-style 2.3B hybrid in bf16.
constexpr int64_t kMaxReservedSteps = 16384;

double generate_seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

GenerateResult generate(CausalLM& model, const torch::Tensor& prompt, const GenerateOptions& opt,
                        const std::function<void(int64_t, const std::vector<int64_t>&)>& on_token) {
  check_sampling(opt.sampling);
  if (opt.max_new_tokens < 0)
    throw OptionError("--max-new-tokens must be >= 0, got " + std::to_string(opt.max_new_tokens));
  if (prompt.dim() != 2 || prompt.size(1) < 1) throw std::invalid_argument("the prompt is empty: nothing to continue");
  torch::NoGradGuard no_grad;
  const int64_t B = prompt.size(0);
  GenerateResult res;
  res.prompt_tokens = prompt.size(1);
  res.tokens.assign(static_cast<size_t>(B), {});
  std::mt19937_64 rng(opt.seed);
  DecodeCache cache;
  ForwardOptions fo;
  fo.mode = opt.prefill_mode;
  fo.last_logits = true;  // only the last position picks the first token
  const auto device = model.named_parameters().front().second.device();
  auto t0 = std::chrono::steady_clock::now();
  const torch::Tensor ids = prompt.to(device, torch::kInt64);
  const int64_t T = ids.size(1), piece = opt.prefill_piece > 0 ? opt.prefill_piece : T;
  torch::Tensor logits;
  for (int64_t t = 0; t < T; t += piece)
    logits = model.forward_cached(ids.narrow(1, t, std::min(piece, T - t)), cache, fo).logits.select(1, -1);
  if (opt.max_new_tokens == 0) {  // the prompt alone: its prefill's time and the state it leaves, no token
    res.prefill_seconds = generate_seconds_since(t0);
    res.state_bytes = cache.bytes();
    return res;
  }
  std::vector<bool> stopped(static_cast<size_t>(B), false);
  std::unique_ptr<GreedyStepper> stepper;
  // Greedy: the stepper's argmax (on the device, in the captured step; the lowest id among equal maxima, as
  // sample_next) picks the ids, and the step after the one being read is already running. Sampling: each step waits
  // for the host's draw.
  const bool greedy = opt.sampling.temperature == 0;
  auto is_stop = [&](int64_t id) { return std::find(opt.stop_ids.begin(), opt.stop_ids.end(), id) != opt.stop_ids.end(); };
  auto to_ids = [&](const std::vector<int64_t>& ids) {  // [B, 1] on the model's device
    return torch::tensor(ids, torch::TensorOptions().dtype(torch::kInt64)).view({B, 1}).to(device);
  };
  auto next = sample_next(logits, opt.sampling, rng);  // refuses non-finite logits (after the prompt)
  for (int64_t i = 0;; ++i) {
    for (int64_t b = 0; b < B; ++b) {
      auto& row = res.tokens[static_cast<size_t>(b)];
      if (stopped[static_cast<size_t>(b)]) {  // a stopped row repeats its stop id (its steps run on, unread)
        next[static_cast<size_t>(b)] = row.back();
        continue;
      }
      row.push_back(next[static_cast<size_t>(b)]);
      if (is_stop(next[static_cast<size_t>(b)])) stopped[static_cast<size_t>(b)] = true;
    }
    if (i == 0) {
      res.prefill_seconds = generate_seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
    }
    if (on_token) on_token(i, next);
    if (i + 1 == opt.max_new_tokens || std::all_of(stopped.begin(), stopped.end(), [](bool s) { return s; })) break;
    if (!stepper) {  // the step feeding token 0: run by the stepper's construction (on CUDA it captures the next)
      const auto ids = to_ids(next);
      const auto t_setup = std::chrono::steady_clock::now();
      // KV room for the planned tokens, at most kMaxReservedSteps ahead (a softmax layer's buffers are reserved at
      // once; past the room the stepper drops its graph and the buffers grow as they need).
      const int64_t planned = std::min(opt.max_new_tokens, kMaxReservedSteps);
      stepper = std::make_unique<GreedyStepper>(model, cache, ids, opt.cuda_graphs, planned, /*warmup=*/0);
      res.setup_seconds = generate_seconds_since(t_setup);
      res.cuda_graph = stepper->graphed();
      ++res.steps;
      if (greedy) stepper->post_ids();  // token 1
    } else if (!greedy) {
      stepper->step(to_ids(next));
      ++res.steps;
    }
    if (greedy) {
      if (i + 2 < opt.max_new_tokens) {  // token i + 2 starts before token i + 1 is read
        stepper->step();
        stepper->post_ids();
        ++res.steps;
      }
      next = stepper->take_ids();
    } else {
      next = sample_next(stepper->logits().select(1, 0), opt.sampling, rng);
    }
  }
  // The greedy steps' ids come from the stepper's argmax on the device, unchecked: their last logits are (a
  // non-finite recurrent state stays non-finite), after the loop, outside the captured step.
  if (stepper) require_finite_logits(stepper->logits(), " at the last step");
  res.decode_seconds = generate_seconds_since(t0);
  res.state_bytes = cache.bytes();
  return res;
}

}  // namespace statecut
