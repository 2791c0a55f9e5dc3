/// Metamorphic relations of the recurrences (linear attention, DeltaNet, Gated DeltaNet, the general rule,
/// Mamba-2 SSD), one head, S [dk, dv]:
///   (1) chunked = recurrent: the chunkwise WY/UT (or SSD segsum) form with any chunk size equals the step-by-step
///       recurrence, outputs and final state, with or without an initial state, for T not a multiple of chunk;
///   (2) state carry: run(x_{1..T}) = run(x_{T1+1..T}, S_0 = run(x_{1..T1}).state), outputs concatenated. The
///       recurrence is a left fold over time, so this holds exactly; recurrent runs must agree bitwise (the same
///       operations on the same numbers), chunked runs up to rounding (the chunk boundaries move).
///
/// Error budget (both relations; rounding_budget in generators.h): every generated transition is non-expansive, so the state's rounding error is
/// at most ~ (dk + dv) eps M per step, M = ||S_0|| + sum_t |gain_t| ||k_t|| ||v_t|| >= every ||S_t||; over T steps
/// and two computations: 4 (T + 1)(dk + dv) eps M for the state and that times ||q_t|| scale sqrt(T) for the
/// outputs. The chunked form's triangular solve (I + L)^{-1} has |L_ij| <= 2, but its growth stays far below this
/// budget for the inputs drawn here (measured: the classification prints the error in eps units of M).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "properties/generators.h"

namespace statecut::prop {
namespace {

RC_GTEST_PROP(Metamorphic_Recurrence, chunkedMatchesRecurrent, ()) {
  const RuleKind rule = *genRule();
  const Index T = *genSeqLen();
  const Index dk = *genKeyDim();
  const Index dv = *genValueDim();
  const Index chunk = *genChunk();
  const bool with_S0 = *rc::gen::arbitrary<bool>();
  Rng rng(*genSeed());
  const RecurrenceCase c = draw_recurrence(rng, rule, T, dk, dv, with_S0);

  const ref::HeadResult rec = run(c, false);
  const ref::HeadResult chk = run(c, true, chunk);
  RC_ASSERT(chk.o.rows() == T);
  RC_ASSERT(chk.o.cols() == dv);
  RC_ASSERT(chk.state.rows() == dk);
  RC_ASSERT(chk.state.cols() == dv);
  const RoundingBudget b = rounding_budget(c);
  const double state_err = (chk.state - rec.state).norm();
  const double out_err = (chk.o - rec.o).norm();
  RC_ASSERT(state_err <= b.state);
  RC_ASSERT(out_err <= b.out);
  RC_TAG(rule_name(rule));
  STATECUT_CLASSIFY_EPS(std::max(state_err / b.state, out_err / b.out) *
                        (4.0 * static_cast<double>((T + 1) * (dk + dv))));  // error in eps units of M
}

RC_GTEST_PROP(Metamorphic_Recurrence, stateCarryEqualsSingleRun, ()) {
  const RuleKind rule = *genRule();
  const Index T = *rc::gen::suchThat(genSeqLen(), [](Index t) { return t >= 2; });
  const Index dk = *genKeyDim();
  const Index dv = *genValueDim();
  const bool chunked = *rc::gen::arbitrary<bool>();
  const Index chunk = *genChunk();
  const bool with_S0 = *rc::gen::arbitrary<bool>();
  Rng rng(*genSeed());
  const RecurrenceCase c = draw_recurrence(rng, rule, T, dk, dv, with_S0);
  const Index T1 = rng.integer(1, T - 1);

  const ref::HeadResult whole = run(c, chunked, chunk);
  const ref::HeadResult first = run(slice_steps(c, 0, T1), chunked, chunk);
  RecurrenceCase rest = slice_steps(c, T1, T - T1);
  rest.S0 = first.state;
  const ref::HeadResult second = run(rest, chunked, chunk);
  Mat o(T, dv);
  o << first.o, second.o;

  if (!chunked) {
    // A left fold: the same floating-point operations in the same order, so bitwise equal.
    RC_ASSERT(second.state == whole.state);
    RC_ASSERT(o == whole.o);
  } else {
    const RoundingBudget b = rounding_budget(c);
    RC_ASSERT((second.state - whole.state).norm() <= b.state);
    RC_ASSERT((o - whole.o).norm() <= b.out);
  }
  RC_TAG(rule_name(rule));
  STATECUT_CLASSIFY_EPS(rel_err(o, whole.o) / kEps);
}

}  // namespace
}  // namespace statecut::prop
