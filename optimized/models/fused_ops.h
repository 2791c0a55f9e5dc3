/// When the LibTorch building blocks (layers_common.h, decode_cache.h's causal_conv1d_step) hand their work to the
/// fused CUDA step kernels (kernels/fused_layer_ops.h): the kernels are built (STATECUT_WITH_CUDA_KERNELS), every
/// defined tensor is a CUDA bf16/fp16 tensor of one dtype with a contiguous last dim, no tensor needs a gradient
/// (most kernels have no backward: training keeps the LibTorch operations; an op whose kernels have one asks
/// fused_ops_usable below), and the environment does not say STATECUT_FUSED=0 (the switch that lets `statecut bench`
/// measure both paths in one run). Same arithmetic in the same order; the two paths differ by fp32 reduction order
/// before the final rounding (tests/gpu/fused_ops_cuda.cpp).
#pragma once
#include <torch/torch.h>

#include <initializer_list>

namespace statecut {

bool fused_ops_apply(std::initializer_list<torch::Tensor> ts);

/// False when the environment sets `name` to "0": the switches (STATECUT_FUSED, STATECUT_DECODE_FOLD) that let one
/// benchmark call time both paths. Callers keep the answer in a static (read once).
bool env_switch_on(const char* name);

/// Every condition of fused_ops_apply but the gradient's: fused_ops_apply(ts) == !needs_autograd(ts) &&
/// fused_ops_usable(ts). For an op whose kernels have a backward (causal_conv1d: conv1d_autograd.h).
bool fused_ops_usable(std::initializer_list<torch::Tensor> ts);

/// Whether autograd records an operation on `ts`: grad mode is on and a defined tensor requires a gradient. Every
/// kernel without a backward (the fused ops but causal_conv1d's, the CUDA delta-rule kernels) is taken only when this
/// is false: the training forward stays on LibTorch operations there, whatever its dtype and device.
bool needs_autograd(std::initializer_list<torch::Tensor> ts);

/// silu(gate) · up in the activation dtype (gated_mlp's middle; gate and up may be halves of one packed output).
torch::Tensor silu_mul(const torch::Tensor& gate, const torch::Tensor& up);

}  // namespace statecut
