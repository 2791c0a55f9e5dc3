/// LibTorch binding of Mamba-2's decode-step row kernels (kernels/mamba2_step.h: the math). T is the activation
/// dtype, bf16 or fp16; every tensor on one CUDA device:
///   fused_mamba2_residual_norm(res [..., D] fp32 or T contiguous, delta [..., D] T or undefined, w [D] T, eps)
///       -> (res + delta in res's dtype (res itself without delta), Mamba2RMSNorm(round_T(res + delta)) [..., D] T)
///   fused_mamba2_gated_norm(o [..., I] T contiguous, x [..., I] T rows, Dskip [I / P] fp32, P, z [..., I] T rows,
///       w [I] T, eps) -> MambaRMSNormGated(o + x · Dskip[head], z) [..., I] T
/// x and z may be strided slices of one packed output (fused_layer_ops_torch.h's rows). The *_apply functions tell
/// whether a call would be served.
#pragma once
#include <ATen/ATen.h>

#include <utility>

namespace statecut::cuda {

bool fused_mamba2_residual_norm_apply(const at::Tensor& res, const at::Tensor& delta, const at::Tensor& w);
std::pair<at::Tensor, at::Tensor> fused_mamba2_residual_norm(const at::Tensor& res, const at::Tensor& delta,
                                                             const at::Tensor& w, double eps);

bool fused_mamba2_gated_norm_apply(const at::Tensor& o, const at::Tensor& x, const at::Tensor& Dskip,
                                   const at::Tensor& z, const at::Tensor& w);
at::Tensor fused_mamba2_gated_norm(const at::Tensor& o, const at::Tensor& x, const at::Tensor& Dskip, int64_t P,
                                   const at::Tensor& z, const at::Tensor& w, double eps);

}  // namespace statecut::cuda
