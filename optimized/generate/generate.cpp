// The decode loop (generate.h).
#include "optimized/generate/generate.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>

#include "optimized/generate/decode_step.h"
#include "optimized/models/decode_cache.h"

namespace statecut {

namespace {
double generate_seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

GenerateResult generate(CausalLM& model, const torch::Tensor& prompt, const GenerateOptions& opt,
                        const std::function<void(int64_t, const std::vector<int64_t>&)>& on_token) {
  check_sampling(opt.sampling);
  if (opt.max_new_tokens < 0)
    throw std::invalid_argument("--max-new-tokens must be >= 0, got " + std::to_string(opt.max_new_tokens));
  if (prompt.dim() != 2 || prompt.size(1) < 1) throw std::invalid_argument("the prompt is empty: nothing to continue");
  torch::NoGradGuard no_grad;
  const int64_t B = prompt.size(0);
  GenerateResult res;
  res.prompt_tokens = prompt.size(1);
  res.tokens.assign(static_cast<size_t>(B), {});
  if (opt.max_new_tokens == 0) return res;
  std::mt19937_64 rng(opt.seed);
  DecodeCache cache;
  ForwardOptions fo;
  fo.mode = opt.prefill_mode;
  const auto device = model.named_parameters().front().second.device();
  auto t0 = std::chrono::steady_clock::now();
  auto logits = model.forward_cached(prompt.to(device, torch::kInt64), cache, fo).logits.select(1, -1);
  std::vector<bool> stopped(static_cast<size_t>(B), false);
  std::unique_ptr<GreedyStepper> stepper;
  auto is_stop = [&](int64_t id) { return std::find(opt.stop_ids.begin(), opt.stop_ids.end(), id) != opt.stop_ids.end(); };
  for (int64_t i = 0; i < opt.max_new_tokens; ++i) {
    auto next = sample_next(logits, opt.sampling, rng);
    for (int64_t b = 0; b < B; ++b) {
      auto& row = res.tokens[static_cast<size_t>(b)];
      if (stopped[static_cast<size_t>(b)]) {
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
    auto ids = torch::tensor(next, torch::TensorOptions().dtype(torch::kInt64)).view({B, 1}).to(device);
    if (stepper) {
      stepper->step(ids);
    } else {  // the first step: the stepper's construction runs it (and on CUDA captures the next)
      stepper = std::make_unique<GreedyStepper>(model, cache, ids, opt.cuda_graphs, opt.max_new_tokens, /*warmup=*/0);
      res.cuda_graph = stepper->graphed();
    }
    logits = stepper->logits().select(1, 0);
    ++res.steps;
  }
  res.decode_seconds = generate_seconds_since(t0);
  res.state_bytes = cache.bytes();
  return res;
}

std::string decode_bytes(const std::vector<int64_t>& ids) {
  std::string out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id > 255) throw std::invalid_argument("token id " + std::to_string(id) + " is not a byte");
    out.push_back(static_cast<char>(static_cast<unsigned char>(id)));
  }
  return out;
}

}  // namespace statecut
