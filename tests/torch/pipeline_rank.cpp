// Rank analysis (optimized/analysis/rank_analysis.h): the per-head recurrence equals the model's own state and the f64
// reference recurrence, u(t) equals ref::rank_utilization of the state after t tokens, u(0) = 0.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "optimized/analysis/rank_analysis.h"
#include "reference/delta_rule.h"
#include "reference/gated_delta_rule.h"
#include "reference/metrics.h"
#include "reference/primitives.h"
#include "tests/torch/pipeline_util.h"

namespace fs = std::filesystem;
using namespace statecut;

namespace {

const fs::path kRankFixtures = pipeline_test::fixture_root();


ref::Mat rank_to_mat(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kFloat64).contiguous();
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(c.data_ptr<double>(),
                                                                                                 c.size(0), c.size(1));
}

double rank_rel(const ref::Mat& a, const ref::Mat& b) { return (a - b).norm() / b.norm(); }

/// A fixture model and its recurrent forward with the boundary tensors, on T seeded random byte ids.
struct FixtureRun {
  std::unique_ptr<CausalLM> model;
  torch::Tensor ids;
  ForwardResult result;
};

FixtureRun run_rank_fixture(const std::string& name, int64_t T) {
  FixtureRun f;
  const uint64_t seed = pipeline_test::master_seed();
  f.model = load_causal_lm((kRankFixtures / name).string(), torch::kFloat32, torch::kCPU);
  torch::manual_seed(seed);
  f.ids = torch::randint(0, 256, {1, T}, torch::kInt64);
  ForwardOptions fo;
  fo.capture_boundary = true;
  fo.mode = RecurrenceMode::Recurrent;
  torch::NoGradGuard ng;
  f.result = f.model->forward(f.ids, fo);
  return f;
}

/// state_rank_curve's final state of every value head equals the model's own final state (value head h reads
/// key head h / (Hv / Hk); the gate only where the family has one).
void expect_states_equal_model(const FixtureRun& f, bool gated) {
  for (const auto& L : f.model->prunable_layers()) {
    const auto& b = f.result.boundary[L.layer];
    const int64_t Hk = b.k.size(2), Hv = b.v.size(2);
    for (int64_t h = 0; h < Hv; ++h) {
      torch::Tensor S;
      state_rank_curve(b.k[0].select(1, h / (Hv / Hk)), b.v[0].select(1, h), b.beta[0].select(1, h),
                       gated ? b.g[0].select(1, h) : torch::Tensor(), &S);
      // fp32 recurrence on both sides, same order of operations up to T·eps_f32.
      EXPECT_LT(rank_rel(rank_to_mat(S), rank_to_mat(b.final_state[0][h])), 1e-5) << "layer " << L.layer << " head " << h;
    }
  }
}

}  // namespace

TEST(Equiv_RankState, curveEqualsReferenceUtilizationAfterEveryPrefix) {
  const uint64_t seed = pipeline_test::master_seed();
  torch::manual_seed(seed);
  const int64_t T = 65, dk = 89, dv = 63;  // dk > dv: u divides by min(dk, dv) = 63
  const torch::Tensor k = torch::randn({T, dk}), v = torch::randn({T, dv}), beta = torch::rand({T});
  const torch::Tensor g = -torch::rand({T}) * 0.3;
  for (const bool gated : {false, true}) {
    torch::Tensor S;
    const auto u = state_rank_curve(k, v, beta, gated ? g : torch::Tensor(), &S);
    ASSERT_EQ(static_cast<int64_t>(u.size()), T);
    EXPECT_EQ(u[0], 0.f) << "u(0) is the zero state";
    const ref::Mat K = ref::l2norm_rows(rank_to_mat(k));
    for (const int64_t t : {1, 2, 17, 63, 64}) {
      const ref::Mat Kt = K.topRows(t), Vt = rank_to_mat(v).topRows(t), Q = ref::Mat::Zero(t, dk);
      const ref::Vec bt = rank_to_mat(beta.unsqueeze(1)).topRows(t).col(0);
      const ref::Vec gt = rank_to_mat(g.unsqueeze(1)).topRows(t).col(0);
      const ref::Mat St = gated ? ref::gated_delta_recurrent(Q, Kt, Vt, bt, gt, 1.0).state
                                : ref::delta_rule_recurrent(Q, Kt, Vt, bt, 1.0).state;
      // fp32 recurrence and power iteration vs f64 reference: the state carries ~t·eps_f32 relative error.
      EXPECT_NEAR(u[t], ref::rank_utilization(St), 1e-4 * ref::rank_utilization(St)) << "t=" << t << " gated=" << gated;
    }
    const ref::Mat ST = gated ? ref::gated_delta_recurrent(ref::Mat::Zero(T, dk), K, rank_to_mat(v), rank_to_mat(beta.unsqueeze(1)).col(0),
                                                           rank_to_mat(g.unsqueeze(1)).col(0), 1.0).state
                              : ref::delta_rule_recurrent(ref::Mat::Zero(T, dk), K, rank_to_mat(v), rank_to_mat(beta.unsqueeze(1)).col(0), 1.0).state;
    EXPECT_LT(rank_rel(rank_to_mat(S), ST), 1e-5) << "final state, gated=" << gated;  // T·eps_f32 with T = 65
  }
}

TEST(Equiv_RankState, ungatedStateOfDeltaNetIsTheModelsFinalState) {
  if (!fs::exists(kRankFixtures / "fla_delta_net")) GTEST_SKIP() << "no fixtures";
  const FixtureRun f = run_rank_fixture("fla_delta_net", 127);
  expect_states_equal_model(f, /*gated=*/false);
  RankOptions ro;
  const RankReport rep = analyze_rank(*f.model, f.ids, ro);
  ASSERT_EQ(rep.layers.size(), 2u);
  for (const auto& L : rep.layers)
    for (const auto& h : L.heads) {
      EXPECT_NEAR(h.final_u_power, h.final_u_exact, 1e-6 * h.final_u_exact) << "power iteration vs SVD";
      EXPECT_GE(h.mean, 0.0);
      EXPECT_LE(h.max, 1.0);
      EXPECT_EQ(h.u[0], 0.f);
    }
}

TEST(Equiv_RankState, gatedStateOfGatedDeltaNetIsTheModelsFinalState) {
  if (!fs::exists(kRankFixtures / "fla_gated_deltanet_gva")) GTEST_SKIP() << "no fixtures";
  const FixtureRun f = run_rank_fixture("fla_gated_deltanet_gva", 65);
  const auto& b0 = f.result.boundary[f.model->prunable_layers().front().layer];
  ASSERT_GT(b0.v.size(2), b0.k.size(2)) << "fixture has grouped values";
  expect_states_equal_model(f, /*gated=*/true);
}

// The final state's utilization ‖S‖_F² / (σ₁² min(dk, dv)), by power iteration and by SVD, where the state is not
// square (fla Gated DeltaNet with expand_v 2: dk 32, dv 64): the two agree, and both lie in (0, 1].
TEST(Equiv_RankState, finalUtilizationByPowerIterationIsTheSvdsForANonSquareState) {
  if (!fs::exists(kRankFixtures / "fla_gated_deltanet")) GTEST_SKIP() << "no fixtures";
  const FixtureRun f = run_rank_fixture("fla_gated_deltanet", 127);
  const RankReport rep = analyze_rank(*f.model, f.ids, RankOptions{});
  ASSERT_FALSE(rep.layers.empty());
  for (const auto& L : rep.layers) {
    ASSERT_NE(L.dk, L.dv) << "the fixture's state is square: this test needs dk != dv";
    for (const auto& h : L.heads) {
      EXPECT_NEAR(h.final_u_power, h.final_u_exact, 1e-6 * h.final_u_exact) << "power iteration vs SVD";
      EXPECT_GT(h.final_u_exact, 0.0);
      EXPECT_LE(h.final_u_exact, 1.0 + 1e-12);
    }
  }
}
