/// Theorem (paper Prop. 3.1): linear attention, DeltaNet, Gated DeltaNet, Mamba-2 (and the general rule
///   S_t = (alpha_t I - beta_t k_t k_t^T) S_{t-1} + gamma_t k_t v_t^T) are invariant under an orthogonal change of
/// the key basis: for T orthogonal [dk, dk], the inputs (q_t, k_t, S_0) -> (T q_t, T k_t, T S_0) give the same
/// outputs o_t and the state S_t -> T S_t.
///
/// Proof (checked here for every rule, recurrent and chunked): by induction, if S'_{t-1} = T S_{t-1} then
///   S'_t = (alpha I - beta T k k^T T^T) T S_{t-1} + gamma T k v^T = T [(alpha I - beta k k^T) S_{t-1} + gamma k v^T]
///        = T S_t,   and   o'_t = S'^T_t (scale T q_t) = S_t^T T^T T (scale q_t) = o_t.
/// ||T k|| = ||k||, so L2-normalised keys stay normalised. Mamba-2: key = B, query = C, the D skip does not see T.
/// In the row layout (rows = time) the map is K -> K T^T, Q -> Q T^T.
///
/// Consequence (why it matters): pruning in a rotated basis (PCA) is as legitimate as axis-aligned pruning; the
/// state's key basis is arbitrary up to T.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "properties/generators.h"

namespace statecut::prop {
namespace {

RC_GTEST_PROP(Theorem_OrthogonalInvariance, outputsInvariantAndStateRotates, ()) {
  auto [c, chunked, rng] = draw_head();
  const Mat rot = random_orthogonal(rng, c.dk());

  RecurrenceCase r = c;
  r.q = c.q * rot.transpose();
  r.k = c.k * rot.transpose();
  if (c.S0.size()) r.S0 = rot * c.S0;

  const ref::HeadResult base = run(c, chunked);
  const ref::HeadResult turned = run(r, chunked);

  // Both runs round differently. Every transition is non-expansive, so each step adds an absolute error of at most
  // ~ (dk + dv) eps times the state magnitude M (state_magnitude), and the T steps add up: rounding_budget,
  // 4 (T + 1) (dk + dv) eps M for the state, times ||q_t|| scale sqrt(T) for the outputs.
  const RoundingBudget budget = rounding_budget(c);
  RC_ASSERT((turned.state - rot * base.state).norm() <= budget.state);
  RC_ASSERT((turned.o - base.o).norm() <= budget.out);
  STATECUT_CLASSIFY_EPS(rel_err(turned.o, base.o) / kEps);
}

}  // namespace
}  // namespace statecut::prop
