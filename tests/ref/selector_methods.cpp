// Each selector on a small hand-worked case: the expected sets follow from the formulas of
// DESIGN.md §4 by hand (comments show the scores), and were chosen so that the usual slips — a
// missing abs, rms ignored, |sum| instead of sum|.|, one side dropped — give a different answer.
#include "reference/pca.h"
#include "reference/rrqr.h"
#include "reference/selection_budget.h"
#include "reference/selectors.h"
#include "tests/ref/ref_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace {
using namespace statecut::ref;
using Set = std::vector<Index>;

struct Small {
  Mat wq{4, 3}, wk{4, 3}, gq{4, 3}, gk{4, 3};
  Vec rms{3};
  Small() {
    wq << 1, -2, 0, 0, 0, 1, -3, 1, 1, 1, 1, -1;
    wk << 0, 0, 1, 2, -2, 2, 0, 1, 0, -1, 0, 0;
    gq << 1, 1, 1, 5, 5, 5, 0.1, 0.1, 0.1, 1, -1, -1;
    gk << 1, 1, 1, 0, 0, 0, 0, 3, 0, 2, 2, 2;
    rms << 1, 0.1, 2;
  }
  LayerInputs layer() const {
    LayerInputs in;
    in.heads.push_back({wq, wk, gq, gk, Mat(), Mat()});
    in.rms = rms;
    return in;
  }
};

Set run(SelectMethod m, ScoreSide side, Index keep) {
  SelectOptions o;
  o.method = m;
  o.side = side;
  o.keep = keep;
  return select_channels(Small().layer(), o).at(0);
}

TEST(Unit_SelectorL1, rowL1OfQPlusK) {
  // |Wq| row sums 3 1 5 3, |Wk| row sums 1 6 1 1, joint 4 7 6 4 (signed sums would give 0 3 0 0)
  EXPECT_EQ(run(SelectMethod::L1, ScoreSide::Joint, 3), (Set{0, 1, 2}));
  EXPECT_EQ(run(SelectMethod::L1, ScoreSide::Joint, 2), (Set{1, 2}));
  EXPECT_EQ(run(SelectMethod::L1, ScoreSide::QOnly, 3), (Set{0, 2, 3}));
  EXPECT_EQ(run(SelectMethod::L1, ScoreSide::KOnly, 3), (Set{0, 1, 2}));
  const Vec s = l1_scores(Small().wq, Small().wk, ScoreSide::Joint);
  EXPECT_EQ(s, (Vec(4) << 4, 7, 6, 4).finished());
}

TEST(Unit_SelectorSWanda, weightMagnitudeTimesInputRms) {
  // (|Wq| + |Wk|) rms with rms = (1, 0.1, 2): q 1.2 2 5.1 3.1, k 2 6.2 0.1 1, joint 3.2 8.2 5.2 4.1
  EXPECT_EQ(run(SelectMethod::SWanda, ScoreSide::Joint, 3), (Set{1, 2, 3}));
  EXPECT_EQ(run(SelectMethod::SWanda, ScoreSide::QOnly, 3), (Set{1, 2, 3}));
  EXPECT_EQ(run(SelectMethod::SWanda, ScoreSide::KOnly, 3), (Set{0, 1, 3}));
  const Vec s = swanda_scores(Small().wq, Small().wk, Small().rms, ScoreSide::Joint);
  EXPECT_NEAR((s - (Vec(4) << 3.2, 8.2, 5.2, 4.1).finished()).norm(), 0.0, 1e-14);
}

TEST(Unit_SelectorGrad, elementwiseAbsOfWeightTimesGradient) {
  // sum_j |W G|: q 3 5 0.5 3, k 1 0 3 2, joint 4 5 3.5 5; |sum_j W G| would give 2 5 3.1 3 -> {1,2,3}
  EXPECT_EQ(run(SelectMethod::Grad, ScoreSide::Joint, 3), (Set{0, 1, 3}));
  EXPECT_EQ(run(SelectMethod::Grad, ScoreSide::QOnly, 3), (Set{0, 1, 3}));
  EXPECT_EQ(run(SelectMethod::Grad, ScoreSide::KOnly, 3), (Set{0, 2, 3}));
  EXPECT_EQ(run(SelectMethod::Grad, ScoreSide::Joint, 2), (Set{1, 3}));
}

TEST(Unit_SelectorRand, seededSubsetIsFixedAcrossPlatforms) {
  // mt19937_64 output is fixed by the C++ standard and the draw uses no std distribution
  LayerInputs in;
  in.heads.resize(2);
  in.heads[0].wq = in.heads[1].wq = Mat::Zero(8, 1);
  SelectOptions o;
  o.method = SelectMethod::Rand;
  o.keep = 4;
  const auto sel = select_channels(in, o);
  EXPECT_EQ(sel[0], (Set{0, 1, 5, 7}));  // golden: seed 42, layer 0, head 0 (stream 0)
  EXPECT_EQ(sel[1], (Set{0, 1, 4, 6}));  // head 1 has its own generator (stream 1, select_rng.h)
  o.seed = 43;
  EXPECT_NE(select_channels(in, o), sel);
}

TEST(Unit_SelectorDrrqr, swapsFollowTheDeterminantRatio) {
  // columns a=(1,0), b=(.7,.69), c=(.7,-.68): QRCP takes a then b (residual .69 > .68), det(a,b)=.69;
  // det(b,c)=.959, so swapping a for c grows |det| by rho = 1.39: kept at f = 1.5, done at f = 1.2.
  Mat M(2, 3);
  M << 1.0, 0.7, 0.7, 0.0, 0.69, -0.68;
  EXPECT_EQ(drrqr_pivots(M, 2, {1.5}), (Set{0, 1}));
  Set s = drrqr_pivots(M, 2, {1.2});
  std::sort(s.begin(), s.end());
  EXPECT_EQ(s, (Set{1, 2}));
  RrqrOptions faithful{1.2};
  faithful.mode = DrrqrMode::Faithful;
  s = drrqr_pivots(M, 2, faithful);
  std::sort(s.begin(), s.end());
  EXPECT_EQ(s, (Set{1, 2}));
  const RrqrResult r = strong_rrqr(M, 2, {1.2});
  ASSERT_EQ(r.log_abs_det.size(), 2u);
  EXPECT_NEAR(std::exp(r.log_abs_det[1] - r.log_abs_det[0]), (0.7 * 0.68 + 0.69 * 0.7) / 0.69, 1e-12);
}

TEST(Unit_SelectorDrrqr, sidesPickTheirOwnMatrix) {
  // Q lives on channels {0, 1}, K on {2, 3}: q-only must keep {0,1}, k-only {2,3}
  LayerInputs in;
  HeadInputs h;
  h.q = Mat::Zero(6, 4);
  h.k = Mat::Zero(6, 4);
  h.q.topLeftCorner(2, 2) = Mat::Identity(2, 2) * 3.0;
  h.q.block(2, 2, 2, 2) = Mat::Identity(2, 2) * 0.01;
  h.k.block(0, 2, 2, 2) = Mat::Identity(2, 2) * 3.0;
  h.k.block(2, 0, 2, 2) = Mat::Identity(2, 2) * 0.01;
  in.heads.push_back(h);
  SelectOptions o;
  o.keep = 2;
  o.side = ScoreSide::QOnly;
  EXPECT_EQ(select_channels(in, o)[0], (Set{0, 1}));
  o.side = ScoreSide::KOnly;
  EXPECT_EQ(select_channels(in, o)[0], (Set{2, 3}));
}

TEST(Unit_SelectorPca, topEigenvectorsInOrderAndAdversarial) {
  const Mat cov = (Vec(3) << 3, 1, 2).finished().asDiagonal();
  Mat top(2, 3), bottom(2, 3);
  top << 1, 0, 0, 0, 0, 1;
  bottom << 0, 1, 0, 0, 0, 1;
  EXPECT_NEAR((pca_rotation(cov, 2) - top).norm(), 0.0, 1e-14);
  EXPECT_NEAR((pca_rotation(cov, 2, true) - bottom).norm(), 0.0, 1e-14);
  // The eigenvalues in the rows' order, all three of them.
  EXPECT_NEAR((pca_decomposition(cov, 2).eigenvalues - Vec::LinSpaced(3, 3, 1)).norm(), 0.0, 1e-14);
  EXPECT_NEAR((pca_decomposition(cov, 2, true).eigenvalues - Vec::LinSpaced(3, 1, 3)).norm(), 0.0, 1e-14);
}

TEST(Unit_SelectorPca, keyOnlyQueryOnlyAndJointStatistics) {
  // K spreads along e1 (4 of 6 rows), Q only along e2; joint averages: e2 (8) beats e1 (4)
  Mat k(6, 2), q(6, 2);
  k << 1, 0, -1, 0, 1, 0, -1, 0, 0, 1, 0, -1;
  q << 0, 1, 0, -1, 0, 1, 0, -1, 0, 1, 0, -1;
  LayerInputs in;
  in.heads.push_back({Mat(), Mat(), Mat(), Mat(), q, k});
  SelectOptions o;
  o.method = SelectMethod::Pca;
  o.keep = 1;
  o.side = ScoreSide::KOnly;
  EXPECT_NEAR((pca_rotations(in, o)[0] - (Mat(1, 2) << 1, 0).finished()).norm(), 0.0, 1e-12);
  o.side = ScoreSide::QOnly;
  EXPECT_NEAR((pca_rotations(in, o)[0] - (Mat(1, 2) << 0, 1).finished()).norm(), 0.0, 1e-12);
  o.side = ScoreSide::Joint;
  EXPECT_NEAR((pca_rotations(in, o)[0] - (Mat(1, 2) << 0, 1).finished()).norm(), 0.0, 1e-12);
  // covariance of the L2-normed keys: (sum x x^T - n mu mu^T)/(n-1) = diag(4, 2)/5 / (1 + 1e-6)
  PcaStats s;
  s.add(l2norm_rows_fla(k));
  EXPECT_NEAR(s.covariance()(0, 0), 0.8 / (1 + 1e-6), 1e-15);
  EXPECT_NEAR(s.covariance()(1, 1), 0.4 / (1 + 1e-6), 1e-15);
}

// What calibration streams: the moments of one side alone, no raw activations. They select (the raw matrices are
// not needed, and not asked for); and the joint statistics average q's and k's sums and outer products term by term.
TEST(Unit_SelectorPca, streamedStatisticsOfOneSideSelectWithoutActivations) {
  Mat k(6, 2);
  k << 1, 0, -1, 0, 1, 0, -1, 0, 0, 1, 0, -1;
  LayerInputs in;
  HeadInputs h;
  h.pca_k.add(l2norm_rows_fla(k));
  in.heads.push_back(h);
  SelectOptions o;
  o.method = SelectMethod::Pca;
  o.keep = 1;
  o.side = ScoreSide::KOnly;
  EXPECT_NEAR((pca_rotations(in, o)[0] - (Mat(1, 2) << 1, 0).finished()).norm(), 0.0, 1e-12);

  PcaStats a, b;
  a.sum = (Vec(2) << 2, 0).finished(), a.outer = (Mat(2, 2) << 4, 0, 0, 2).finished(), a.n = 6;
  b.sum = (Vec(2) << 0, 4).finished(), b.outer = (Mat(2, 2) << 0, 2, 2, 6).finished(), b.n = 6;
  const PcaStats j = average_stats(a, b);
  EXPECT_EQ(j.sum, (Vec(2) << 1, 2).finished());
  EXPECT_EQ(j.outer, (Mat(2, 2) << 2, 1, 1, 4).finished());
  EXPECT_EQ(j.n, 6);
}

TEST(Unit_SelectorPca, symmetryCheckIsRelativeToTheCovarianceScale) {
  // Unnormalised features of scale 1e3 give covariance entries ~1e6; forming it in another summation
  // order leaves its two triangles a few ulps apart (here 4 ulps of 1e5, ~6e-11 absolute). That is rounding,
  // not asymmetry: the check is relative (1e-12 of max|cov|) and must accept it, and the result is that of
  // the lower triangle (what the symmetric eigensolver reads).
  Mat big(3, 3);
  big << 4e6, 1e5, 0, 1e5, 2e6, 3e4, 0, 3e4, 1e6;
  Mat skewed = big;
  for (int u = 0; u < 4; ++u) skewed(0, 1) = std::nextafter(skewed(0, 1), 1e300);
  ASSERT_NE(skewed(0, 1), skewed(1, 0));
  Mat t;
  ASSERT_NO_THROW(t = pca_rotation(skewed, 2));
  EXPECT_EQ(t, pca_rotation(big, 2));
  // At unit scale (max|cov| = 1) an asymmetry of 5e-10 is 2e6 ulps, not rounding: rejected.
  Mat unit = big / 4e6;
  unit(0, 1) += 5e-10;
  EXPECT_THROW(pca_rotation(unit, 2), ShapeError);
  // And at the large scale a relative 1e-6 asymmetry (a real bug upstream) is still rejected.
  Mat wrong = big;
  wrong(0, 1) *= 1.0 + 1e-6;
  EXPECT_THROW(pca_rotation(wrong, 2), ShapeError);
}

TEST(Unit_SelectionBudget, paperRatiosGiveThePaperDims) {
  EXPECT_EQ(budget_from_ratio(128, 0.3), 89);
  EXPECT_EQ(budget_from_ratio(128, 0.4), 76);
  EXPECT_EQ(budget_from_ratio(128, 0.5), 64);
  EXPECT_EQ(budget_from_ratio(128, 0.75), 32);
  EXPECT_EQ(budget_from_ratio(256, 0.3), 179);
  EXPECT_EQ(budget_from_ratio(256, 0.4), 153);
  EXPECT_EQ(budget_from_ratio(256, 0.5), 128);
  EXPECT_EQ(budget_from_ratio(256, 0.75), 64);
  EXPECT_EQ(budget_from_ratio(4, 0.99), 1);  // never below one channel
}

// floor(dk·(1 − ratio)) of the exact product: in doubles 20·(1 − 0.8) is 3.9999999999999996, which kept 3 channels
// where 4 are meant (and 0.9 of 20 kept 1, 0.8 of 10 kept 1); a product that is not an integer still floors.
TEST(Unit_SelectionBudget, ratiosWhoseProductIsAnIntegerKeepThatInteger) {
  EXPECT_EQ(budget_from_ratio(20, 0.8), 4);
  EXPECT_EQ(budget_from_ratio(20, 0.9), 2);
  EXPECT_EQ(budget_from_ratio(10, 0.8), 2);
  EXPECT_EQ(budget_from_ratio(200, 0.8), 40);
  for (Index dk : {5, 10, 20, 40, 60, 100, 1000})
    for (int tenths = 1; tenths <= 9; ++tenths)
      EXPECT_EQ(budget_from_ratio(dk, tenths / 10.0), std::max<Index>(1, dk * (10 - tenths) / 10)) << dk << " " << tenths;
  EXPECT_EQ(budget_from_ratio(128, 0.3), 89);  // 89.6
  EXPECT_EQ(budget_from_ratio(256, 0.123456789), 224);  // 224.39...
}

TEST(BadInput_SelectionBudget, rejectsRatiosAndKeepsOutOfRange) {
  EXPECT_THROW(budget_from_ratio(128, 0.0), ShapeError);
  EXPECT_THROW(budget_from_ratio(128, 1.0), ShapeError);
  EXPECT_THROW(budget_from_ratio(128, -0.5), ShapeError);
  EXPECT_THROW(budget_from_ratio(128, std::nan("")), ShapeError);
  EXPECT_THROW(validate_keep(0, 8), ShapeError);
  EXPECT_THROW(validate_keep(9, 8), ShapeError);
  EXPECT_EQ(validate_keep(8, 8), 8);
  // the messages say the rule and the value given
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const ShapeError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { validate_keep(1, 0); }).find("dk must be >= 1, got 0"), std::string::npos);
  // keep 1 is the smallest budget, so the rule reads ">= 1" (seed 307: "> 1" in the message survived)
  EXPECT_EQ(message([] { validate_keep(0, 8); }), "budget: keep must be >= 1, got 0");
  EXPECT_EQ(message([] { validate_keep(9, 8); }), "budget: keep = 9 exceeds the 8 channels of a head");
  EXPECT_EQ(validate_keep(1, 8), 1);
  // options with neither keep nor a ratio set: the default ratio 0 is refused by name, not a silent budget
  SelectOptions unset;
  unset.method = SelectMethod::L1;
  const std::string m = message([&] { select_layer(Small().layer(), unset); });
  EXPECT_NE(m.find("ratio must lie in the open interval (0, 1), got 0.0"), std::string::npos) << m;
}

TEST(BadInput_Selector, missingOrMisshapedInputsNameTheProblem) {
  LayerInputs in = Small().layer();
  SelectOptions o;
  o.method = SelectMethod::SWanda;
  o.keep = 2;
  in.rms = Vec();
  EXPECT_THROW(select_channels(in, o), ShapeError);
  o.method = SelectMethod::Pca;
  EXPECT_THROW(select_channels(Small().layer(), o), ShapeError);
  o.method = SelectMethod::Grad;
  in = Small().layer();
  in.heads.push_back(in.heads[0]);
  in.heads[1].grad_wk = Mat::Zero(3, 3);
  try {
    select_channels(in, o);
    FAIL() << "mis-shaped gradient accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("head 1"), std::string::npos) << e.what();
  }
}

TEST(BadInput_SelectorPca, rankAboveTheHeadDimensionIsRejected) {
  const Mat cov = (Vec(3) << 3, 1, 2).finished().asDiagonal();
  STATECUT_EXPECT_SHAPE_ERROR(pca_rotation(cov, 4), "rank r = 4 must lie in 1..3");
  STATECUT_EXPECT_SHAPE_ERROR(pca_rotation(cov, 0), "rank r = 0 must lie in 1..3");
}

TEST(BadInput_SelectorScores, weightsDifferingInOneDimensionAreRejected) {
  // Wq and Wk of one head must have the same shape; either dimension alone differing is an error.
  STATECUT_EXPECT_SHAPE_ERROR(l1_scores(Mat::Ones(4, 3), Mat::Ones(4, 2), ScoreSide::Joint), "Wq is 4x3 but Wk is 4x2");
  STATECUT_EXPECT_SHAPE_ERROR(l1_scores(Mat::Ones(4, 3), Mat::Ones(3, 3), ScoreSide::Joint), "Wq is 4x3 but Wk is 3x3");
}

TEST(Unit_SelectionBudget, singleChannelHeadKeepsItsChannel) {
  // dk = 1 is a valid head (the floor of the budget is 1 channel): any ratio keeps it, keep = 1 is valid.
  EXPECT_EQ(budget_from_ratio(1, 0.5), 1);
  EXPECT_EQ(budget_from_ratio(1, 0.75), 1);
  EXPECT_EQ(validate_keep(1, 1), 1);
}

TEST(BadInput_SelectRng, belowZeroNamesTheValidRange) {
  SelectRng rng(1, 0);
  STATECUT_EXPECT_SHAPE_ERROR(rng.below(0), "SelectRng::below: n must be >= 1");
  EXPECT_EQ(rng.below(1), 0u);  // the one value in [0, 1)
}

TEST(BadInput_Selector, misshapedHeadMessageGivesFoundAndExpectedShapes) {
  SelectOptions o;
  o.method = SelectMethod::Grad;
  o.keep = 2;
  LayerInputs in = Small().layer();
  in.heads.push_back(in.heads[0]);
  in.heads[1].grad_wk = Mat::Zero(3, 3);
  STATECUT_EXPECT_SHAPE_ERROR(select_channels(in, o), "select: head 1: dL/dWk is 3x3, expected 4x3");
  // A layer whose first head has no input features (hidden = 0, taken from head 0): the expected shape
  // is still a number, 4x0, not a wildcard.
  o.method = SelectMethod::L1;
  LayerInputs empty;
  empty.heads.push_back({Mat(4, 0), Mat(4, 0), Mat(), Mat(), Mat(), Mat()});
  empty.heads.push_back(Small().layer().heads[0]);
  STATECUT_EXPECT_SHAPE_ERROR(select_channels(empty, o), "select: head 1: Wq is 4x3, expected 4x0");
}

TEST(Unit_SelectorNames, everyMethodAndSideRoundTripsThroughItsName) {
  const std::vector<std::pair<SelectMethod, std::string>> methods = {
      {SelectMethod::Rand, "rand"}, {SelectMethod::L1, "l1"},       {SelectMethod::SWanda, "swanda"},
      {SelectMethod::Grad, "grad"}, {SelectMethod::Drrqr, "drrqr"}, {SelectMethod::Pca, "pca"}};
  for (const auto& [m, name] : methods) {
    EXPECT_EQ(method_name(m), name);
    EXPECT_EQ(method_from_name(name), m) << name;
  }
  const std::vector<std::pair<ScoreSide, std::string>> sides = {
      {ScoreSide::Joint, "qk"}, {ScoreSide::QOnly, "q"}, {ScoreSide::KOnly, "k"}};
  for (const auto& [s, name] : sides) {
    EXPECT_EQ(side_name(s), name);
    EXPECT_EQ(side_from_name(name), s) << name;
  }
}

TEST(BadInput_SelectorNames, unknownNameListsEveryAcceptedOne) {
  auto message = [](auto parse, const std::string& name) {
    try {
      parse(name);
    } catch (const ShapeError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message(method_from_name, "wanda"),
            "unknown selection method 'wanda' (expected rand, l1, swanda, grad, drrqr or pca)");
  EXPECT_EQ(message(side_from_name, "kq"), "unknown score side 'kq' (expected qk, q or k)");
  EXPECT_EQ(message(method_from_name, "L1"),  // names are case-sensitive
            "unknown selection method 'L1' (expected rand, l1, swanda, grad, drrqr or pca)");
}

}  // namespace
