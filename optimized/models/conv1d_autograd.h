/// causal_conv1d (layers_common.h) under autograd on the fused CUDA kernels: the forward is fused_conv1d (no initial
/// state), the backward fused_conv1d_backward (kernels/binding/conv1d_backward_torch.h). Training's bf16 step took
/// LibTorch's fp32 copies and cuDNN's depthwise conv instead (issue 13: 8.7 ms forward + 12.5 ms backward per 1.3B
/// step on the H200). Gradients as that path's: dx one rounding of an fp32 sum, dw and db fp32 sums cast to the
/// parameters' dtype. Once differentiable: the backward is not recorded (no double backward).
#pragma once
#include <torch/torch.h>

namespace statecut {

#ifdef STATECUT_WITH_CUDA_KERNELS
/// x [B,T,C], weight [C,1,W], bias [C] or undefined: CUDA, one dtype (bf16/fp16), W <= cuda::kFusedConvMaxWidth.
torch::Tensor fused_causal_conv1d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                  bool silu);
#endif

}  // namespace statecut
