// Equiv_MultiHead: grouped value heads (GVA) equal running with the key heads explicitly repeated
// (repeat_interleave: value head j reads key head j / (Hv/Hk)); Mamba-2 groups likewise; per-head results equal
// single-head calls; the chunked switch equals the recurrent one.
#include "reference/gated_delta_rule.h"
#include "reference/mamba2_ssd.h"
#include "reference/recurrence_multihead.h"
#include "tests/ref/ref_test_util.h"

namespace statecut::ref {
namespace {

constexpr Index kT = 70, kDk = 12, kDv = 7;

/// repeat_interleave over heads: [a, b] with rep 3 -> [a, a, a, b, b, b].
template <class X>
std::vector<X> repeat_interleave(const std::vector<X>& xs, std::size_t rep) {
  std::vector<X> out;
  for (const X& x : xs)
    for (std::size_t r = 0; r < rep; ++r) out.push_back(x);
  return out;
}

MultiHeadInput make_input(std::size_t Hk, std::size_t Hv, test::Rng& rng) {
  MultiHeadInput in;
  for (std::size_t h = 0; h < Hk; ++h) {
    in.q.push_back(rng.normal(kT, kDk));
    in.k.push_back(rng.unit_rows(kT, kDk));
  }
  for (std::size_t j = 0; j < Hv; ++j) {
    in.v.push_back(rng.normal(kT, kDv));
    in.beta.push_back(rng.uniform(kT, 0, 1));
    in.g.push_back(rng.log_gates(kT));
  }
  return in;
}

double max_rel_err(const std::vector<HeadResult>& a, const std::vector<HeadResult>& b) {
  EXPECT_EQ(a.size(), b.size());
  double e = 0;
  for (std::size_t j = 0; j < std::min(a.size(), b.size()); ++j)
    e = std::max({e, test::rel_err(a[j].o, b[j].o), test::rel_err(a[j].state, b[j].state)});
  return e;
}

TEST(Equiv_MultiHead, gvaEqualsExplicitRepetitionOfKeyHeads) {
  test::Rng rng(test::test_seed(9, "Equiv_MultiHead.gvaEqualsExplicitRepetitionOfKeyHeads"));
  const MultiHeadInput in = make_input(2, 6, rng);
  MultiHeadInput rep = in;
  rep.q = repeat_interleave(in.q, 3);
  rep.k = repeat_interleave(in.k, 3);
  for (Rule rule : {Rule::Linear, Rule::Delta, Rule::GatedDelta})
    for (bool chunked : {false, true}) {
      // Same per-head arithmetic on both sides: bitwise equal.
      EXPECT_EQ(max_rel_err(run_multihead(rule, in, 0.5, chunked), run_multihead(rule, rep, 0.5, chunked)), 0.0)
          << int(rule) << chunked;
    }
  // The mapping is interleaved, not tiled: tiling [a, b, a, b, a, b] gives different outputs.
  MultiHeadInput tiled = in;
  tiled.q = {in.q[0], in.q[1], in.q[0], in.q[1], in.q[0], in.q[1]};
  tiled.k = {in.k[0], in.k[1], in.k[0], in.k[1], in.k[0], in.k[1]};
  EXPECT_GT(max_rel_err(run_multihead(Rule::GatedDelta, in, 0.5, false),
                        run_multihead(Rule::GatedDelta, tiled, 0.5, false)), 0.1);
}

TEST(Equiv_MultiHead, headsMatchSingleHeadCallsWithInitialStates) {
  test::Rng rng(test::test_seed(10, "Equiv_MultiHead.headsMatchSingleHeadCallsWithInitialStates"));
  const MultiHeadInput in = make_input(2, 4, rng);
  std::vector<Mat> S0;
  for (int j = 0; j < 4; ++j) S0.push_back(rng.normal(kDk, kDv));
  const auto rec = run_multihead(Rule::GatedDelta, in, 0.5, false, &S0);
  const auto chk = run_multihead(Rule::GatedDelta, in, 0.5, true, &S0);
  ASSERT_EQ(rec.size(), 4u);
  for (std::size_t j = 0; j < 4; ++j) {
    const HeadResult one = gated_delta_recurrent(in.q[j / 2], in.k[j / 2], in.v[j], in.beta[j], in.g[j], 0.5, &S0[j]);
    EXPECT_EQ(rec[j].o, one.o) << j;
    EXPECT_EQ(rec[j].state, one.state) << j;
  }
  // chunked = recurrent, bound n eps with n = T + dk + chunk as in Equiv_Chunked, factor 2 margin.
  EXPECT_LE(max_rel_err(chk, rec), 2 * test::kEps * (kT + kDk + 64));
}

TEST(Equiv_MultiHead, mamba2GroupsEqualExplicitRepetition) {
  test::Rng rng(test::test_seed(11, "Equiv_MultiHead.mamba2GroupsEqualExplicitRepetition"));
  const std::size_t G = 2, H = 6;
  std::vector<Mat> C, B, x;
  std::vector<Vec> dt;
  for (std::size_t g = 0; g < G; ++g) {
    C.push_back(rng.normal(kT, kDk));
    B.push_back(rng.normal(kT, kDk));
  }
  for (std::size_t h = 0; h < H; ++h) {
    x.push_back(rng.normal(kT, kDv));
    dt.push_back(rng.uniform(kT, 0.01, 1.0));
  }
  const Vec A = -rng.uniform(H, 0.1, 3.0), D = rng.normal(H, 1);
  const auto grouped = mamba2_multihead(C, B, x, dt, A, D, false);
  const auto repeated = mamba2_multihead(repeat_interleave(C, 3), repeat_interleave(B, 3), x, dt, A, D, false);
  EXPECT_EQ(max_rel_err(grouped, repeated), 0.0);
  const HeadResult h4 = mamba2_ssd_recurrent(C[1], B[1], x[4], dt[4], A(4), D(4));  // head 4 reads group 4 / 3 = 1
  EXPECT_EQ(grouped[4].o, h4.o);
  EXPECT_LE(max_rel_err(mamba2_multihead(C, B, x, dt, A, D, true), grouped), 2 * test::kEps * (kT + kDk + 64));
}

}  // namespace
}  // namespace statecut::ref
