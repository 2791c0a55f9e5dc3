/// `statecut rank`: rank utilization of the recurrent state over the positions of one sequence (paper §2.2,
/// anchor-original §6.3).
///
/// Per linear-attention layer and value head h (key head h / (Hv/Hk)), from the model's boundary tensors:
///   k̂_t = k_t / sqrt(Σ k_t² + 1e-6)          (conv + SiLU output, L2-normed as the kernel does)
///   S_t = α_t (S_{t−1} − β_t k̂_t (k̂_tᵀ S_{t−1})) + β_t k̂_t v_tᵀ   with S_0 = 0, S ∈ R^{dk×dv}, fp32 (as the paper)
///   default (paper): α_t = 1 — the UNGATED delta state, even for Gated DeltaNet;  --gated: α_t = exp(g_t)
///   u(t) = er(S_{t−1}) / min(dk, dv),   er(S) = ‖S‖_F² / ‖S‖_2²     (recorded BEFORE the update at t: u(0) = 0)
/// ‖S‖_2² comes from a power iteration on SᵀS warm-started from the previous position's top right singular
/// vector (S changes by a rank-one term per step), iterated until the Rayleigh quotient moves by < 1e-9
/// relative; the final state's full spectrum is computed by SVD in f64 and the final u checked against it.
/// Summaries per head: mean/std/min/max of u(t) over t (paper Table 5); per layer the mean over heads; overall
/// the mean over layers of the per-layer mean (the paper's notebook, which also reports the first 1024 positions).
/// Mamba-2 layers (no β) are analysed as gated linear attention only with --gated unavailable: they are skipped.
#pragma once
#include <string>
#include <vector>

#include "optimized/models/model.h"

namespace statecut {

struct RankOptions {
  bool gated = false;
};

struct HeadRank {
  std::vector<float> u;               ///< [T] u(t)
  double mean = 0, std = 0, min = 0, max = 0;
  std::vector<double> spectrum;       ///< singular values of S_T, descending (f64 SVD)
  double final_u_exact = 0;           ///< u(S_T) from the SVD
  double final_u_power = 0;           ///< u(S_T) from the power iteration (diagnostic)
};

struct LayerRank {
  int layer = 0;
  int dk = 0, dv = 0;
  std::vector<HeadRank> heads;
  double mean = 0;
};

struct RankReport {
  std::vector<LayerRank> layers;
  int64_t tokens = 0;
  bool gated = false;
  double mean_u = 0;        ///< mean over layers of (mean over heads of mean_t u)
  double mean_u_1024 = 0;   ///< the same over the first min(T, 1024) positions
  std::vector<float> curve; ///< [T] mean over layers and heads of u(t)
};

/// ids [1, T] int64. Throws std::runtime_error when the model returns no boundary with β for any layer.
RankReport analyze_rank(CausalLM& model, const torch::Tensor& ids, const RankOptions& opt);

/// The per-head recurrence on given tensors (exposed for tests): k [T,dk] (raw, normalised inside),
/// v [T,dv], beta [T], g [T] or undefined (ungated). Returns u(t) [T] and the final state [dk,dv] f32.
std::vector<float> state_rank_curve(const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& beta,
                                    const torch::Tensor& g, torch::Tensor* final_state);

}  // namespace statecut
