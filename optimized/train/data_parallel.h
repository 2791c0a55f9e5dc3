/// Data-parallel training over LibTorch's c10d: one process per device, gradients all-reduced, rank 0 writes.
///
/// Rank and world come from the torchrun environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and LOCAL_RANK,
/// which picks the CUDA device cuda:LOCAL_RANK). The rendezvous is a c10d TCPStore on MASTER_ADDR:MASTER_PORT hosted
/// by rank 0. Backend: Gloo for CPU tensors, NCCL for CUDA tensors (when LibTorch was built with it; else Gloo, which
/// also reduces CUDA tensors, through host copies).
/// The trainer reduces ONE flat buffer per step (every trained gradient concatenated, then divided by the world
/// size), so the result is the mean gradient over the global batch.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace statecut {

class DataParallel {
 public:
  virtual ~DataParallel() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Σ over ranks, in place (same shape and dtype on every rank).
  virtual void all_reduce_sum(torch::Tensor& t) = 0;
  virtual void barrier() = 0;
  /// "gloo" or "nccl".
  virtual std::string backend() const = 0;
};

/// The process group of the torchrun environment, or nullptr when WORLD_SIZE is unset or 1. `device` is the device the
/// gradients live on (cpu: Gloo; cuda: NCCL when available). Throws std::runtime_error naming the variable that is
/// missing or malformed, or a rendezvous that fails.
std::unique_ptr<DataParallel> data_parallel_from_env(const torch::Device& device);

/// The CUDA device of this process in a torchrun launch: cuda:LOCAL_RANK (cuda:0 without LOCAL_RANK).
torch::Device local_cuda_device();

}  // namespace statecut
