/// Key/query channel selectors of the paper (DESIGN.md §4, anchor-original §2), one head at a time.
///
/// For a head with dk key channels the selector keeps k' of them (selection_budget.h); the same
/// index set is used for q and k (the state S [dk, dv] is indexed by key channels). Scores, per
/// channel i of the head (hidden = model width, j runs over it):
///   rand   : a uniformly random k'-subset (own Fisher–Yates on mt19937_64, reproducible everywhere)
///   l1     : s_i = sum_j |Wq_ij| + |Wk_ij|
///   swanda : s_i = sum_j (|Wq_ij| + |Wk_ij|) * rms_j,   rms_j = sqrt(mean_t x_tj^2) of the attn-norm output
///   grad   : s_i = sum_j |Wq_ij * dL/dWq_ij| + |Wk_ij * dL/dWk_ij|   (gradients summed over sequences)
///   drrqr  : strong RRQR (rrqr.h) of M = [Q; K] [2N, dk] (post conv+SiLU, pre-L2-norm), first k' pivots
///   pca    : NOT a subset: the rotation T [k', dk] of pca.h (use pca_rotations)
/// Score sides (paper Table 16, `--select`): Joint uses both q and k terms above (M = [Q; K] for
/// drrqr, pooled q+k statistics for pca); QOnly keeps only the Wq / Q terms; KOnly only the Wk / K.
/// Top-k: the k' largest scores; ties go to the lower channel index. Returned indices are sorted
/// ascending (canonical form; the paper's drrqr returns pivot order, see drrqr_pivots in rrqr.h).
/// Seeds: rand and the faithful subsample of layer l, head h draw from SelectRng::for_head(seed, l, h)
/// (select_rng.h), one generator per head.
///
/// select_head is the one per-head selector: `statecut prune` (from its calibration), `statecut select` (from a
/// matrix file) and the library calls below all go through it, so one head's inputs, options, layer and head give
/// one answer everywhere.
#pragma once
#include "reference/pca.h"
#include "reference/select_rng.h"
#include "reference/types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace statecut::ref {

enum class SelectMethod { Rand, L1, SWanda, Grad, Drrqr, Pca };
enum class ScoreSide { Joint, QOnly, KOnly };

/// "rand" | "l1" | "swanda" | "grad" | "drrqr" | "pca"; throws ShapeError on anything else.
SelectMethod method_from_name(const std::string& name);
const char* method_name(SelectMethod m);
/// "qk" | "q" | "k" (the CLI's --select); throws ShapeError on anything else.
ScoreSide side_from_name(const std::string& name);
const char* side_name(ScoreSide s);

/// What one head contributes. Each method reads only the fields it needs; the others may stay empty.
struct HeadInputs {
  Mat wq, wk;            ///< [dk, hidden] rows h*dk..(h+1)*dk of q_proj / k_proj      (l1, swanda, grad)
  Mat grad_wq, grad_wk;  ///< [dk, hidden] dL/dW of the same rows, summed over sequences (grad)
  Mat q, k;              ///< [N, dk] features after conv + SiLU, before the L2 norm   (drrqr, pca)
  /// drrqr, instead of q/k: the selection matrix itself, [Q; K] (or Q, or K: the side is already applied) —
  /// possibly rows already drawn by faithful_subsample (then m <= 5,000 and no second draw happens), or, for the
  /// strong mode, any R with R^T R = M^T M (the calibration's streamed R factor). rand reads its column count
  /// as dk when wq is empty.
  Mat m;
  /// pca, instead of q/k: the moments of the L2-normed features (what calibration accumulates); n > 0 when given.
  PcaStats pca_q, pca_k;
};

/// One layer: its heads (all with the same dk) and, for swanda, the RMS of the q_proj input.
struct LayerInputs {
  std::vector<HeadInputs> heads;
  Vec rms;  ///< [hidden] (swanda)
};

struct SelectOptions {
  SelectMethod method = SelectMethod::Drrqr;
  Index keep = 0;          ///< explicit k' (1 <= keep <= dk); 0 means "use ratio"
  double ratio = 0.0;      ///< pruning ratio in (0, 1), used when keep == 0
  ScoreSide side = ScoreSide::Joint;
  std::uint64_t seed = 42; ///< rand, and drrqr's faithful row subsample (select_rng.h)
  Index layer = 0;         ///< the model's layer index: with the head, it picks the head's generator
  double f = 1.5;          ///< strong-RRQR parameter, > 1
  bool faithful = false;   ///< drrqr: reproduce the published code (rrqr.h, DrrqrMode::Faithful)
  bool pca_adversarial = false;  ///< pca: keep the smallest-variance directions (ascending order)
};

/// k' for this layer from opt.keep / opt.ratio (validated against dk).
Index resolve_budget(const SelectOptions& opt, Index dk);

/// One head's selection: the kept channels or, for pca, the rotation; drrqr adds its diagnostics.
struct HeadSelection {
  std::vector<Index> keep;    ///< sorted ascending, size k' (empty for pca)
  Mat rotation;               ///< pca: T [k', dk], rows orthonormal
  std::vector<Index> pivots;  ///< drrqr: the first k' pivots in pivot order
  Index rows = 0;             ///< drrqr: rows of the matrix it was given (before any subsample)
  Index swaps = 0, k_certified = 0;
  double max_rho = 0.0;
  bool certified = false;
};

/// THE per-head selector: head `head` of layer opt.layer, whose inputs are `h` (and, for swanda, the layer's RMS
/// `rms`). Throws ShapeError on missing or mis-shaped inputs for the chosen method or a bad budget.
HeadSelection select_head(const HeadInputs& h, const Vec& rms, const SelectOptions& opt, Index head);

/// select_head for every head of a layer (all heads must have the same dk).
std::vector<HeadSelection> select_layer(const LayerInputs& in, const SelectOptions& opt);

/// Per head, the kept channel indices (sorted ascending, size k'). Throws ShapeError on missing or
/// mis-shaped inputs for the chosen method, on a bad budget, and for Pca (which rotates: see below).
std::vector<std::vector<Index>> select_channels(const LayerInputs& in, const SelectOptions& opt);

/// Pca only: per head the rotation T [k', dk] (rows orthonormal) of pca.h, absorbed as
/// Wq <- T Wq, Wk <- T Wk; the conv filters are mixed with pca_conv_mixing (pca.h).
std::vector<Mat> pca_rotations(const LayerInputs& in, const SelectOptions& opt);

// ---- building blocks (one head) ------------------------------------------------------------
Vec l1_scores(const Mat& wq, const Mat& wk, ScoreSide side);
Vec swanda_scores(const Mat& wq, const Mat& wk, const Vec& rms, ScoreSide side);
Vec grad_scores(const Mat& wq, const Mat& wk, const Mat& grad_wq, const Mat& grad_wk, ScoreSide side);
/// Indices of the k largest scores (ties -> lower index), sorted ascending. Throws on NaN scores.
std::vector<Index> top_k_sorted(const Vec& scores, Index k);

/// A uniformly random k-subset of 0..dk-1 (partial Fisher–Yates), sorted ascending.
std::vector<Index> rand_subset(Index dk, Index k, SelectRng& rng);
/// The drrqr matrix of a head: [Q; K] (Joint), Q (QOnly) or K (KOnly).
Mat drrqr_matrix(const Mat& q, const Mat& k, ScoreSide side);

}  // namespace statecut::ref
