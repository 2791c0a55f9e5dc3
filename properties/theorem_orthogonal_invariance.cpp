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
  const RuleKind rule = *genRule();
  const Index T = *genSeqLen();
  const Index dk = *genKeyDim();
  const Index dv = *genValueDim();
  const bool chunked = *rc::gen::arbitrary<bool>();
  const bool with_S0 = *rc::gen::arbitrary<bool>();
  Rng rng(*genSeed());
  const RecurrenceCase c = draw_recurrence(rng, rule, T, dk, dv, with_S0);
  const Mat rot = random_orthogonal(rng, dk);

  RecurrenceCase r = c;
  r.q = c.q * rot.transpose();
  r.k = c.k * rot.transpose();
  if (with_S0) r.S0 = rot * c.S0;

  const ref::HeadResult base = run(c, chunked);
  const ref::HeadResult turned = run(r, chunked);

  // Both runs round differently. Every transition is non-expansive, so each step adds an absolute error of at most
  // ~ (dk + dv) eps times the state magnitude M (state_magnitude), and the T steps add up: budget
  // 4 (T + 1) (dk + dv) eps M for the state, times ||q_t|| scale for the outputs (c = 4: two runs, two products).
  const double M = state_magnitude(c);
  const double budget = 4.0 * static_cast<double>((T + 1) * (dk + dv)) * kEps;
  const double q_scale = c.scale * c.q.rowwise().norm().maxCoeff() * std::sqrt(static_cast<double>(T));
  const double out_err = (turned.o - base.o).norm();
  const double state_err = (turned.state - rot * base.state).norm();
  RC_ASSERT(state_err <= budget * M);
  RC_ASSERT(out_err <= budget * M * q_scale);
  STATECUT_CLASSIFY_EPS(rel_err(turned.o, base.o) / kEps);
}

}  // namespace
}  // namespace statecut::prop
