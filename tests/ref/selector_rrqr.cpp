// Strong RRQR on inputs with meaning: the Kahan matrix (QRCP fails, swaps repair), rank-deficient,
// exact rank r < k, duplicated and zero columns, geometric spectra, edge sizes, bad arguments.
#include "reference/rrqr.h"
#include "reference/select_rng.h"
#include "tests/ref/ref_test_util.h"
#include "tests/ref/selector_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>
#include <vector>

namespace {
using namespace statecut::ref;
using statecut::test::geometric;
using statecut::test::kahan;
using statecut::test::singular_values;
using statecut::test::with_spectrum;
constexpr double kEps = std::numeric_limits<double>::epsilon();

// Gu–Eisenstat Theorem 3.2 factor sqrt(1 + f^2 k (n-k)).
double ge_factor(double f, Index k, Index n) { return std::sqrt(1.0 + f * f * double(k) * double(n - k)); }

bool is_permutation(const std::vector<Index>& p, Index n) {
  std::vector<Index> s(p);
  std::sort(s.begin(), s.end());
  for (Index i = 0; i < n; ++i)
    if (s[i] != i) return false;
  return Index(p.size()) == n;
}

Mat columns(const Mat& M, const std::vector<Index>& idx, Index count) {
  Mat out(M.rows(), count);
  for (Index j = 0; j < count; ++j) out.col(j) = M.col(idx[j]);
  return out;
}

TEST(Unit_StrongRrqr, kahanQrcpKeepsOrderAndOverestimatesSmallestSingularValue) {
  const Index n = 90;
  const Mat K = kahan(n, 0.285);
  const QrcpResult q = qrcp(K);
  for (Index j = 0; j < n; ++j) ASSERT_EQ(q.perm[j], j) << "QRCP pivoted on Kahan; the test premise failed";
  const Vec sv = singular_values(K);
  // QRCP's last diagonal is s^(n-1) ~ 2e-2, far above sigma_n: the rank is not revealed.
  EXPECT_GT(std::abs(q.r(n - 1, n - 1)), 1e3 * ge_factor(1.5, n - 1, n) * sv(n - 1));
}

TEST(Unit_StrongRrqr, kahanSwapsRepairTheTrailingBlock) {
  const Index n = 90, k = n - 1;
  const Mat K = kahan(n, 0.285);
  const RrqrResult r = strong_rrqr(K, k);
  const Vec sv = singular_values(K);
  EXPECT_TRUE(r.certified);
  EXPECT_GE(r.swaps, 1);
  EXPECT_LE(r.max_rho, 1.5);
  // sigma_1(C) = |R_nn| <= sigma_n(M) sqrt(1 + f^2 k (n-k)): the rank is now revealed.
  EXPECT_LE(std::abs(r.r(n - 1, n - 1)), sv(n - 1) * ge_factor(1.5, k, n) * (1 + 1e-6));
  // Every swap grew |det A| by more than f.
  for (std::size_t t = 1; t < r.log_abs_det.size(); ++t)
    EXPECT_GT(r.log_abs_det[t] - r.log_abs_det[t - 1], std::log(1.5) - 1e-10);
}

TEST(Unit_StrongRrqr, updatedFactorMatchesFreshFactorisationAfterSwaps) {
  statecut::ref::SelectRng rng(statecut::test::master_seed(), 1);
  // random well-conditioned 300 x 89 (paper dk), k = 44: QRCP is not strong, swaps happen
  const Mat K = kahan(60, 0.3);
  for (Index k : {Index(20), Index(45), Index(59)}) {
    const RrqrResult r = strong_rrqr(K, k, {1.01});
    ASSERT_TRUE(is_permutation(r.perm, 60));
    // R is the R factor of K[:, perm] up to row signs: R^T R == (K P)^T (K P)
    const Mat KP = columns(K, r.perm, 60);
    const Mat G = KP.transpose() * KP, H = r.r.transpose() * r.r;
    EXPECT_LT((G - H).norm() / G.norm(), 100 * 60 * kEps) << "k=" << k << " swaps=" << r.swaps;
    EXPECT_TRUE(r.r.triangularView<Eigen::StrictlyLower>().toDenseMatrix().isZero(0.0));
    // the fresh certificate agrees with what the loop certified
    EXPECT_LE(rrqr_certificate(r.r, k).max_rho, 1.01);
  }
  (void)rng;
}

TEST(Unit_StrongRrqr, exactRankBelowKSpansColumnSpace) {
  statecut::ref::SelectRng rng(statecut::test::master_seed(), 2);
  const Index m = 200, n = 40, rank = 7, k = 12;
  const Mat M = with_spectrum(m, n, geometric(rank, 2.0), rng);
  const RrqrResult r = strong_rrqr(M, k);
  EXPECT_EQ(r.k_certified, rank);
  const Mat S = columns(M, r.perm, k);
  const Vec sv = singular_values(S);
  EXPECT_GT(sv(rank - 1), 1e-3 * singular_values(M)(rank - 1));  // rank columns independent
  EXPECT_LT(sv(rank), 1e-12);                                     // nothing beyond the rank
  std::set<Index> uniq(r.perm.begin(), r.perm.begin() + k);
  EXPECT_EQ(Index(uniq.size()), k);
}

TEST(Unit_StrongRrqr, duplicatedAndZeroColumnsAreNotKeptTwice) {
  statecut::ref::SelectRng rng(statecut::test::master_seed(), 3);
  Mat M = statecut::test::gaussian(100, 10, rng);
  M.col(3) = M.col(1);   // duplicate
  M.col(7).setZero();    // dead channel
  M.col(9) = 2.0 * M.col(4);
  const std::vector<Index> p = drrqr_pivots(M, 7);
  std::set<Index> s(p.begin(), p.end());
  EXPECT_EQ(s.size(), 7u);
  EXPECT_FALSE(s.count(7)) << "a zero column was kept while independent ones remained";
  EXPECT_FALSE(s.count(1) && s.count(3)) << "both copies of a duplicated column kept";
  EXPECT_FALSE(s.count(4) && s.count(9)) << "both of two parallel columns kept";
}

TEST(Unit_StrongRrqr, geometricSpectrumToInverseEpsKeepsLeadingDirections) {
  statecut::ref::SelectRng rng(statecut::test::master_seed(), 4);
  const Index n = 64, k = 16;
  const Mat M = with_spectrum(500, n, geometric(n, 16.0), rng);
  const RrqrResult r = strong_rrqr(M, k);
  ASSERT_TRUE(r.certified);
  const Vec sm = singular_values(M), sa = singular_values(columns(M, r.perm, k));
  for (Index i = 0; i < k; ++i)
    EXPECT_GE(sa(i), sm(i) / ge_factor(1.5, k, n) - 50 * n * kEps * sm(0)) << "i=" << i;
}

TEST(Unit_StrongRrqr, edgeSizes) {
  statecut::ref::SelectRng rng(statecut::test::master_seed(), 5);
  const Mat one = statecut::test::gaussian(5, 1, rng);
  EXPECT_EQ(drrqr_pivots(one, 1), std::vector<Index>{0});
  const Mat M = statecut::test::gaussian(30, 9, rng);
  std::vector<Index> all = drrqr_pivots(M, 9);  // k = d keeps everything
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<Index>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  // k = d: nothing to swap; the determinant log holds the one QRCP value, log|det R| = sum log|r_ii|
  const RrqrResult kall = strong_rrqr(M, 9);
  ASSERT_EQ(kall.log_abs_det.size(), 1u);
  EXPECT_NEAR(kall.log_abs_det[0], kall.r.diagonal().cwiseAbs().array().log().sum(), 1e-12);
  const RrqrResult km1 = strong_rrqr(M, 8);  // k = d - 1: one column dropped, certificate 8 x 1
  EXPECT_TRUE(km1.certified);
  EXPECT_EQ(rrqr_certificate(km1.r, 8).rho.cols(), 1);
  const Mat wide = statecut::test::gaussian(3, 8, rng);  // fewer rows than channels
  const RrqrResult w = strong_rrqr(wide, 3);
  EXPECT_TRUE(w.certified);
  EXPECT_GT(singular_values(columns(wide, w.perm, 3))(2), 1e-3);
}

TEST(Unit_StrongRrqr, maxSwapsZeroReturnsQrcpUncertified) {
  // Kahan needs at least one swap (kahanSwapsRepairTheTrailingBlock); with max_swaps = 0 the answer is
  // QRCP's own (no pivoting on Kahan) and the result must say it is not certified.
  const Index n = 90, k = n - 1;
  const Mat K = kahan(n, 0.285);
  RrqrOptions o;
  o.max_swaps = 0;
  const RrqrResult r = strong_rrqr(K, k, o);
  EXPECT_EQ(r.swaps, 0);
  EXPECT_FALSE(r.certified);
  EXPECT_GT(r.max_rho, 1.5);
  std::vector<Index> kept(r.perm.begin(), r.perm.begin() + k);
  std::sort(kept.begin(), kept.end());
  for (Index j = 0; j < k; ++j) EXPECT_EQ(kept[j], j) << "QRCP keeps the first n-1 Kahan columns";
  o.max_swaps = 1;  // the bound is an exact count, not "at least one more"
  EXPECT_EQ(strong_rrqr(K, k, o).swaps, 1);
}

TEST(Unit_StrongRrqr, allZeroHeadHasRankZeroAndNothingToCertify) {
  // A dead head (every channel zero, as in real checkpoints): numerical rank 0, no swap, any k columns
  // are as good as any other, and the (empty) certificate holds trivially.
  const Index n = 12;
  for (Index k : {Index(1), Index(5), n}) {
    const RrqrResult r = strong_rrqr(Mat::Zero(64, n), k);
    EXPECT_EQ(r.k_certified, 0) << "k=" << k;
    EXPECT_EQ(r.swaps, 0);
    EXPECT_TRUE(r.certified);
    EXPECT_EQ(r.max_rho, 0.0);
    EXPECT_TRUE(is_permutation(r.perm, n));
    EXPECT_TRUE(r.r.isZero(0.0));
    EXPECT_TRUE(r.log_abs_det.empty()) << "rank 0: no determinant to log, k=" << k;
  }
}

TEST(Unit_Qrcp, singleSampleRowIsAValidInput) {
  // One token of calibration (m = 1): R is 1 x n, its only pivot is the largest-|.| channel.
  Mat row(1, 5);
  row << 0.5, -3.0, 1.0, 2.0, 0.25;
  const QrcpResult q = qrcp(row);
  ASSERT_EQ(q.r.rows(), 1);
  EXPECT_EQ(q.perm[0], 1);
  EXPECT_NEAR(std::abs(q.r(0, 0)), 3.0, 4 * kEps * 3.0);  // one Householder reflection: a few ulps
  EXPECT_TRUE(is_permutation(q.perm, 5));
}

// qrcp needs a sample and a channel: an empty side on either axis is refused by name (seed 305: the `||` of the two
// emptiness tests weakened to `&&` survived, since no test gave an empty side).
TEST(BadInput_Qrcp, noRowsOrNoColumnsIsRefused) {
  STATECUT_EXPECT_SHAPE_ERROR(qrcp(Mat(0, 3)), "qrcp: M must be non-empty");
  STATECUT_EXPECT_SHAPE_ERROR(qrcp(Mat(3, 0)), "qrcp: M must be non-empty");
}

TEST(Unit_RrqrCertificate, keepAllHasEmptyRhoAndZeroMaxRho) {
  // k = n: nothing is discarded, rho is k x 0 and max rho is 0 by definition (no swap can help).
  statecut::ref::SelectRng rng(statecut::test::master_seed(), 8);
  const Mat R = qrcp(statecut::test::gaussian(20, 6, rng)).r;
  const RrqrCertificate c = rrqr_certificate(R, 6);
  EXPECT_EQ(c.rho.rows(), 6);
  EXPECT_EQ(c.rho.cols(), 0);
  EXPECT_EQ(c.gamma.size(), 0);
  EXPECT_EQ(c.max_rho, 0.0);
  const RrqrResult r = strong_rrqr(statecut::test::gaussian(20, 6, rng), 6);
  EXPECT_EQ(r.max_rho, 0.0);
  EXPECT_TRUE(r.certified);
}

TEST(BadInput_RrqrCertificate, rejectsKOutsideOneToNAndNonSquareR) {
  const Mat R = Mat::Identity(4, 4);
  STATECUT_EXPECT_SHAPE_ERROR(rrqr_certificate(R, 5), "1 <= k <= n");
  STATECUT_EXPECT_SHAPE_ERROR(rrqr_certificate(R, 0), "1 <= k <= n");
  STATECUT_EXPECT_SHAPE_ERROR(rrqr_certificate(Mat::Identity(5, 4), 2), "square R");
}

TEST(BadInput_StrongRrqr, rejectsBadKAndF) {
  const Mat M = Mat::Identity(4, 4);
  EXPECT_THROW(strong_rrqr(M, 5), ShapeError);   // k > d
  EXPECT_THROW(strong_rrqr(M, 0), ShapeError);
  EXPECT_THROW(strong_rrqr(M, 2, {1.0}), ShapeError);
  STATECUT_EXPECT_SHAPE_ERROR(strong_rrqr(M, 2, {1.0}), "f must be finite and > 1");  // f = 1 is the bound itself
  Mat bad = M;
  bad(1, 2) = std::nan("");
  EXPECT_THROW(strong_rrqr(bad, 2), ShapeError);
  EXPECT_THROW(strong_rrqr(Mat(0, 3), 1), ShapeError);
  try {
    strong_rrqr(M, 5);
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("k = 5"), std::string::npos) << e.what();
  }
}

TEST(Unit_FaithfulDrrqr, singularStopIsAbsoluteAtOneInABillion) {
  // rrqr.py stops when a kept |r_ii| falls below 1e-9 (absolute). Kahan scaled by 1e-6 has |r_ii| in ~[2e-8, 1e-6]:
  // above that stop, so the faithful loop must swap exactly as on the unscaled matrix.
  const Index n = 90, k = n - 1;
  const Mat K = kahan(n, 0.285);
  RrqrOptions o;
  o.mode = DrrqrMode::Faithful;
  const RrqrResult a = strong_rrqr(K, k, o), b = strong_rrqr(1e-6 * K, k, o);
  ASSERT_GE(a.swaps, 1);
  EXPECT_EQ(b.swaps, a.swaps);
  EXPECT_EQ(std::vector<Index>(b.perm.begin(), b.perm.begin() + k), std::vector<Index>(a.perm.begin(), a.perm.begin() + k));
}

TEST(Unit_FaithfulDrrqr, stopsAfterTwentySwapsAndSubsamples) {
  // f barely above 1 on Kahan forces many candidate swaps; the published loop stops at 20.
  const Mat K = kahan(60, 0.3);
  RrqrOptions o;
  o.f = 1.0000001;
  o.mode = DrrqrMode::Faithful;
  const RrqrResult r = strong_rrqr(K, 30, o);
  EXPECT_LE(r.swaps, 20);
  for (std::size_t t = 1; t < r.log_abs_det.size(); ++t)
    EXPECT_GT(r.log_abs_det[t] - r.log_abs_det[t - 1], std::log(o.f) - 1e-6);
  // more rows than the subsample: the same seed gives the same answer, another seed may not
  statecut::ref::SelectRng rng(statecut::test::master_seed(), 6);
  const Mat M = with_spectrum(6000, 32, geometric(32, 3.0), rng);
  RrqrOptions f;
  f.mode = DrrqrMode::Faithful;
  EXPECT_EQ(drrqr_pivots(M, 16, f), drrqr_pivots(M, 16, f));
}

// The faithful subsample may be as small as one row (the loop then works on a 1 x n R); none is refused (seed 307:
// `faithful_rows < 1` tightened to `<= 1` survived).
TEST(BadInput_FaithfulDrrqr, subsampleOfOneRowIsTheSmallestAccepted) {
  statecut::ref::SelectRng rng(statecut::test::master_seed(), 11);
  const Mat M = statecut::test::gaussian(7, 4, rng);
  RrqrOptions o;
  o.mode = DrrqrMode::Faithful;
  o.faithful_rows = 1;
  const RrqrResult r = strong_rrqr(M, 1, o);
  EXPECT_TRUE(is_permutation(r.perm, 4));
  o.faithful_rows = 0;
  STATECUT_EXPECT_SHAPE_ERROR(strong_rrqr(M, 1, o), "faithful_rows must be >= 1");
}

TEST(Unit_FaithfulDrrqr, subsampleIsTheSeedRulesRowsInTheirOrder) {
  // Past faithful_rows the loop runs on the rows faithful_subsample draws for (seed, layer, head), kept in their
  // order: the same answer as the loop on exactly those rows, which are few enough not to be subsampled again.
  statecut::ref::SelectRng rng(statecut::test::master_seed(), 9);
  const Mat M = with_spectrum(5003, 24, geometric(24, 1e3), rng);
  RrqrOptions o;
  o.mode = DrrqrMode::Faithful;
  o.seed = 1234, o.layer = 2, o.head = 1;
  auto draw = statecut::ref::SelectRng::for_head(o.seed, o.layer, o.head);
  const std::vector<Index> rows = statecut::ref::faithful_subsample(M.rows(), o.faithful_rows, draw);
  ASSERT_EQ(static_cast<Index>(rows.size()), o.faithful_rows);
  Mat picked(o.faithful_rows, M.cols());
  for (Index t = 0; t < o.faithful_rows; ++t) picked.row(t) = M.row(rows[static_cast<std::size_t>(t)]);
  const RrqrResult whole = strong_rrqr(M, 12, o), sub = strong_rrqr(picked, 12, o);
  EXPECT_EQ(whole.perm, sub.perm);
  EXPECT_EQ(whole.swaps, sub.swaps);
  EXPECT_EQ(whole.log_abs_det, sub.log_abs_det);
}

TEST(Unit_FaithfulDrrqr, selectionIsInvariantToScalingByAPowerOfTwo) {
  // 2^27 M has every float/double operation of the loop scaled exactly (no rounding), so only rrqr.py's 1e-12 floor
  // on 1/omega could tell the two apart; with A^{-1}'s row norms >= 2^-27 / sigma_max it moves rho by <= 1e-3
  // relative here, far below these matrices' gaps between rho and f. Two cases: Kahan (many swaps, A^{-1} huge) and a
  // Gaussian head (A^{-1} rows of norm ~0.07 before scaling, ~5e-10 after: seed 304's floor of 1e-6, which dominates
  // them and makes the scaled head swap 20 times instead of none, survived the Kahan case alone).
  statecut::ref::SelectRng rng(statecut::test::master_seed(), 10);
  const Mat K = kahan(90, 0.285), G = statecut::test::gaussian(200, 32, rng);
  RrqrOptions o;
  o.mode = DrrqrMode::Faithful;
  for (const auto& [M, k] : {std::pair<Mat, Index>{K, 89}, {G, 16}}) {
    const RrqrResult a = strong_rrqr(M, k, o), b = strong_rrqr(std::ldexp(1.0, 27) * M, k, o);
    EXPECT_EQ(b.swaps, a.swaps) << M.rows() << "x" << M.cols();
    EXPECT_EQ(b.perm, a.perm) << M.rows() << "x" << M.cols();
  }
  EXPECT_GE(strong_rrqr(K, 89, o).swaps, 1);
}

TEST(Unit_Compression, choleskyOnlyWhenWellConditioned) {
  statecut::ref::SelectRng rng(statecut::test::master_seed(), 7);
  Compression used = Compression::Auto;
  const Mat good = with_spectrum(400, 20, geometric(20, 2.0), rng);
  const Mat r1 = compress_to_r(good, Compression::Auto, &used);
  EXPECT_EQ(used, Compression::Cholesky);
  EXPECT_LT((r1.transpose() * r1 - good.transpose() * good).norm() / good.squaredNorm(), 1e-13);
  const Mat bad = with_spectrum(400, 20, geometric(20, 12.0), rng);
  compress_to_r(bad, Compression::Auto, &used);
  EXPECT_EQ(used, Compression::Householder) << "kappa = 1e12 must not go through the Gram";
  // kappa = 1e6: the Gram's Cholesky still succeeds (kappa^2 = 1e12 < 1/eps), but it would lose ~12 digits: the
  // kappa <= 1e4 rule, not the factorisation's failure, must send it to Householder
  compress_to_r(with_spectrum(400, 20, geometric(20, 6.0), rng), Compression::Auto, &used);
  EXPECT_EQ(used, Compression::Householder) << "kappa = 1e6";
  compress_to_r(good.topRows(40), Compression::Auto, &used);
  EXPECT_EQ(used, Compression::Householder) << "m < 4n: the QR is cheap enough";
  // the switch is m >= 4n: at m = 4n exactly the Gram route is already taken
  compress_to_r(good.topRows(80), Compression::Auto, &used);
  EXPECT_EQ(used, Compression::Cholesky) << "m = 4n: Cholesky of the Gram";
  compress_to_r(good.topRows(79), Compression::Auto, &used);
  EXPECT_EQ(used, Compression::Householder) << "m = 4n - 1";
}

}  // namespace
