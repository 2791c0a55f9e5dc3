// Equiv_Chunked: the chunked (WY/UT, SSD) form of every rule equals its recurrent form, for
// T in {1, 63, 64, 65, 127, 200} (below, at, above and across chunk boundaries), chunk 64 and 16,
// dk in {1, 89} with dv = 33 != dk, with and without an initial state.
#include <sstream>

#include "reference/delta_rule.h"
#include "reference/gated_delta_rule.h"
#include "reference/general_rule.h"
#include "reference/linear_attention.h"
#include "reference/mamba2_ssd.h"
#include "tests/ref/ref_test_util.h"

namespace statecut::ref {
namespace {

enum class Kind { Linear, Delta, GatedDelta, General, Mamba2 };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Linear: return "linear";
    case Kind::Delta: return "delta";
    case Kind::GatedDelta: return "gated_delta";
    case Kind::General: return "general";
    case Kind::Mamba2: return "mamba2";
  }
  return "?";
}

struct Case {
  Kind kind;
  Index T, chunk, dk, dv;
  bool with_state;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::ostringstream s;
  s << kind_name(c.kind) << "_T" << c.T << "_C" << c.chunk << "_dk" << c.dk << "_dv" << c.dv
    << (c.with_state ? "_S0" : "_zero");
  return s.str();
}

void PrintTo(const Case& c, std::ostream* os) { *os << case_name({c, 0}); }  // readable ctest names

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (Kind kind : {Kind::Linear, Kind::Delta, Kind::GatedDelta, Kind::General, Kind::Mamba2})
    for (Index T : {1, 63, 64, 65, 127, 200})
      for (Index chunk : {64, 16})
        for (Index dk : {1, 89})
          for (bool s0 : {false, true}) out.push_back({kind, T, chunk, dk, 33, s0});
  return out;
}

struct Pair {
  HeadResult rec, chk;
};

/// Runs both forms on one set of meaningful inputs for the rule.
Pair run_both(const Case& c, test::Rng& rng) {
  const Mat q = rng.normal(c.T, c.dk);
  const Mat k = rng.unit_rows(c.T, c.dk);  // L2-normalised keys as the models feed them
  const Mat v = rng.normal(c.T, c.dv);
  const Mat S0m = rng.normal(c.dk, c.dv);
  const Mat* S0 = c.with_state ? &S0m : nullptr;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.dk));
  const Vec beta = rng.uniform(c.T, 0.0, 1.0);
  switch (c.kind) {
    case Kind::Linear:
      return {linear_attention_recurrent(q, k, v, scale, S0), linear_attention_chunked(q, k, v, scale, S0, c.chunk)};
    case Kind::Delta:
      return {delta_rule_recurrent(q, k, v, beta, scale, S0), delta_rule_chunked(q, k, v, beta, scale, S0, c.chunk)};
    case Kind::GatedDelta: {
      const Vec g = rng.log_gates(c.T);
      return {gated_delta_recurrent(q, k, v, beta, g, scale, S0),
              gated_delta_chunked(q, k, v, beta, g, scale, S0, c.chunk)};
    }
    case Kind::General: {
      // alpha in [-1, 1] with exact zeros (state resets) every 23 steps; beta = alpha - s, s in [-1, 1],
      // keeps both eigenvalues (alpha and s) of alpha I - beta k k^T in [-1, 1]: a bounded state.
      Vec alpha = rng.uniform(c.T, -1.0, 1.0);
      for (Index t = 5; t < c.T; t += 23) alpha(t) = 0.0;
      const Vec b = alpha - rng.uniform(c.T, -1.0, 1.0);
      const Vec gamma = rng.normal(c.T, 1);
      return {general_rule_recurrent(q, k, v, alpha, b, gamma, scale, S0),
              general_rule_chunked(q, k, v, alpha, b, gamma, scale, S0, c.chunk)};
    }
    case Kind::Mamba2: {
      const Vec dt = rng.normal(c.T, 1).unaryExpr([](double x) { return softplus(x - 1.0); });
      const double A = -std::exp(rng.uniform(1, -1.0, 2.0)(0));
      return {mamba2_ssd_recurrent(q, k, v, dt, A, 0.7, S0), mamba2_ssd_chunked(q, k, v, dt, A, 0.7, S0, c.chunk)};
    }
  }
  return {};
}

class Equiv_Chunked : public testing::TestWithParam<Case> {};

TEST_P(Equiv_Chunked, chunkedMatchesRecurrent) {
  const Case& c = GetParam();
  test::Rng rng(test::test_seed(1000 + c.T * 7 + c.dk, case_name({c, 0})));
  const Pair p = run_both(c, rng);
  ASSERT_EQ(p.chk.o.rows(), c.T);
  ASSERT_EQ(p.chk.o.cols(), c.dv);
  ASSERT_EQ(p.chk.state.rows(), c.dk);
  ASSERT_EQ(p.chk.state.cols(), c.dv);
  const double eo = test::rel_err(p.chk.o, p.rec.o), es = test::rel_err(p.chk.state, p.rec.state);
  // Worst-case forward error of a rounded length-n sum is n eps, with n = T (steps) + dk (dot products) + chunk
  // (the unit-triangular solve); all transitions here are contractive, so no growth beyond that. Factor 2 is the
  // margin: the largest error measured over all 240 cases is 0.16 eps (T + dk + chunk).
  const double bound = 2.0 * test::kEps * static_cast<double>(c.T + c.dk + c.chunk);
  EXPECT_LE(eo, bound) << "max-abs " << test::max_abs(p.chk.o, p.rec.o);
  EXPECT_LE(es, bound) << "max-abs " << test::max_abs(p.chk.state, p.rec.state);
  std::ostringstream rec;
  rec << std::scientific << eo << " state " << es << " bound " << bound;
  RecordProperty("rel_err", rec.str());
}

INSTANTIATE_TEST_SUITE_P(AllRules, Equiv_Chunked, testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace statecut::ref

namespace statecut::ref {
namespace {

// After a run of strong decays the within-chunk cumulative log-decay is large (here about -640): a chunked form
// that takes exp(G_i - G_j) of two large cumsums loses |G| eps in every decay factor; ours must not.
TEST(Equiv_ChunkedDecay, chunkedKeepsAccuracyAfterStrongDecay) {
  test::Rng rng(test::test_seed(31, "Equiv_ChunkedDecay.chunkedKeepsAccuracyAfterStrongDecay"));
  const Index T = 64, dk = 1, dv = 33;
  Vec g = Vec::Constant(T, -1e-3);
  g.head(32).setConstant(-20.0);
  const Mat q = rng.normal(T, dk), k = rng.unit_rows(T, dk), v = rng.normal(T, dv);
  const Vec beta = rng.uniform(T, 0, 1);
  const HeadResult r = gated_delta_recurrent(q, k, v, beta, g, 1.0);
  const HeadResult c = gated_delta_chunked(q, k, v, beta, g, 1.0);
  // Mamba-2 with dt = -g, A = -1 has the same decays.
  const HeadResult mc = mamba2_ssd_chunked(q, k, v, -g, -1.0, 0.0);
  const HeadResult mr = mamba2_ssd_recurrent(q, k, v, -g, -1.0, 0.0);
  // Same n eps (T + dk + chunk) bound as Equiv_Chunked: the large cumsum must not enter it.
  const double bound = 2 * test::kEps * double(T + dk + 64);
  EXPECT_LE(test::rel_err(c.o, r.o), bound);
  EXPECT_LE(test::rel_err(c.state, r.state), bound);
  EXPECT_LE(test::rel_err(mc.o, mr.o), bound);
  EXPECT_LE(test::rel_err(mc.state, mr.state), bound);
}

}  // namespace
}  // namespace statecut::ref
