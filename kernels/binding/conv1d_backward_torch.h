/// LibTorch binding of the causal conv's backward (kernels/conv1d_backward.h has the math): the gradients of
/// y = fused_conv1d(x, w, bias, silu, no initial state) (fused_layer_ops_torch.h) given dy.
///   fused_conv1d_backward(x [B,T,C], w [C,1,W], bias [C] or undefined, silu, dy [B,T,C])
///     -> (dx [B,T,C] in x's dtype, dw [C,1,W] fp32, db [C] fp32 or undefined when bias is)
/// x, w, bias, dy: CUDA, one dtype (bf16 or fp16), W <= kFusedConvMaxWidth. x is read in place when its channels are
/// contiguous (rows of a packed projection output, as the forward reads them); dy is made contiguous. dw and db stay
/// fp32 (the caller casts to the parameters' dtype) and are bitwise reproducible: no atomics.
#pragma once
#include <ATen/ATen.h>

#include <tuple>

namespace statecut::cuda {

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_conv1d_backward(const at::Tensor& x, const at::Tensor& w,
                                                                     const at::Tensor& bias, bool silu,
                                                                     const at::Tensor& dy);

}  // namespace statecut::cuda
