// causal_conv1d's autograd node on the fused CUDA kernels (conv1d_autograd.h).
#include "optimized/models/conv1d_autograd.h"

#ifdef STATECUT_WITH_CUDA_KERNELS
#include "kernels/binding/conv1d_backward_torch.h"
#include "kernels/binding/fused_layer_ops_torch.h"

namespace statecut {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// bias as an optional: an undefined bias is then no input of the node (Function::apply would read its sizes).
struct FusedCausalConv1d : torch::autograd::Function<FusedCausalConv1d> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const c10::optional<torch::Tensor>& bias, bool silu) {
    const torch::Tensor b = bias.has_value() ? *bias : torch::Tensor();
    if (b.defined())
      ctx->save_for_backward({x, w, b});
    else
      ctx->save_for_backward({x, w});
    ctx->saved_data["silu"] = silu;
    return cuda::fused_conv1d(x, w, b, silu, torch::Tensor(), nullptr);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& w = saved[1];
    const torch::Tensor b = saved.size() > 2 ? saved[2] : torch::Tensor();
    const torch::Tensor& dy = grads[0];
    if (!dy.defined()) return {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    auto [dx, dw, db] = cuda::fused_conv1d_backward(x, w, b, ctx->saved_data["silu"].toBool(), dy);
    return {dx, dw.to(w.scalar_type()), b.defined() ? db.to(b.scalar_type()) : torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor fused_causal_conv1d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                  bool silu) {
  const c10::optional<torch::Tensor> b = bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt;
  return FusedCausalConv1d::apply(x, weight, b, silu);
}

}  // namespace statecut
#endif
