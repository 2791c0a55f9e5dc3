/// pruned.weights for a rotation (pca): the pruned q/k rows of a key head are no source rows, so they cannot be held
/// bit for bit as a subset's are. What the surgery promises instead (surgery.h) is, per key head h,
///
///   W'_h = fl(T_h W_h)          for the q and k rows (and a bias beside them, Mamba-2's in_proj),
///   C'_h = fl((T_h ∘ T_h) C_h)  for the depthwise conv filters and their bias,
///
/// with one T_h [k', dk] of orthonormal rows shared by every block of the head, fl() the rounding to the stored dtype
/// (|fl(x) − x| ≤ u|x| + η, u its unit roundoff, η half its smallest subnormal). The record does not hold T_h, so it
/// is recovered from the weights: T̂ = W' W⁺ by least squares over the stacked linear blocks W = [W_q | W_k]
/// (dk × n, by its SVD). Least squares fits each row alone, so every bound is a row's: with e_i = W'_i − T_i W
/// (‖e_i‖ ≤ ε_i := u/(1−u)·‖W'_i‖ + √n·η),
///
///   residual  ‖W'_i − W'_i V_r V_rᵀ‖ ≤ ε_i               (V_r: W's numerical row space; no κ(W) enters)
///   δ_i := ‖T̂_i − T_i‖ = ‖e_i W⁺‖ ≤ ε_i / σ_min(W)
///   |(T̂T̂ᵀ − I)_ij| ≤ δ_i + δ_j + δ_i δ_j                 (T's rows orthonormal)
///   ‖C'_i − (T̂_i∘T̂_i) C‖ ≤ u/(1−u)·‖C'_i‖ + √m·η + δ_i·‖diag(2|T̂_i| + δ_i) C‖_F   (T_i² − T̂_i² = (T_i − T̂_i)(T_i + T̂_i))
///
/// each plus the f64 slack of the fit (4·n·dk·ε₆₄·κ(W) on δ). A changed row outside the source's row space fails
/// the residual; one inside it (zeroed, scaled, copied from another channel, consistently in q and k) fails the
/// orthonormality; a changed conv filter fails the last line; NaN/Inf fails outright. Where the source's rows do not
/// determine T (rank < dk, or δ_i > 0.1 for some row: an ill-conditioned head, where a row scaled by 10% would pass)
/// only the residual is checked and the head is reported as not determined — pruned.weights is then skipped, not
/// passed. The bounds are worst cases over the rounding: in f32 they resolve a change of ~1e-7 of a row's norm, in
/// bf16 one of a few per cent (a untouched prune of the shipped bf16 model sits at ≤ 0.4 of every bound).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "optimized/models/weight_source.h"

namespace statecut::verify {

/// One rotated block of one key head: channel i of k' is row rows[i] of the pruned `tensor`; the source's dk channels
/// are its rows src_row0 .. src_row0 + dk − 1.
struct RotatedBlock {
  std::string tensor, kind;  ///< kind: "q", "k", "q conv", "k conv", each optionally + " bias"
  std::vector<int64_t> rows;
  int64_t src_row0 = 0;
};

struct RotatedHead {
  int layer = -1, head = -1;
  int64_t dk = 0;
  std::vector<RotatedBlock> blocks;  ///< the blocks compared (a fine-tuned tensor's are left out)
};

struct RotationSummary {
  int64_t heads = 0;         ///< heads whose rows were held to the source's row space
  int64_t undetermined = 0;  ///< of them, heads whose T the weights do not determine to kMaxDelta (rank, κ)
  std::string first_undetermined;  ///< why, for the first such head
  int64_t unchecked = 0;     ///< heads with no linear block left to recover T̂ from (every q/k tensor fine-tuned)
  double worst = 0;          ///< the largest figure/bound over every check of every head
};

/// A head's recovered rotation: T̂ [k', dk] (f64) and the bound δ_i on ‖T̂_i − T_i‖ per row [k'].
struct RecoveredRotation {
  torch::Tensor T, delta;
};
using RecoveredRotations = std::map<std::pair<int, int>, RecoveredRotation>;  ///< (layer, head) →

/// Checks every head as above; appends one line per failing head to `problems` (naming the layer, head, tensor and
/// the row that fits worst) and sets `where` to the first failing head when it is empty. `recovered`, when given,
/// receives T̂ of every head that passed and whose T the source determines (pruned.certificate compares it with pca).
RotationSummary check_rotated_heads(const WeightSource& pruned, const WeightSource& src,
                                    const std::vector<RotatedHead>& heads, std::vector<std::string>& problems,
                                    std::string& where, RecoveredRotations* recovered = nullptr);

}  // namespace statecut::verify
