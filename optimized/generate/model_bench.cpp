// The model benchmark of `statecut bench` (model_bench.h).
#include "optimized/generate/model_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "optimized/generate/decode_step.h"
#include "optimized/models/decode_cache.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace statecut {

namespace {

using Clock = std::chrono::steady_clock;

void sync(torch::Device d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
}

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void reset_peak(torch::Device d) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (d.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(d.index());
#else
  (void)d;
#endif
}

int64_t peak_bytes(torch::Device d) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (d.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(d.index());
    return stats.allocated_bytes[0].peak;  // [0] = StatType::AGGREGATE (the enum moved namespaces in LibTorch 2.x)
  }
#endif
  (void)d;
  return -1;
}

void release_cached(torch::Device d) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (d.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#else
  (void)d;
#endif
}

int64_t device_total_bytes(torch::Device d) {
#ifdef STATECUT_WITH_CUDA_KERNELS
  if (d.is_cuda()) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) return static_cast<int64_t>(total_b);
  }
#endif
  (void)d;
  return -1;
}

torch::Tensor random_ids(int64_t B, int64_t T, int64_t vocab, uint64_t seed, torch::Device d) {
  auto gen = at::detail::createCPUGenerator(seed);
  return torch::randint(vocab, {B, T}, gen, torch::TensorOptions().dtype(torch::kInt64)).to(d);
}

/// Weights one decode step reads: every parameter once (shared storage counted once), except an embedding table that
/// is not also the output head (a step looks up B of its rows; a tied table is the head and is read whole). The model
/// names its head (output_head): a tied one is no parameter of its own, so a name never told it (the tied table was
/// left out, and x_floor read ~20% high on a tied Mamba-2).
int64_t weight_bytes_per_step(CausalLM& model, int64_t* params, int64_t* all_bytes) {
  std::set<const void*> seen;
  int64_t bytes = 0, n = 0, all = 0;
  const void* head = model.output_head().defined() ? model.output_head().data_ptr() : nullptr;
  for (auto& [name, t] : model.named_parameters()) {
    if (!seen.insert(t.data_ptr()).second) continue;
    n += t.numel();
    all += t.numel() * static_cast<int64_t>(t.element_size());
    const bool lookup_only = name.find("embed") != std::string::npos && t.data_ptr() != head;
    if (!lookup_only) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  }
  *params = n;
  *all_bytes = all;
  return bytes;
}

std::string short_error(const std::exception& e) {
  std::string s = e.what();
  return s.substr(0, s.find('\n'));
}

}  // namespace

double copy_bandwidth(torch::Device device, int64_t bytes) {
  torch::NoGradGuard no_grad;
  auto a = torch::empty({bytes / 4}, torch::TensorOptions().dtype(torch::kFloat32).device(device)).fill_(1.0f);
  auto b = torch::empty_like(a);
  b.copy_(a);
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    sync(device);
    auto t0 = Clock::now();
    b.copy_(a);
    sync(device);
    best = std::min(best, seconds(t0));
  }
  return 2.0 * static_cast<double>(a.numel() * 4) / best;
}

ModelBenchResult bench_model(CausalLM& model, const BenchConfig& cfg,
                             const std::function<void(const std::string&)>& progress) {
  torch::NoGradGuard no_grad;
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  ModelBenchResult r;
  auto named = model.named_parameters();
  TORCH_CHECK(!named.empty(), "bench: the model has no parameters");
  const torch::Device dev = named.front().second.device();
  r.model_type = model.model_type();
  r.device = dev.str();
  r.dtype = std::string(c10::toString(named.front().second.scalar_type()));
  int64_t weight_bytes = 0;
  r.weight_bytes_per_step = weight_bytes_per_step(model, &r.parameters, &weight_bytes);
  const int64_t V = model.vocab_size();
  r.bandwidth_bytes_per_s = copy_bandwidth(dev, dev.is_cuda() ? (int64_t{1} << 30) : (int64_t{1} << 27));

  for (const auto& [B, T] : cfg.prefill) {
    PrefillFigure f;
    f.batch = B, f.tokens = T;
    try {
      auto ids = random_ids(B, T, V, cfg.seed, dev);
      {
        DecodeCache warm;
        model.forward_cached(ids, warm);
      }
      sync(dev);
      reset_peak(dev);
      double best = 1e30;
      for (int i = 0; i < std::max(1, cfg.repeats); ++i) {
        DecodeCache cache;
        sync(dev);
        auto t0 = Clock::now();
        auto logits = model.forward_cached(ids, cache).logits;
        sync(dev);
        best = std::min(best, seconds(t0));
        TORCH_CHECK(torch::isfinite(logits.select(1, -1)).all().item<bool>(), "prefill gave non-finite logits");
        if (r.state_bytes_per_seq == 0) {
          r.state_bytes_per_seq = cache.recurrent_bytes() / B;
          r.kv_bytes_per_token = cache.kv_bytes() / (B * T);
        }
      }
      f.seconds = best;
      f.tokens_per_s = static_cast<double>(B * T) / best;
      f.peak_bytes = peak_bytes(dev);
    } catch (const std::exception& e) {
      f.error = short_error(e);
    }
    release_cached(dev);
    say("prefill " + std::to_string(B) + "x" + std::to_string(T) +
        (f.error.empty() ? ": " + std::to_string(static_cast<int64_t>(f.tokens_per_s)) + " tokens/s" : ": " + f.error));
    r.prefill.push_back(f);
  }

  for (int64_t B : cfg.decode_batches) {
    DecodeFigure f;
    f.batch = B;
    f.steps = cfg.new_tokens;
    try {
      DecodeCache cache;
      const int64_t P = std::max<int64_t>(1, cfg.prompt);
      auto prompt = random_ids(B, P, V, cfg.seed + static_cast<uint64_t>(B), dev);
      // The prompt in pieces of at most 16384 tokens in all (a large batch would otherwise hold B·P of every
      // activation at once), each forming its last position's logits only; a cache continued piece by piece equals
      // one prefill (Equiv_Decode.chunkContinuationMatchesOneForward).
      const int64_t piece = std::max<int64_t>(1, 16384 / B);
      ForwardOptions last;
      last.last_logits = true;
      torch::Tensor logits;
      for (int64_t at = 0; at < P; at += piece)
        logits = model.forward_cached(prompt.narrow(1, at, std::min(piece, P - at)), cache, last).logits;
      if (r.state_bytes_per_seq == 0) {
        r.state_bytes_per_seq = cache.recurrent_bytes() / B;
        r.kv_bytes_per_token = cache.kv_bytes() / (B * cache.position);
      }
      auto first = logits.select(1, -1).argmax(-1).view({B, 1});
      logits = torch::Tensor();
      sync(dev);
      reset_peak(dev);
      GreedyStepper stepper(model, cache, first, cfg.cuda_graphs, cfg.new_tokens + 1);
      f.graphed = stepper.graphed();
      // Self-check: the step that is timed (replayed or eager) against an eager step from a copy of the same cache.
      {
        DecodeCache copy = clone_cache(cache);
        copy.check_ids = true;
        auto ids = stepper.ids().clone();
        auto ref = model.forward_cached(ids, copy).logits;
        stepper.step();
        auto got = stepper.logits();
        TORCH_CHECK(torch::isfinite(got).all().item<bool>(), "decode step gave non-finite logits");
        auto a = got.to(torch::kFloat64), b = ref.to(torch::kFloat64);
        f.check_rel_err = ((a - b).norm() / b.norm()).item<double>();
        TORCH_CHECK(f.check_rel_err < 1e-2, "decode self-check failed: the timed step differs from an eager step by ",
                    f.check_rel_err);
      }
      sync(dev);
      const int64_t kv_start = cache.position;  // the prompt, the stepper's warm-up and capture steps, the self-check
      auto t0 = Clock::now();
      for (int64_t i = 0; i < cfg.new_tokens; ++i) stepper.step();
      sync(dev);
      const double s = seconds(t0);
      f.ms_per_step = 1e3 * s / static_cast<double>(std::max<int64_t>(1, cfg.new_tokens));
      f.tokens_per_s = static_cast<double>(B * cfg.new_tokens) / s;
      f.peak_bytes = peak_bytes(dev);
      // The KV cache's mean filled length over the timed steps.
      const double kv_len = static_cast<double>(kv_start) + 0.5 * static_cast<double>(cfg.new_tokens);
      const double per_step = static_cast<double>(r.weight_bytes_per_step) +
                              2.0 * static_cast<double>(B) * static_cast<double>(r.state_bytes_per_seq) +
                              static_cast<double>(B) * static_cast<double>(r.kv_bytes_per_token) * kv_len;
      f.floor_ms = 1e3 * per_step / r.bandwidth_bytes_per_s;
    } catch (const std::exception& e) {
      f.error = short_error(e);
    }
    release_cached(dev);
    say("decode B=" + std::to_string(B) +
        (f.error.empty() ? ": " + std::to_string(f.ms_per_step) + " ms/step" + (f.graphed ? " (CUDA graph)" : "")
                         : ": " + f.error));
    r.decode.push_back(f);
  }

  // Largest batch: device memory minus the weights, over the bytes per sequence seen at the largest measured batch.
  const int64_t total = device_total_bytes(dev);
  const DecodeFigure* big = nullptr;
  for (const auto& f : r.decode)
    if (f.error.empty() && f.peak_bytes > 0 && (!big || f.batch > big->batch)) big = &f;
  if (total > 0 && big) {
    const double per_seq = static_cast<double>(big->peak_bytes - weight_bytes) / static_cast<double>(big->batch);
    if (per_seq > 0) r.max_batch_estimate = static_cast<int64_t>(static_cast<double>(total - weight_bytes) / per_seq);
  }
  return r;
}

}  // namespace statecut
