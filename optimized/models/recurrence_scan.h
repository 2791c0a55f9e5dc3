/// The inter-chunk scan of the chunked recurrences (recurrence.h) as one autograd node, so that a training step
/// records one operation for it instead of two GEMMs (and their copies) per chunk, and its backward runs a reverse
/// loop of two GEMMs per chunk with everything else batched over all chunks.
///
/// Per row r of the flattened batch·heads and chunk n = 0..N−1, from the initial state S_0:
///   v_new_n = u_n − w_n S_n            (delta rule; gated linear attention: v_new_n = u_n, no w)
///   S_{n+1} = d_n S_n + k_nᵀ v_new_n   (d_n = exp(G_last) of chunk n, k_n = K ⊙ exp(G_last − G); no gate: d_n = 1)
/// Outputs: the states entering the chunks S_0..S_{N−1} [R,N,dk,dv], S_N [R,dk,dv] and, for the delta rule, v_new
/// [R,N,C,dv]. The forward runs the same operations in the same order as a plain loop (bit-identical).
///
/// Backward, from the outputs' gradients Ŝ_n (states), Ŝ_N (S_N), V̂_n (v_new), with P_{n+1} = ∂L/∂S_{n+1}:
///   Δ_n = V̂_n + k_n P_{n+1}                   (∂L/∂v_new_n in full, = ∂L/∂u_n)
///   P_n = d_n P_{n+1} − w_nᵀ Δ_n + Ŝ_n          (P_N = Ŝ_N)
/// then for all chunks at once: ∂w_n = −Δ_n S_nᵀ, ∂k_n = v_new_n P_{n+1}ᵀ, ∂d_n = ⟨P_{n+1}, S_n⟩, ∂S_0 = P_0.
#pragma once
#include <torch/torch.h>

namespace statecut {

struct ChunkScan {
  torch::Tensor states;  ///< [R,N,dk,dv]: S_0..S_{N−1}
  torch::Tensor v_new;   ///< [R,N,C,dv]; for gated linear attention, u itself
  torch::Tensor last;    ///< [R,dk,dv]: S_N
};

/// u [R,N,C,dv]; w [R,N,C,dk] (undefined: gated linear attention); k [R,N,C,dk]; d [R,N,1,1] (undefined: no gate);
/// S0 [R,dk,dv]; N >= 1. Any of them may require grad; all of one dtype and device.
ChunkScan chunk_scan(const torch::Tensor& u, const torch::Tensor& w, const torch::Tensor& k, const torch::Tensor& d,
                     const torch::Tensor& S0);

}  // namespace statecut
