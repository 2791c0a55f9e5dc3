// Unit_Recurrence: hand-computed steps of every rule (integer or dyadic inputs, so the arithmetic is exact),
// and the general rule reducing to each special case (linear, delta, gated delta, Mamba-2).
#include "reference/delta_rule.h"
#include "reference/gated_delta_rule.h"
#include "reference/general_rule.h"
#include "reference/linear_attention.h"
#include "reference/mamba2_ssd.h"
#include "tests/ref/ref_test_util.h"

namespace statecut::ref {
namespace {

using test::kEps;

Mat m22(double a, double b, double c, double d) {
  Mat m(2, 2);
  m << a, b, c, d;
  return m;
}
Vec v2(double a, double b) { return Eigen::Vector2d(a, b); }

TEST(Unit_Recurrence, linearAttentionHandComputed) {
  const Mat q = m22(1, 0, 0, 1), k = m22(1, 2, 3, -1), v = m22(1, 4, 2, 5);
  // S1 = k1 v1^T = [[1 4][2 8]]; S2 = S1 + k2 v2^T = [[7 19][0 3]]; o_t = 2 S_t^T q_t.
  const Mat o = 2 * m22(1, 4, 0, 3);
  for (Index chunk : {1, 2, 64}) {
    const HeadResult c = linear_attention_chunked(q, k, v, 2.0, nullptr, chunk);
    EXPECT_EQ(c.o, o) << chunk;
    EXPECT_EQ(c.state, m22(7, 19, 0, 3)) << chunk;
  }
  const HeadResult r = linear_attention_recurrent(q, k, v, 2.0);
  EXPECT_EQ(r.o, o);
  EXPECT_EQ(r.state, m22(7, 19, 0, 3));
}

TEST(Unit_Recurrence, deltaRuleWithUnitKeyAndBetaOneReplacesARow) {
  const Mat S0 = m22(1, 2, 3, 4);
  const Mat q = m22(1, 1, 0, 1), k = m22(1, 0, 0, 1), v = m22(5, 6, 1, 0);
  const Vec beta = v2(1.0, 0.5);
  // t=1: v' = v1 - S0^T e1 = [4 4], S = [[5 6][3 4]] (row 1 := v1), o = S^T [1 1] = [8 10].
  // t=2: v' = 0.5 ([1 0] - [3 4]) = [-1 -2], S = [[5 6][2 2]], o = S^T e2 = [2 2].
  const HeadResult r = delta_rule_recurrent(q, k, v, beta, 1.0, &S0);
  EXPECT_EQ(r.o, m22(8, 10, 2, 2));
  EXPECT_EQ(r.state, m22(5, 6, 2, 2));
  const HeadResult c = delta_rule_chunked(q, k, v, beta, 1.0, &S0, 2);
  EXPECT_LE(test::rel_err(c.o, r.o), 4 * kEps);  // the triangular solve rounds differently; a few ulps
  EXPECT_LE(test::rel_err(c.state, r.state), 4 * kEps);
}

TEST(Unit_Recurrence, gatedDeltaDecaysBeforeTheDeltaStep) {
  const Mat S0 = m22(1, 2, 3, 4);
  const Mat q = Mat::Ones(1, 2), k = Mat(Eigen::RowVector2d(1, 0)), v = Mat(Eigen::RowVector2d(5, 6));
  const Vec beta = Vec::Ones(1), g = Vec::Constant(1, std::log(0.5));
  // S' = S0 / 2 = [[.5 1][1.5 2]], v' = [5 6] - [.5 1] = [4.5 5], S = [[5 6][1.5 2]], o = [6.5 8].
  const HeadResult r = gated_delta_recurrent(q, k, v, beta, g, 1.0, &S0);
  EXPECT_LE(test::rel_err(r.o, Mat(Eigen::RowVector2d(6.5, 8))), 4 * kEps);  // exp(log 0.5) is 0.5 within 1 ulp
  EXPECT_LE(test::rel_err(r.state, m22(5, 6, 1.5, 2)), 4 * kEps);
  const HeadResult c = gated_delta_chunked(q, k, v, beta, g, 1.0, &S0);
  EXPECT_LE(test::rel_err(c.o, r.o), 4 * kEps);
  EXPECT_LE(test::rel_err(c.state, r.state), 4 * kEps);
}

TEST(Unit_Recurrence, generalRuleAlphaZeroResetsAndNegativeAlphaFlips) {
  const Mat S0 = m22(1, 2, 3, 4);
  const Mat q = Mat::Ones(2, 2);
  Mat k(2, 2), v(2, 2);
  k << 1, -1, 0, 0;
  v << 3, 1, 0, 0;
  const Vec alpha = v2(0, -1), beta = v2(0, 0), gamma = v2(2, 0);
  // t=1: alpha = 0 forgets S0: S = 2 k v^T = [[6 2][-6 -2]];  t=2: alpha = -1: S = -S.
  for (bool chunked : {false, true}) {
    const HeadResult r = chunked ? general_rule_chunked(q, k, v, alpha, beta, gamma, 1.0, &S0)
                                 : general_rule_recurrent(q, k, v, alpha, beta, gamma, 1.0, &S0);
    EXPECT_EQ(r.state, m22(-6, -2, 6, 2)) << chunked;
    EXPECT_EQ(r.o, m22(0, 0, 0, 0)) << chunked;  // q = [1 1] sums the two opposite rows
  }
}

TEST(Unit_Recurrence, mamba2HandComputed) {
  Mat C(2, 1), B(2, 1), x(2, 1);
  C << 1, -1;
  B << 2, 1;
  x << 3, 1;
  const Vec dt = v2(0.5, 2.0);
  const Mat S0 = Mat::Ones(1, 1);
  // A = 0 (no decay): S1 = 1 + 2 (0.5 * 3) = 4, y1 = 4 + 2*3 = 10; S2 = 4 + 1 * 2 = 6, y2 = -6 + 2 = -4.
  for (bool chunked : {false, true}) {
    const HeadResult r = chunked ? mamba2_ssd_chunked(C, B, x, dt, 0.0, 2.0, &S0)
                                 : mamba2_ssd_recurrent(C, B, x, dt, 0.0, 2.0, &S0);
    EXPECT_EQ(r.o, Mat(Eigen::Vector2d(10, -4))) << chunked;
    EXPECT_EQ(r.state(0, 0), 6.0) << chunked;
  }
  // A = log(1/2) / 0.5: the first step halves S0, so S1 = 0.5 + 3.
  const HeadResult h = mamba2_ssd_recurrent(C.topRows(1), B.topRows(1), x.topRows(1), dt.head(1),
                                            2.0 * std::log(0.5), 0.0, &S0);
  EXPECT_NEAR(h.state(0, 0), 3.5, 4 * kEps);
}

/// The general rule with the coefficients of each special case, on random inputs.
class Unit_GeneralRule : public testing::Test {
 protected:
  void SetUp() override {
    test::Rng rng(test::test_seed(77, "Unit_GeneralRule"));
    q = rng.normal(T, dk);
    k = rng.unit_rows(T, dk);
    v = rng.normal(T, dv);
    S0 = rng.normal(dk, dv);
    beta = rng.uniform(T, 0, 1);
    g = rng.log_gates(T);
  }
  // The two sides apply the same T rank-one updates with differently ordered roundings: n eps with
  // n = T + dk (steps plus dot-product length), factor 2 as margin.
  double bound() const { return 2 * kEps * (T + dk); }
  static constexpr Index T = 65, dk = 89, dv = 33;
  Mat q, k, v, S0;
  Vec beta, g;
};

TEST_F(Unit_GeneralRule, reducesToLinearAttention) {
  const Vec one = Vec::Ones(T), zero = Vec::Zero(T);
  const HeadResult a = general_rule_recurrent(q, k, v, one, zero, one, 0.3, &S0);
  const HeadResult b = linear_attention_recurrent(q, k, v, 0.3, &S0);
  EXPECT_LE(test::rel_err(a.o, b.o), bound());
  EXPECT_LE(test::rel_err(a.state, b.state), bound());
}

TEST_F(Unit_GeneralRule, reducesToDeltaRule) {
  const HeadResult a = general_rule_recurrent(q, k, v, Vec::Ones(T), beta, beta, 0.3, &S0);
  const HeadResult b = delta_rule_recurrent(q, k, v, beta, 0.3, &S0);
  EXPECT_LE(test::rel_err(a.o, b.o), bound());
  EXPECT_LE(test::rel_err(a.state, b.state), bound());
}

TEST_F(Unit_GeneralRule, reducesToGatedDeltaRule) {
  const Vec alpha = g.array().exp();
  const HeadResult a = general_rule_chunked(q, k, v, alpha, alpha.cwiseProduct(beta), beta, 0.3, &S0, 16);
  const HeadResult b = gated_delta_recurrent(q, k, v, beta, g, 0.3, &S0);
  EXPECT_LE(test::rel_err(a.o, b.o), bound());
  EXPECT_LE(test::rel_err(a.state, b.state), bound());
}

TEST_F(Unit_GeneralRule, reducesToMamba2Ssd) {
  const Vec dt = beta.array() + 0.1;
  const double A = -1.5, D = 0.25;
  const HeadResult a = general_rule_recurrent(q, k, dt.asDiagonal() * v, (dt * A).array().exp(), Vec::Zero(T),
                                              Vec::Ones(T), 1.0, &S0);
  const HeadResult b = mamba2_ssd_recurrent(q, k, v, dt, A, D, &S0);
  EXPECT_LE(test::rel_err(a.o, b.o - D * v), bound());  // the SSD adds the D x skip; the general rule has none
  EXPECT_LE(test::rel_err(a.state, b.state), bound());
}

}  // namespace
}  // namespace statecut::ref
