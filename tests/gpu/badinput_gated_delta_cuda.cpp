// Bad input to the CUDA gated delta rule binding: a one-line c10::Error naming the problem, never a launch.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <string>

#ifdef STATECUT_WITH_CUDA_KERNELS
#include "kernels/binding/gated_delta_torch.h"
#endif

namespace {

#ifdef STATECUT_WITH_CUDA_KERNELS
std::string error_of(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& s0,
                     const c10::optional<at::Tensor>& cu = c10::nullopt) {
  try {
    statecut::cuda::gated_delta_rule_chunk(q, k, v, c10::nullopt, c10::nullopt, 0.0, s0, true, cu, true, false,
                                           c10::nullopt, c10::nullopt, false, false);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}
#endif

TEST(BadInput_GatedDeltaCuda, rejectedWithReason) {
#ifndef STATECUT_WITH_CUDA_KERNELS
  GTEST_SKIP() << "built without the CUDA kernels (statecut_cuda_torch)";
#else
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto bf = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  const at::Tensor q = at::randn({1, 8, 2, 64}, bf), v = at::randn({1, 8, 2, 128}, bf);
  const at::Tensor s0 = at::zeros({1, 2, 64, 128}, bf.dtype(at::kFloat));
  EXPECT_NE(error_of(q.to(at::kFloat), q.to(at::kFloat), v.to(at::kFloat), s0).find("bf16 or all fp16"),
            std::string::npos);
  EXPECT_NE(error_of(q, q, v, at::zeros({1, 2, 128, 64}, s0.options())).find("initial_state must be"),
            std::string::npos);
  EXPECT_NE(error_of(at::randn({1, 8, 2, 300}, bf), at::randn({1, 8, 2, 300}, bf), v, at::Tensor()).find("key dim"),
            std::string::npos);
  EXPECT_NE(error_of(q, q, at::randn({1, 8, 2, 130}, bf), at::Tensor()).find("multiple of 4"), std::string::npos);
  EXPECT_NE(error_of(q, q, v, at::Tensor(), at::tensor({0, 3, 5}, at::kInt)).find("cu_seqlens must run"),
            std::string::npos);
  EXPECT_NE(error_of(q.cpu(), q.cpu(), v.cpu(), at::Tensor()).find("CUDA tensors"), std::string::npos);
#endif
}

}  // namespace
