// unit_lower_inverse: T = (I + strict_lower(A))⁻¹ as one autograd node (math in unit_lower_inverse.h).
#include "optimized/models/unit_lower_inverse.h"

namespace statecut {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct UnitLowerInverseFunction : public torch::autograd::Function<UnitLowerInverseFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& A) {
    const auto eye = torch::eye(A.size(-1), A.options());
    // the solve reads neither A's diagonal (unit) nor its upper part (lower)
    auto T = torch::linalg_solve_triangular(A, eye, /*upper=*/false, /*left=*/true, /*unitriangular=*/true);
    ctx->save_for_backward({T});
    return T;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& dT = grads[0];
    if (!dT.defined()) return {torch::Tensor()};
    const auto Tt = ctx->get_saved_variables()[0].transpose(-1, -2);
    return {torch::tril(torch::matmul(Tt, torch::matmul(dT, Tt)), -1).neg_()};
  }
};

}  // namespace

torch::Tensor unit_lower_inverse(const torch::Tensor& A) {
  TORCH_CHECK(A.dim() >= 2 && A.size(-1) == A.size(-2), "unit_lower_inverse: A must be [..., C, C], got ", A.sizes());
  return UnitLowerInverseFunction::apply(A);
}

}  // namespace statecut
