// LibTorch binding of the skinny GEMM (skinny_gemm_torch.h).
#include "kernels/binding/skinny_gemm_torch.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>

#include "kernels/binding/fused_layer_ops_torch.h"
#include "kernels/device_env.h"
#include "kernels/skinny_gemm.h"

namespace statecut::cuda {

bool skinny_gemm_apply(const at::Tensor& x, const at::Tensor& w) {
  if (!row_gemm_operands(x, w, kSkinnyGemmMaxRows) || x.scalar_type() != at::kBFloat16) return false;
  const c10::cuda::CUDAGuard guard(x.device());
  return skinny_gemm_device_ok();
}

bool skinny_gemm_pays(const at::Tensor& x, const at::Tensor& w) {
  static const bool on = env_switch_on("STATECUT_SKINNY_GEMM");
  if (!on || !x.defined() || !w.defined() || w.dim() != 2 || w.size(1) == 0) return false;
  const int64_t M = x.numel() / w.size(1);
  return M >= 2 && M <= kSkinnyGemmPaysRows && skinny_gemm_apply(x, w);
}

bool skinny_silu_mul_pays(const at::Tensor& x, const at::Tensor& gate_up) {
  static const bool on = env_switch_on("STATECUT_SKINNY_SILU_MUL");
  return on && skinny_gemm_pays(x, gate_up) && gate_up.size(0) % 2 == 0;
}

namespace {

/// y [..., N] of x [..., K] and w: N = w's rows, or half of them with silu_mul.
at::Tensor run(const at::Tensor& x, const at::Tensor& w, bool silu_mul) {
  TORCH_CHECK(skinny_gemm_apply(x, w) && (!silu_mul || w.size(0) % 2 == 0),
              "statecut skinny gemm: unsupported inputs ", x.sizes(), " x ", w.sizes());
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t K = w.size(1), N = silu_mul ? w.size(0) / 2 : w.size(0), M = x.numel() / K;
  auto shape = x.sizes().vec();
  shape.back() = N;
  at::Tensor y = at::empty(shape, x.options());
  const auto f = silu_mul ? skinny_gemm_silu_mul_bf16 : skinny_gemm_bf16;
  check_launch(f(x.data_ptr(), w.data_ptr(), y.data_ptr(), static_cast<int>(M), static_cast<int>(N),
                 static_cast<int>(K), true, at::cuda::getCurrentCUDAStream(), 0),
               silu_mul ? "skinny_gemm_silu_mul" : "skinny_gemm");
  return y;
}

}  // namespace

at::Tensor skinny_gemm(const at::Tensor& x, const at::Tensor& w) { return run(x, w, false); }

at::Tensor skinny_gemm_silu_mul(const at::Tensor& x, const at::Tensor& gate_up) { return run(x, gate_up, true); }

}  // namespace statecut::cuda
