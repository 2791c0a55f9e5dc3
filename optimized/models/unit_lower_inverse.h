/// The inverse of a batch of unit lower-triangular matrices as one autograd node, so that the chunked delta rule
/// (recurrence.cpp) multiplies by T = A⁻¹ with batched GEMMs instead of a triangular solve per right-hand side block
/// forward and backward (a batched trsm is slow on GPUs; a GEMM runs on tensor cores; fla does the same).
///
///   A = I + L,  L strictly lower triangular (only A's strict lower part is read; its diagonal is taken as 1 and its
///   upper part as 0),  T = A⁻¹ (unit lower triangular).    A, T: [..., C, C]
///
/// Forward: T = solve_triangular(A, I, lower, unit diagonal): one solve with C right-hand sides.
///
/// Backward, from T̄ = ∂L/∂T: differentiating A T = I gives dA T + A dT = 0, so dT = −T dA T and
///   ⟨T̄, dT⟩ = −tr(T̄ᵀ T dA T) = −tr((Tᵀ T̄ Tᵀ)ᵀ dA) = ⟨−Tᵀ T̄ Tᵀ, dA⟩,
/// i.e. ∂L/∂A = −Tᵀ T̄ Tᵀ: two batched GEMMs, no solve. Only A's strict lower part is an input (the diagonal is fixed
/// at 1, the upper part is not read), so
///   Ā = strict_lower(−Tᵀ T̄ Tᵀ).
/// T̄'s upper triangle (diagonal included) does not matter: (Tᵀ T̄ Tᵀ)_ij = Σ_ab T_ai T̄_ab T_jb with T_ai ≠ 0 only for
/// a ≥ i and T_jb ≠ 0 only for j ≥ b, so for i > j only a ≥ i > j ≥ b, a > b enter: T̄'s strict lower part alone. This
/// matches T's structure: T's upper triangle and diagonal are constant (0 and 1), whatever A's strict lower part is.
#pragma once
#include <torch/torch.h>

namespace statecut {

/// A [..., C, C] (fp32 or f64, any device; only its strict lower part is read) → T = (I + strict_lower(A))⁻¹, unit
/// lower triangular, differentiable in A's strict lower part.
torch::Tensor unit_lower_inverse(const torch::Tensor& A);

}  // namespace statecut
