/// Inputs and units of the row-kernel tests (fused_ops_cuda.cpp, mamba2_step_cuda.cpp): activations drawn in fp32 and
/// rounded to the activation type on the device, the unit roundoff their thresholds count in, f64 host copies for the
/// references.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace statecut::test {

/// The unit roundoff of round to nearest: 2^-8 for bf16 (8 significant bits, 7 of them stored), 2^-11 for fp16 (11,
/// 10 stored). (Until 2026-12-05 this returned half of it, and the tests' thresholds were written as twice that.)
inline double unit_roundoff(torch::Dtype t) { return t == torch::kBFloat16 ? 0x1p-8 : 0x1p-11; }

/// N(0, scale²) values rounded to t on the CUDA device (torch's global generator: seed it per test).
inline torch::Tensor randn(std::vector<int64_t> shape, torch::Dtype t, double scale = 1.0) {
  return (torch::randn(shape, torch::dtype(torch::kFloat32)) * scale).to(torch::kCUDA, t);
}

inline torch::Tensor f64(const torch::Tensor& t) { return t.to(torch::kCPU, torch::kFloat64); }

}  // namespace statecut::test
