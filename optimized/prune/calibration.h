/// Calibration: one streaming pass of the UNPRUNED model over N×L token windows, collecting per prunable layer
/// exactly what the chosen selector needs (DESIGN.md §4, anchor-original §4), in memory bounded by O(H·dk²) per
/// layer instead of O(N·L·H·dk):
///   features (drrqr)  per head the R factor [dk, dk] (f64) of M = [Q; K] (or Q, or K: --select), with
///                     q, k = short conv + SiLU outputs BEFORE the L2 norm, rows = tokens. Streamed as a
///                     tall-skinny QR: R ← qr_r([R; X_chunk]), so Mᵀ M = Rᵀ R exactly in exact arithmetic and
///                     QRCP / strong-RRQR of R select the same columns as of M (reference/rrqr.h).
///   rows (drrqr --faithful) per head up to `faithful_rows` rows of [Q; K] drawn uniformly without replacement,
///                     f32, as the published code subsamples 5,000 rows: layer l, head h keeps the rows
///                     ref::faithful_subsample draws with SelectRng::for_head(seed, l, h) (reference/select_rng.h),
///                     in M's row order, so ref::select_head given the whole M draws the very same rows.
///   pca               per head Σ x̂, Σ x̂ x̂ᵀ (f64) of the L2-normed q and k features, and the token count.
///   rms (swanda)      Σ_t x_tj² (f64) of the attention-norm output feeding the q/k projections, and the count.
///   grad              Σ over sequences of ∂L/∂W for the q and k row blocks of each layer ([Hk·dk, hidden] f32),
///                     L = mean next-token cross-entropy of one sequence (LibTorch autograd).
/// Sequences run in mini-batches; per batch only the boundary tensors of the current forward are alive.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#include "optimized/models/model.h"
#include "reference/selectors.h"

namespace statecut {

struct CalibrationNeeds {
  bool features = false;
  bool rows = false;
  int64_t faithful_rows = 5000;
  bool pca = false;
  bool rms = false;
  bool grad = false;
  ref::ScoreSide side = ref::ScoreSide::Joint;  ///< which of Q, K the features and rows hold (--select)
  uint64_t seed = 42;     ///< the faithful row subsample (the seed rule of reference/select_rng.h)
  int64_t batch = 0;      ///< sequences per forward; 0 = choose from the model size
};

struct LayerCalibration {
  int layer = 0;
  std::vector<torch::Tensor> r;         ///< [Hk] of [dk, dk] f64 (features)
  std::vector<torch::Tensor> rows;      ///< [Hk] of [m, dk] f32 (rows)
  std::vector<torch::Tensor> pca_sum_q, pca_outer_q, pca_sum_k, pca_outer_k;  ///< [Hk] f64
  double pca_n = 0;
  torch::Tensor sumsq;                  ///< [hidden] f64 (rms)
  double rms_n = 0;
  torch::Tensor grad_q, grad_k;         ///< [Hk·dk, hidden] f32 (grad)
  torch::Tensor rms() const;            ///< sqrt(sumsq / n)
};

struct Calibration {
  std::vector<LayerCalibration> layers;  ///< one per prunable layer, in prunable_layers() order
  int64_t tokens = 0;
  double mean_loss = 0;                  ///< mean next-token CE over the calibration sequences (grad pass)
};

using Progress = std::function<void(int64_t done, int64_t total)>;

/// Thrown by calibrate() when what the selectors read is not finite (q, k or the q/k projections' input of a batch;
/// for grad the loss or a gradient): the model's forward (or backward) overflowed on the windows, e.g. finite weights
/// too large for fp32 (3e38). One line naming the layer, the head and what overflowed, without the checkpoint: the
/// caller that knows it prefixes it.
struct CalibrationNotFinite : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// What a selection method reads from the calibration pass (nothing for rand and l1; drrqr: the R factor, or the
/// faithful rows); side, seed and batch are left for the caller to fill in.
CalibrationNeeds calibration_needs(ref::SelectMethod method, bool faithful);
/// True when calibration_needs(method, ...) asks for anything (swanda, grad, drrqr, pca).
bool needs_calibration(ref::SelectMethod method);

/// ids: [N, L] int64 (CPU). Throws std::runtime_error when the model exposes no boundary for a prunable layer, and
/// CalibrationNotFinite when an activation it reads holds NaN or Inf (the forward overflowed).
/// before_block: passed to every forward (ForwardOptions::before_block): a StreamedModel's hook runs the no-grad pass
/// with one block's weights resident; the gradient pass needs every block at once and refuses it.
Calibration calibrate(CausalLM& model, const torch::Tensor& ids, const CalibrationNeeds& needs,
                      const Progress& progress = {}, const BlockHook& before_block = {});

}  // namespace statecut
