/// Metamorphic relations of key-channel pruning and head grouping, for every rule (linear attention, DeltaNet,
/// Gated DeltaNet, the general rule, Mamba-2 with B/C as key/query), recurrent and chunked:
///   (1) keep-all = unpruned: keep_columns(., {0..dk-1}) on q, k (and the rows of S_0) changes nothing, bitwise
///       (it is a copy; the scale is the caller's and stays dk^{-1/2});
///   (2) joint permutation: permuting the key channels of q, k and the rows of S_0 by pi (keep_columns with an
///       unsorted index list) gives the same outputs and the final state with its rows permuted by pi. A
///       permutation is an orthogonal map, so this is Prop. 3.1 for T = P_pi; only the summation order changes;
///   (3) pruning = zeroing: running on the kept channels equals running on all channels with the dropped channels
///       of q and k set to zero (same scale, zero S_0): the dropped rows of S stay 0 because k_t is 0 there and
///       (alpha I - beta k k^T) acts as alpha on them, and o_t = S_t^T q_t never reads them;
///   (4) GVA = explicit repetition: with Hk key heads and Hv = G Hk value heads, value head j uses key head
///       floor(j / G) (fla, anchor-fla.md §1.0), i.e. run_multihead equals running it on q, k repeat_interleave'd to
///       Hv heads; Mamba-2 groups likewise (head h uses group floor(h / (H / groups))). Bitwise: the same per-head
///       function sees the same inputs.
/// Budgets for (2), (3): rounding_budget (generators.h), 4 (T + 1)(dk + dv) eps M for the state, times
/// ||q_t|| scale sqrt(T) for outputs, M = ||S_0|| + sum_t |gain_t| ||k_t|| ||v_t|| (non-expansive transitions).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <numeric>

#include "properties/generators.h"
#include "reference/primitives.h"
#include "reference/recurrence_multihead.h"

namespace statecut::prop {
namespace {

/// Selects (and orders) the key channels of q, k and the rows of S_0.
RecurrenceCase keep_channels(const RecurrenceCase& c, const std::vector<Index>& keep) {
  RecurrenceCase r = c;
  r.q = ref::keep_columns(c.q, keep);
  r.k = ref::keep_columns(c.k, keep);
  if (c.S0.size()) r.S0 = ref::keep_columns(c.S0.transpose(), keep).transpose();
  return r;
}

RC_GTEST_PROP(Metamorphic_KeyChannels, keepingAllChannelsEqualsUnpruned, ()) {
  const auto [c, chunked, rng] = draw_head();
  std::vector<Index> all(static_cast<std::size_t>(c.dk()));
  std::iota(all.begin(), all.end(), Index{0});
  const RecurrenceCase kept = keep_channels(c, all);
  RC_ASSERT(kept.q == c.q);
  RC_ASSERT(kept.k == c.k);
  const ref::HeadResult a = run(c, chunked);
  const ref::HeadResult b = run(kept, chunked);
  RC_ASSERT(b.o == a.o);  // bitwise: identical inputs to the same function
  RC_ASSERT(b.state == a.state);
  RC_TAG(rule_name(c.rule));
}

RC_GTEST_PROP(Metamorphic_KeyChannels, jointPermutationKeepsOutputsAndPermutesState, ()) {
  auto [c, chunked, rng] = draw_head();
  std::vector<Index> perm(static_cast<std::size_t>(c.dk()));
  std::iota(perm.begin(), perm.end(), Index{0});
  std::shuffle(perm.begin(), perm.end(), rng.eng);

  const ref::HeadResult a = run(c, chunked);
  const ref::HeadResult b = run(keep_channels(c, perm), chunked);
  const Mat permuted_state = ref::keep_columns(a.state.transpose(), perm).transpose();
  const RoundingBudget budget = rounding_budget(c);
  RC_ASSERT((b.o - a.o).norm() <= budget.out);
  RC_ASSERT((b.state - permuted_state).norm() <= budget.state);
  RC_TAG(rule_name(c.rule));
  STATECUT_CLASSIFY_EPS(rel_err(b.o, a.o) / kEps);
}

RC_GTEST_PROP(Metamorphic_KeyChannels, pruningEqualsZeroingDroppedChannels, ()) {
  const RuleKind rule = *genRule();
  const Index T = *genSeqLen();
  const Index dk = *rc::gen::suchThat(genKeyDim(), [](Index d) { return d >= 2; });
  const Index dv = *genValueDim();
  const bool chunked = *rc::gen::arbitrary<bool>();
  Rng rng(*genSeed());
  const RecurrenceCase c = draw_recurrence(rng, rule, T, dk, dv, /*with_S0=*/false);
  // A random budget k' in [1, dk - 1], the kept set in random (unsorted) order as DRRQR returns it.
  std::vector<Index> order(static_cast<std::size_t>(dk));
  std::iota(order.begin(), order.end(), Index{0});
  std::shuffle(order.begin(), order.end(), rng.eng);
  const Index kept_count = rng.integer(1, dk - 1);
  const std::vector<Index> keep(order.begin(), order.begin() + kept_count);

  RecurrenceCase zeroed = c;
  for (Index i = kept_count; i < dk; ++i) {
    zeroed.q.col(order[static_cast<std::size_t>(i)]).setZero();
    zeroed.k.col(order[static_cast<std::size_t>(i)]).setZero();
  }
  const RecurrenceCase pruned = keep_channels(zeroed, keep);  // same scale: the caller's, not k'^{-1/2}
  const ref::HeadResult full = run(zeroed, chunked);
  const ref::HeadResult small = run(pruned, chunked);
  const Mat full_kept_rows = ref::keep_columns(full.state.transpose(), keep).transpose();
  const RoundingBudget budget = rounding_budget(zeroed);
  RC_ASSERT((small.o - full.o).norm() <= budget.out);
  RC_ASSERT((small.state - full_kept_rows).norm() <= budget.state);
  // The dropped rows never leave zero (k_t is exactly 0 there, so every update adds exact zeros).
  double dropped = 0.0;
  for (Index i = kept_count; i < dk; ++i) dropped += full.state.row(order[static_cast<std::size_t>(i)]).norm();
  RC_ASSERT(dropped == 0.0);
  RC_TAG(rule_name(rule));
  STATECUT_CLASSIFY_EPS(rel_err(small.o, full.o) / kEps);
}

ref::Rule to_rule(RuleKind r) {
  return r == RuleKind::Linear ? ref::Rule::Linear : r == RuleKind::Delta ? ref::Rule::Delta : ref::Rule::GatedDelta;
}

RC_GTEST_PROP(Metamorphic_GroupedValues, gvaEqualsExplicitKeyHeadRepetition, ()) {
  const RuleKind rule = *rc::gen::elementOf(std::vector<RuleKind>{RuleKind::Linear, RuleKind::Delta,
                                                                   RuleKind::GatedDelta});
  const Index T = *genSeqLen();
  const Index dk = *genKeyDim();
  const Index dv = *genValueDim();
  const std::size_t Hk = *rc::gen::inRange<std::size_t>(1, 4);
  const std::size_t G = *rc::gen::inRange<std::size_t>(1, 4);  // value heads per key head
  const bool chunked = *rc::gen::arbitrary<bool>();
  const bool with_S0 = *rc::gen::arbitrary<bool>();
  Rng rng(*genSeed());
  const std::size_t Hv = Hk * G;
  ref::MultiHeadInput grouped, repeated;
  for (std::size_t h = 0; h < Hk; ++h) {
    const RecurrenceCase c = draw_recurrence(rng, rule, T, dk, 1, false);
    grouped.q.push_back(c.q);
    grouped.k.push_back(c.k);
  }
  std::vector<Mat> S0;
  for (std::size_t j = 0; j < Hv; ++j) {
    grouped.v.push_back(gaussian(rng, T, dv));
    grouped.beta.push_back(uniform_vec(rng, T, 0.0, 1.0));
    grouped.g.push_back(log_gates(rng, T));
    S0.push_back(gaussian(rng, dk, dv));
    repeated.q.push_back(grouped.q[j / G]);  // repeat_interleave over heads
    repeated.k.push_back(grouped.k[j / G]);
  }
  repeated.v = grouped.v;
  repeated.beta = grouped.beta;
  repeated.g = grouped.g;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  const auto a = ref::run_multihead(to_rule(rule), grouped, scale, chunked, with_S0 ? &S0 : nullptr);
  const auto b = ref::run_multihead(to_rule(rule), repeated, scale, chunked, with_S0 ? &S0 : nullptr);
  RC_ASSERT(a.size() == Hv);
  RC_ASSERT(b.size() == Hv);
  for (std::size_t j = 0; j < Hv; ++j) {
    RC_ASSERT(a[j].o == b[j].o);
    RC_ASSERT(a[j].state == b[j].state);
  }
  RC_CLASSIFY(Hk >= 2 && G >= 2, "grouping matters (Hk >= 2, G >= 2)");
}

RC_GTEST_PROP(Metamorphic_GroupedValues, mamba2GroupsEqualExplicitRepetition, ()) {
  const Index T = *genSeqLen();
  const Index N = *genKeyDim();
  const Index P = *genValueDim();
  const std::size_t groups = *rc::gen::inRange<std::size_t>(1, 4);
  const std::size_t per = *rc::gen::inRange<std::size_t>(1, 4);  // heads per group
  const bool chunked = *rc::gen::arbitrary<bool>();
  Rng rng(*genSeed());
  const std::size_t H = groups * per;
  std::vector<Mat> C, B, Crep, Brep, x;
  std::vector<Vec> dt;
  Vec A(static_cast<Index>(H)), D(static_cast<Index>(H));
  for (std::size_t g = 0; g < groups; ++g) {
    const RecurrenceCase c = draw_recurrence(rng, RuleKind::Mamba2, T, N, 1, false);
    C.push_back(c.q);
    B.push_back(c.k);
  }
  for (std::size_t h = 0; h < H; ++h) {
    const RecurrenceCase c = draw_recurrence(rng, RuleKind::Mamba2, T, N, P, false);
    x.push_back(c.v);
    dt.push_back(c.dt);
    A(static_cast<Index>(h)) = c.A;
    D(static_cast<Index>(h)) = c.D;
    Crep.push_back(C[h / per]);
    Brep.push_back(B[h / per]);
  }
  const auto a = ref::mamba2_multihead(C, B, x, dt, A, D, chunked);
  const auto b = ref::mamba2_multihead(Crep, Brep, x, dt, A, D, chunked);
  RC_ASSERT(a.size() == H);
  RC_ASSERT(b.size() == H);
  for (std::size_t h = 0; h < H; ++h) {
    RC_ASSERT(a[h].o == b[h].o);
    RC_ASSERT(a[h].state == b[h].state);
  }
  RC_CLASSIFY(groups >= 2 && per >= 2, "grouping matters (groups >= 2, heads/group >= 2)");
}

}  // namespace
}  // namespace statecut::prop
