/// Inputs and units of the row-kernel tests (fused_ops_cuda.cpp, mamba2_step_cuda.cpp): activations drawn in fp32 and
/// rounded to the activation type on the device, the unit roundoff their thresholds count in, f64 host copies for the
/// references.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace statecut::test {

/// Round to nearest: 2^-9 for bf16 (8 stored mantissa bits), 2^-12 for fp16 (11).
inline double unit_roundoff(torch::Dtype t) { return t == torch::kBFloat16 ? 0x1p-9 : 0x1p-12; }

/// N(0, scale²) values rounded to t on the CUDA device (torch's global generator: seed it per test).
inline torch::Tensor randn(std::vector<int64_t> shape, torch::Dtype t, double scale = 1.0) {
  return (torch::randn(shape, torch::dtype(torch::kFloat32)) * scale).to(torch::kCUDA, t);
}

inline torch::Tensor f64(const torch::Tensor& t) { return t.to(torch::kCPU, torch::kFloat64); }

}  // namespace statecut::test
