// LibTorch binding of the causal conv's backward (conv1d_backward_torch.h).
#include "kernels/binding/conv1d_backward_torch.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/binding/fused_layer_ops_torch.h"
#include "kernels/conv1d_backward.h"

namespace statecut::cuda {
namespace {

bool same_kind(const at::Tensor& t, const at::Tensor& x) {
  return !t.defined() || (t.device() == x.device() && t.scalar_type() == x.scalar_type());
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_conv1d_backward(const at::Tensor& x, const at::Tensor& w,
                                                                     const at::Tensor& bias, bool silu,
                                                                     const at::Tensor& dy) {
  TORCH_CHECK(x.dim() == 3 && w.dim() == 3 && w.size(1) == 1 && w.size(0) == x.size(2),
              "statecut fused conv1d_backward: x [B,T,C] and weight [C,1,W] expected");
  TORCH_CHECK(dy.sizes() == x.sizes(), "statecut fused conv1d_backward: dy ", dy.sizes(), " != x ", x.sizes());
  TORCH_CHECK(x.is_cuda() && (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf) && same_kind(w, x) &&
                  same_kind(bias, x) && same_kind(dy, x),
              "statecut fused conv1d_backward: x, weight, bias, dy must be CUDA tensors of one dtype, bf16 or fp16");
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), W = w.size(2);
  TORCH_CHECK(W >= 1 && W <= kFusedConvMaxWidth, "statecut fused conv1d_backward: width ", W, " not in 1..",
              kFusedConvMaxWidth);
  TORCH_CHECK(!bias.defined() || bias.numel() == C, "statecut fused conv1d_backward: bias must have ", C, " elements");
  TORCH_CHECK(B * T <= 0x7fffffff && C <= 0x7fffffff, "statecut fused conv1d_backward: ", x.sizes(), " too large");
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xs = x.stride(2) == 1 ? x : x.contiguous();
  const at::Tensor dyc = dy.contiguous(), wc = w.contiguous();
  const at::Tensor bc = bias.defined() ? bias.contiguous() : bias;
  const auto f32 = x.options().dtype(at::kFloat);
  at::Tensor dx = at::empty({B, T, C}, x.options());
  at::Tensor dw = at::empty({C, 1, W}, f32);
  at::Tensor db = bias.defined() ? at::empty({C}, f32) : at::Tensor();
  const int Bi = static_cast<int>(B), Ti = static_cast<int>(T), Ci = static_cast<int>(C), Wi = static_cast<int>(W);
  at::Tensor ws = at::empty({conv1d_backward_workspace(Bi, Ti, Ci, Wi)}, f32);
  int64_t rows = 0;  // B·T: rows_arg reads x [B,T,C] as the forward's binding does (one or two stride levels)
  const cudaError_t e = conv1d_backward(
      elem_type(x), rows_arg(xs, rows), wc.data_ptr(),
      bc.defined() ? bc.data_ptr() : nullptr, dyc.data_ptr(), dx.data_ptr(), dw.data_ptr<float>(),
      db.defined() ? db.data_ptr<float>() : nullptr, ws.numel() > 0 ? ws.data_ptr<float>() : nullptr, Bi, Ti, Ci, Wi,
      silu, at::cuda::getCurrentCUDAStream());
  check_launch(e, "conv1d_backward");
  return {dx, dw, db};
}

}  // namespace statecut::cuda
