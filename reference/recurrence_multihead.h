/// Multi-head drivers with grouped value heads (GVA, anchor-fla.md §1.0) and Mamba-2 groups.
///
/// run_multihead: Hk query/key heads q[h], k[h] [T, dk]; Hv value heads v[j] [T, dv], beta[j], g[j] [T];
///   Hv % Hk == 0 and value head j uses key head j / (Hv / Hk) (= repeat_interleave of q/k over heads).
///   Rule::Linear ignores beta and g, Rule::Delta ignores g (they may be empty). S0: Hv states [dk, dv] or nullptr.
///   Returns Hv HeadResults; chunked selects the chunked form (chunk 64).
/// mamba2_multihead: G groups C[g], B[g] [T, N]; H heads x[h] [T, P], dt[h] [T], A[h], D[h]; H % G == 0 and
///   head h uses group h / (H / G). Zero initial state. Returns H HeadResults (state [N, P]).
#pragma once
#include "reference/types.h"

namespace statecut::ref {

enum class Rule { Linear, Delta, GatedDelta };

struct MultiHeadInput {
  std::vector<Mat> q, k;  ///< Hk heads
  std::vector<Mat> v;     ///< Hv heads
  std::vector<Vec> beta, g;  ///< Hv heads (as the rule needs)
};

std::vector<HeadResult> run_multihead(Rule rule, const MultiHeadInput& in, double scale, bool chunked,
                                      const std::vector<Mat>* S0 = nullptr);

std::vector<HeadResult> mamba2_multihead(const std::vector<Mat>& C, const std::vector<Mat>& B,
                                         const std::vector<Mat>& x, const std::vector<Vec>& dt, const Vec& A,
                                         const Vec& D, bool chunked);

}  // namespace statecut::ref
