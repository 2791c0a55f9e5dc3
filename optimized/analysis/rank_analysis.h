/// `statecut rank`: rank utilization of the recurrent state over the positions of one sequence (paper §2.2,
/// anchor-original §6.3).
///
/// Per linear-attention layer and value head h (key head h / (Hv/Hk)), from the model's boundary tensors, S_0 = 0,
/// S ∈ R^{dk×dv} key-major, fp32 (as the paper):
///   delta rule (DeltaNet, Gated DeltaNet, Qwen3.5/Next):
///     k̂_t = k_t / sqrt(Σ k_t² + 1e-6)          (conv + SiLU output, L2-normed as the kernel does)
///     S_t = α_t (S_{t−1} − β_t k̂_t (k̂_tᵀ S_{t−1})) + β_t k̂_t v_tᵀ
///   Mamba-2 SSD (no β, no L2 norm; key = B, value = dt·x, per head of the group's B):
///     S_t = α_t S_{t−1} + B_t (dt_t x_t)ᵀ
///   default (paper): α_t = 1 — the decay gate dropped: the UNGATED delta state even for Gated DeltaNet, and for
///                    Mamba-2 the SSD state without its decay exp(dt·A) (a plain sum of the writes)
///   --gated:         α_t = exp(g_t): the state the model really carries (g = −exp(A_log)·softplus(a + dt_bias) for
///                    GDN, g = dt·A for Mamba-2); DeltaNet has no gate, so its state is the same either way
///   u(t) = er(S_{t−1}) / min(dk, dv),   er(S) = ‖S‖_F² / ‖S‖_2²   (the stable rank; recorded BEFORE the update at
///   t, so u(0) = 0 for the zero state). u ∈ [0, 1]: 1/min(dk, dv) for a rank-one state, 1 when all singular
///   values are equal.
/// ‖S‖_2² comes from a power iteration on SᵀS warm-started from the previous position's top right singular
/// vector (S changes by a rank-one term per step), iterated until the Rayleigh quotient moves by < 1e-9
/// relative; the final state's full spectrum is computed by SVD in f64 and the final u checked against it.
/// Summaries per head: mean/std/max of u(t) over t (the minimum is not reported: it is u(0) = 0 by definition, and
/// over t ≥ 1 it is u(1) = 1/min(dk, dv) for any non-zero first write); per layer the mean over heads; overall the
/// mean over layers of the per-layer mean (the paper's notebook, which also reports the first 1024 positions).
/// Heads run in parallel on LibTorch's intra-op threads.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "optimized/models/model.h"

namespace statecut {

/// Which state a report describes (RankReport::state).
enum class RankState {
  UngatedDelta,  ///< delta rule, α = 1 (the paper's default)
  GatedDelta,    ///< delta rule with the model's decay gate
  UngatedSsd,    ///< Mamba-2 SSD without its decay
  Ssd,           ///< Mamba-2 SSD as the model runs it
};
/// "ungated delta state", "gated delta state", "Mamba-2 SSD state without its decay", "Mamba-2 SSD state" (human) and
/// "delta", "gated_delta", "ssd_ungated", "ssd" (JSON).
const char* rank_state_label(RankState s);
const char* rank_state_key(RankState s);

struct RankOptions {
  bool gated = false;
  /// Called with (heads done, heads in all layers) after the forward and after each head (from one thread at a time).
  std::function<void(int64_t, int64_t)> progress;
};

struct HeadRank {
  int key_head = 0;                   ///< the key head this value head reads (differs from its index under GVA)
  std::vector<float> u;               ///< [T] u(t)
  double mean = 0, std = 0, max = 0;  ///< over t (u(0) = 0 included, as the paper)
  std::vector<double> spectrum;       ///< singular values of S_T, descending (f64 SVD)
  double final_u_exact = 0;           ///< u(S_T) from the SVD
  double final_u_power = 0;           ///< u(S_T) from the power iteration (diagnostic)
};

struct LayerRank {
  int layer = 0;
  int dk = 0, dv = 0;
  int num_key_heads = 0;  ///< Hk (Mamba-2: n_groups); heads.size() is Hv
  std::vector<HeadRank> heads;
  double mean = 0;
};

struct RankReport {
  std::vector<LayerRank> layers;
  int64_t tokens = 0;
  bool gated = false;
  RankState state = RankState::UngatedDelta;
  std::string model_type;
  double mean_u = 0;        ///< mean over layers of (mean over heads of mean_t u)
  double mean_u_1024 = 0;   ///< the same over the first min(T, 1024) positions
  std::vector<float> curve; ///< [T] mean over layers and heads of u(t)
  std::vector<std::string> notes;  ///< one-line remarks for the user (e.g. --gated on a family without a gate)
};

/// ids [1, T] int64. Throws std::runtime_error when the model has no linear-attention layer it can analyse.
RankReport analyze_rank(CausalLM& model, const torch::Tensor& ids, const RankOptions& opt);

/// One head's series (rows are positions): k [T,dk] (raw), v [T,dv], beta [T] or undefined (a plain linear-attention
/// write k vᵀ, Mamba-2), g [T] log decay or undefined (α = 1); l2norm_k: normalise k as the delta-rule kernels do.
struct HeadSeries {
  torch::Tensor k, v, beta, g;
  bool l2norm_k = true;
};

/// The per-head recurrence above (exposed for tests): returns u(t) [T] and the final state [dk,dv] f32.
std::vector<float> state_rank_curve(const HeadSeries& s, torch::Tensor* final_state);

/// The delta-rule case: k [T,dk] (raw, normalised inside), v [T,dv], beta [T], g [T] or undefined (ungated).
std::vector<float> state_rank_curve(const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& beta,
                                    const torch::Tensor& g, torch::Tensor* final_state);

}  // namespace statecut
