// statecut-profile-step: where a model's prefill and decode step spend device time, as a kernel developer asks it.
// Loads a checkpoint (bf16 on CUDA), runs one prefill of B×T random ids and `steps` eager decode steps once to warm
// up, then records the same again under LibTorch's Kineto profiler (CPU + CUDA activities) and writes the Chrome trace
// (open it in Perfetto; bench/profile_summary.py sums the kernels by name). Eager steps, not the CUDA graph: the graph
// replays the same kernels, and the profiler sees them one by one this way.
// usage: statecut-profile-step CHECKPOINT_DIR OUT_TRACE.json [B T STEPS]   (defaults 8 2048 16; decode batch = B)
//        statecut-profile-step --train STUDENT TEACHER TEXT OUT_TRACE.json [B T STEPS PRECISION]
//        (defaults 4 2048 3 bf16): `statecut finetune --device cuda` (LoRA + KD) for one step to warm up, then STEPS steps
//        under the profiler; the trainer marks each step "statecut_train_step" (profile_summary.py --within).
// Built only with -DSTATECUT_PROFILE_TOOL=ON (the Kineto API is not a stable interface across LibTorch versions).
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <set>
#include <string>

#include "optimized/io/remove_tree.h"
#include "optimized/models/decode_cache.h"
#include "optimized/models/model_registry.h"
#include "optimized/train/trainer.h"

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

/// finetune of STUDENT from TEACHER on TEXT into a scratch folder beside the trace (removed after).
void train(char** argv, int argc, int64_t steps, const std::string& out) {
  statecut::FinetuneOptions o;
  o.checkpoint = argv[2], o.teacher = argv[3], o.text = {argv[4]}, o.out = out;
  o.batch = argc > 6 ? std::atoll(argv[6]) : 4;
  o.seq_len = argc > 7 ? std::atoll(argv[7]) : 2048;
  o.steps = steps;
  o.device = "cuda";
  o.precision = argc > 9 && std::string(argv[9]) == "f32" ? statecut::TrainPrecision::Full
                                                          : statecut::TrainPrecision::Bf16;
  statecut::remove_tree(out);
  statecut::finetune(o);
  statecut::remove_tree(out);
}

/// Runs `body` once to warm up, then again under Kineto (CPU + CUDA activities, the operators' input shapes: which
/// copy of a training step is which; profile_summary.py --by-op --shapes), and saves the trace.
template <class F>
void profiled(const char* trace, F body) {
  body(false);
  namespace prof = torch::profiler::impl;
  const prof::ProfilerConfig cfg(prof::ProfilerState::KINETO, /*report_input_shapes=*/true);
  const std::set<prof::ActivityType> acts = {prof::ActivityType::CPU, prof::ActivityType::CUDA};
  torch::autograd::profiler::prepareProfiler(cfg, acts);
  torch::autograd::profiler::enableProfiler(cfg, acts);
  body(true);
  auto result = torch::autograd::profiler::disableProfiler();
  result->save(trace);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--train") {
    if (argc < 6) {
      std::fprintf(stderr, "usage: statecut-profile-step --train STUDENT TEACHER TEXT OUT_TRACE.json [B T STEPS PRECISION]\n");
      return 2;
    }
    try {
      const int64_t steps = argc > 8 ? std::atoll(argv[8]) : 3;
      const std::string scratch = std::string(argv[5]) + ".finetune";
      profiled(argv[5], [&](bool measured) { train(argv, argc, measured ? steps : 1, scratch); });
      std::printf("wrote %s: %lld finetune steps\n", argv[5], static_cast<long long>(steps));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "statecut-profile-step: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: statecut-profile-step CHECKPOINT_DIR OUT_TRACE.json [B T STEPS]\n");
    return 2;
  }
  try {
    const int64_t B = argc > 3 ? std::atoll(argv[3]) : 8, T = argc > 4 ? std::atoll(argv[4]) : 2048,
                  steps = argc > 5 ? std::atoll(argv[5]) : 16;
    const torch::Device dev(torch::kCUDA);
    auto model = statecut::load_causal_lm(argv[1], torch::kBFloat16, dev);
    // the first run warms up library handles, the allocator and first-call costs
    profiled(argv[2], [&](bool) { run(*model, B, T, steps, dev); });
    std::printf("wrote %s: prefill %lldx%lld + %lld decode steps at batch %lld\n", argv[2], static_cast<long long>(B),
                static_cast<long long>(T), static_cast<long long>(steps), static_cast<long long>(B));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "statecut-profile-step: %s\n", e.what());
    return 1;
  }
  return 0;
}
