/// Whether the GPU tests that go through the model families can run: built with the CUDA kernels
/// (STATECUT_WITH_CUDA_KERNELS, set by statecut_cuda_torch) and a device present. Each test skips itself otherwise.
#pragma once
#include <torch/cuda.h>

namespace statecut::test {

inline bool cuda_ready() {
#ifndef STATECUT_WITH_CUDA_KERNELS
  return false;
#else
  return torch::cuda::is_available();
#endif
}

}  // namespace statecut::test
