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
#pragma once
#include "reference/types.h"

#include <cstdint>
#include <random>
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
  std::uint64_t seed = 42; ///< rand, and drrqr's faithful row subsample
  std::uint64_t stream = 0;///< e.g. the layer index. rand: one generator mix(seed, stream) per layer, heads
                           ///< drawn in order; drrqr faithful: subsample stream stream*1000003 + head
  double f = 1.5;          ///< strong-RRQR parameter, > 1
  bool faithful = false;   ///< drrqr: reproduce the published code (rrqr.h, DrrqrMode::Faithful)
  bool pca_adversarial = false;  ///< pca: keep the smallest-variance directions (ascending order)
};

/// k' for this layer from opt.keep / opt.ratio (validated against dk).
Index resolve_budget(const SelectOptions& opt, Index dk);

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

/// Platform-independent generator for rand and the faithful subsample: mt19937_64 seeded with
/// mix(seed, stream); uniform integers by rejection (no std::uniform_int_distribution).
class SelectRng {
 public:
  SelectRng(std::uint64_t seed, std::uint64_t stream);
  std::uint64_t next();                  ///< raw 64-bit output
  std::uint64_t below(std::uint64_t n);  ///< uniform in [0, n), n >= 1
 private:
  std::mt19937_64 gen_;  // the standard fixes its output sequence, unlike the distributions
};
/// A uniformly random k-subset of 0..dk-1 (partial Fisher–Yates), sorted ascending.
std::vector<Index> rand_subset(Index dk, Index k, SelectRng& rng);
/// The drrqr matrix of a head: [Q; K] (Joint), Q (QOnly) or K (KOnly).
Mat drrqr_matrix(const Mat& q, const Mat& k, ScoreSide side);

}  // namespace statecut::ref
