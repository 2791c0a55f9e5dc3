// statecut-profile-step: where a model's prefill and decode step spend device time, as a kernel developer asks it.
// Loads a checkpoint (bf16 on CUDA), runs one prefill of B×T random ids and `steps` eager decode steps once to warm
// up, then records the same again under LibTorch's Kineto profiler (CPU + CUDA activities) and writes the Chrome trace
// (open it in Perfetto; bench/profile_summary.py sums the kernels by name). Eager steps, not the CUDA graph: the graph
// replays the same kernels, and the profiler sees them one by one this way.
// usage: statecut-profile-step CHECKPOINT_DIR OUT_TRACE.json [B T STEPS]   (defaults 8 2048 16; decode batch = B)
// Built only with -DSTATECUT_PROFILE_TOOL=ON (the Kineto API is not a stable interface across LibTorch versions).
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <set>
#include <string>

#include "optimized/models/decode_cache.h"
#include "optimized/models/model_registry.h"

namespace {

void run(statecut::CausalLM& model, int64_t B, int64_t T, int64_t steps, torch::Device dev) {
  torch::NoGradGuard no_grad;
  auto ids = torch::randint(0, model.vocab_size(), {B, T}, torch::dtype(torch::kInt64).device(dev));
  statecut::DecodeCache cache;
  RECORD_FUNCTION("statecut_prefill", std::vector<c10::IValue>());
  auto logits = model.forward_cached(ids, cache).logits;
  auto next = logits.select(1, logits.size(1) - 1).argmax(-1).view({-1, 1});
  torch::cuda::synchronize();
  for (int64_t s = 0; s < steps; ++s) {
    RECORD_FUNCTION("statecut_decode_step", std::vector<c10::IValue>());
    logits = model.forward_cached(next, cache).logits;
    next = logits.select(1, 0).argmax(-1).view({-1, 1});
  }
  torch::cuda::synchronize();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: statecut-profile-step CHECKPOINT_DIR OUT_TRACE.json [B T STEPS]\n");
    return 2;
  }
  try {
    const int64_t B = argc > 3 ? std::atoll(argv[3]) : 8, T = argc > 4 ? std::atoll(argv[4]) : 2048,
                  steps = argc > 5 ? std::atoll(argv[5]) : 16;
    const torch::Device dev(torch::kCUDA);
    auto model = statecut::load_causal_lm(argv[1], torch::kBFloat16, dev);
    run(*model, B, T, steps, dev);  // warm-up: library handles, allocator, first-call costs
    namespace prof = torch::profiler::impl;
    const prof::ProfilerConfig cfg(prof::ProfilerState::KINETO);
    const std::set<prof::ActivityType> acts = {prof::ActivityType::CPU, prof::ActivityType::CUDA};
    torch::autograd::profiler::prepareProfiler(cfg, acts);
    torch::autograd::profiler::enableProfiler(cfg, acts);
    run(*model, B, T, steps, dev);
    auto result = torch::autograd::profiler::disableProfiler();
    result->save(argv[2]);
    std::printf("wrote %s: prefill %lldx%lld + %lld decode steps at batch %lld\n", argv[2], static_cast<long long>(B),
                static_cast<long long>(T), static_cast<long long>(steps), static_cast<long long>(B));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "statecut-profile-step: %s\n", e.what());
    return 1;
  }
  return 0;
}
