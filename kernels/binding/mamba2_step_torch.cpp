// LibTorch binding of Mamba-2's decode-step row kernels (mamba2_step_torch.h).
#include "kernels/binding/mamba2_step_torch.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/binding/fused_layer_ops_torch.h"
#include "kernels/mamba2_step.h"

namespace statecut::cuda {

bool fused_mamba2_residual_norm_apply(const at::Tensor& res, const at::Tensor& delta, const at::Tensor& w) {
  if (!res.defined() || !w.defined() || !fused_layer_ops_apply({w, delta})) return false;
  const int64_t D = w.numel();
  if (res.device() != w.device() || !res.is_contiguous() || res.dim() < 1 || res.size(-1) != D || !w.is_contiguous())
    return false;
  if (res.scalar_type() != at::kFloat && res.scalar_type() != w.scalar_type()) return false;
  return !delta.defined() || (delta.is_contiguous() && delta.sizes() == res.sizes());
}

std::pair<at::Tensor, at::Tensor> fused_mamba2_residual_norm(const at::Tensor& res, const at::Tensor& delta,
                                                             const at::Tensor& w, double eps) {
  TORCH_CHECK(fused_mamba2_residual_norm_apply(res, delta, w), "statecut fused mamba2_residual_norm: unsupported "
              "inputs (res ", res.sizes(), " ", res.scalar_type(), ", w ", w.sizes(), ")");
  const c10::cuda::CUDAGuard guard(res.device());
  const int64_t D = w.numel(), rows = res.numel() / D;
  at::Tensor y = at::empty(res.sizes(), w.options());
  at::Tensor sum = delta.defined() ? at::empty(res.sizes(), res.options()) : res;
  check_launch(mamba2_residual_norm(elem_type(w), res.scalar_type() == at::kFloat, res.data_ptr(),
                                    delta.defined() ? delta.data_ptr() : nullptr, w.data_ptr(),
                                    delta.defined() ? sum.data_ptr() : nullptr, y.data_ptr(), rows,
                                    static_cast<int>(D), static_cast<float>(eps), at::cuda::getCurrentCUDAStream()),
               "mamba2_residual_norm");
  return {sum, y};
}

bool fused_mamba2_gated_norm_apply(const at::Tensor& o, const at::Tensor& x, const at::Tensor& Dskip,
                                   const at::Tensor& z, const at::Tensor& w) {
  if (!o.defined() || !x.defined() || !z.defined() || !w.defined() || !Dskip.defined()) return false;
  if (!fused_layer_ops_apply({o, x, z, w}) || !o.is_contiguous() || !w.is_contiguous()) return false;
  const int64_t I = w.numel();
  if (x.size(-1) != I || z.size(-1) != I || o.numel() != x.numel() || z.numel() != x.numel()) return false;
  return Dskip.device() == o.device() && Dskip.scalar_type() == at::kFloat && Dskip.is_contiguous() &&
         Dskip.numel() >= 1 && I % Dskip.numel() == 0;
}

at::Tensor fused_mamba2_gated_norm(const at::Tensor& o, const at::Tensor& x, const at::Tensor& Dskip, int64_t P,
                                   const at::Tensor& z, const at::Tensor& w, double eps) {
  TORCH_CHECK(fused_mamba2_gated_norm_apply(o, x, Dskip, z, w) && P * Dskip.numel() == w.numel(),
              "statecut fused mamba2_gated_norm: unsupported inputs (o ", o.sizes(), ", x ", x.sizes(), ", D ",
              Dskip.sizes(), ", P ", P, ")");
  const c10::cuda::CUDAGuard guard(o.device());
  int64_t rows = 0, zrows = 0;
  const RowsArg xa = rows_arg(x, rows), za = rows_arg(z, zrows);
  const int64_t I = w.numel();
  at::Tensor y = at::empty(x.sizes(), o.options());
  check_launch(mamba2_gated_norm(elem_type(o), o.data_ptr(), xa, Dskip.data_ptr<float>(), static_cast<int>(P), za,
                                 w.data_ptr(), y.data_ptr(), rows, static_cast<int>(I), static_cast<float>(eps),
                                 at::cuda::getCurrentCUDAStream()),
               "mamba2_gated_norm");
  return y;
}

}  // namespace statecut::cuda
