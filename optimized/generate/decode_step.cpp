// The greedy decode step, eager or replayed from a CUDA graph (decode_step.h).
#include "optimized/generate/decode_step.h"

#include <torch/version.h>

#include <algorithm>

#if defined(STATECUT_WITH_CUDA_KERNELS) && (TORCH_VERSION_MAJOR > 1 || TORCH_VERSION_MINOR >= 10)
#define STATECUT_CUDA_GRAPHS 1
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace statecut {

struct GreedyStepper::Graph {
#ifdef STATECUT_CUDA_GRAPHS
  at::cuda::CUDAGraph graph;
#endif
};

/// Ids on their way to the host: a pinned copy and the event after it (CUDA), or the copy itself (CPU).
struct GreedyStepper::Posted {
  torch::Tensor host;
#ifdef STATECUT_CUDA_GRAPHS
  std::unique_ptr<at::cuda::CUDAEvent> done;
#endif
};

GreedyStepper::GreedyStepper(CausalLM& model, DecodeCache& cache, const torch::Tensor& first_ids, bool use_graph,
                             int64_t planned_steps, int warmup)
    : model_(model), cache_(cache), ids_(first_ids.to(torch::kInt64).contiguous().clone()) {
  TORCH_CHECK(ids_.dim() == 2 && ids_.size(1) == 1, "GreedyStepper: first_ids must be [B,1]");
  torch::NoGradGuard no_grad;
  // Room for the warm-up, the step run on the capture stream and the planned ones: no buffer moves after capture.
  reserve_kv(cache_, cache_.position + warmup + 1 + std::max<int64_t>(planned_steps, 0));
  for (int i = 0; i < warmup; ++i) eager_step();
#ifdef STATECUT_CUDA_GRAPHS
  if (use_graph && ids_.is_cuda()) {
    cache_.check_ids = false;  // no host synchronisation inside the captured step
    // A side stream: capture is not allowed on the legacy default stream.
    auto stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, ids_.device().index());
    stream.synchronize();
    c10::cuda::getCurrentCUDAStream(ids_.device().index()).synchronize();
    {
      c10::cuda::CUDAStreamGuard guard(stream);
      eager_step();  // one step on the capture stream (library handles, workspaces)
      stream.synchronize();
      graph_ = std::make_unique<Graph>();
      graph_->graph.capture_begin();
      graph_logits_ = model_.forward_cached(ids_, cache_).logits;
      ids_.copy_(graph_logits_.select(1, 0).argmax(-1).view({-1, 1}));
      graph_->graph.capture_end();
    }
    stream.synchronize();
    cache_.position -= 1;  // capture recorded the step without running it; step() counts each replay
  }
#else
  (void)use_graph;
#endif
  if (!graph_) eager_step();  // the step the capture path ran on its stream
}

GreedyStepper::~GreedyStepper() = default;

void GreedyStepper::post_ids() {
  Posted p;
#ifdef STATECUT_CUDA_GRAPHS
  if (ids_.is_cuda()) {
    p.host = torch::empty(ids_.sizes(), torch::TensorOptions().dtype(torch::kInt64).pinned_memory(true));
    p.host.copy_(ids_, /*non_blocking=*/true);  // on the current stream, after the step that wrote ids_
    p.done = std::make_unique<at::cuda::CUDAEvent>();
    p.done->record(c10::cuda::getCurrentCUDAStream(ids_.device().index()));
    posted_.push_back(std::move(p));
    return;
  }
#endif
  p.host = ids_.to(torch::kCPU).clone();
  posted_.push_back(std::move(p));
}

std::vector<int64_t> GreedyStepper::take_ids() {
  TORCH_CHECK(!posted_.empty(), "GreedyStepper::take_ids: nothing posted");
  Posted p = std::move(posted_.front());
  posted_.pop_front();
#ifdef STATECUT_CUDA_GRAPHS
  if (p.done) p.done->synchronize();
#endif
  const torch::Tensor h = p.host.reshape({-1}).contiguous();
  return std::vector<int64_t>(h.data_ptr<int64_t>(), h.data_ptr<int64_t>() + h.numel());
}

bool GreedyStepper::graphed() const { return graph_ != nullptr; }

void GreedyStepper::eager_step() {
  logits_ = model_.forward_cached(ids_, cache_).logits;
  ids_ = logits_.select(1, 0).argmax(-1).view({-1, 1}).contiguous();
}

void GreedyStepper::step() {
  torch::NoGradGuard no_grad;
#ifdef STATECUT_CUDA_GRAPHS
  if (graph_ && cache_.position + 1 > kv_room(cache_)) graph_.reset();  // past the reserved room: eager, buffers grow
  if (graph_) {
    graph_->graph.replay();
    cache_.position += 1;
    logits_ = graph_logits_;
    return;
  }
#endif
  eager_step();
}

void GreedyStepper::step(const torch::Tensor& next_ids) {
  TORCH_CHECK(next_ids.sizes() == ids_.sizes(), "GreedyStepper::step: next_ids must be [B,1] like ids()");
  ids_.copy_(next_ids);  // in place: the captured step reads this buffer
  step();
}

DecodeCache clone_cache(const DecodeCache& c) {
  return map_cache(c, c.batch, [](const torch::Tensor& t) { return t.clone(); });
}

}  // namespace statecut
