// PCA lemma: truncating a feature matrix X [N, dk] to its top-r principal directions does not lower the
// rank utilization u = er / min(rows, cols). With T_r the top-r eigenvectors of X^T X,
//   u(X T_r^T) = (mean of the r largest sigma_i^2) / sigma_1^2 >= (mean of all min(N, dk)) / sigma_1^2 = u(X),
// because the mean of the top r of a descending list is at least the mean of the whole list. Checked on
// raw (uncentred) and on the method's own features (centred L2-normed keys, pca_rotation of their
// covariance applied to the centred matrix). The adversarial (bottom-r) order can lower u: a found
// case is part of the test so the lemma is seen to depend on the order.
#include "properties/master_seed.h"
#include "reference/metrics.h"
#include "reference/pca.h"
#include "tests/ref/selector_util.h"

#include <gtest/gtest.h>
#include <algorithm>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

namespace {
using namespace statecut::ref;

RC_GTEST_PROP(Theorem_PcaTruncation, topPrincipalDirectionsDoNotLowerRankUtilization, ()) {
  const Index dk = *rc::gen::inRange(1, 40), N = *rc::gen::inRange<Index>(std::max<Index>(dk, 2), 4 * dk + 10);
  const Index r = *rc::gen::inRange<Index>(1, dk + 1);
  SelectRng rng(*rc::gen::arbitrary<std::uint64_t>(), 0);
  const double decay = *rc::gen::inRange(0, 9);
  const Mat X = statecut::test::with_spectrum(N, dk, statecut::test::geometric(dk, decay), rng);
  const bool centred = *rc::gen::arbitrary<bool>();
  Mat Y = X;
  Mat cov = X.transpose() * X;
  if (centred) {  // the method's own path: L2-normed rows, mean-centred covariance
    PcaStats s;
    s.add(l2norm_rows_fla(X));
    cov = s.covariance();
    Y = l2norm_rows_fla(X);
    Y.rowwise() -= (s.sum / s.n).transpose();
  }
  const Mat T = pca_rotation(cov, r);
  const double u_full = rank_utilization(Y), u_trunc = rank_utilization(Y * T.transpose());
  RC_ASSERT(u_trunc >= u_full * (1 - 1e-10));
  RC_CLASSIFY(r == dk, "r = dk (equality)");
  RC_CLASSIFY(r < dk && u_trunc < 1.1 * u_full, "within 10% (tight)");
  RC_CLASSIFY(r < dk && u_trunc >= 1.1 * u_full, "strict gain");
}

TEST(Theorem_PcaTruncation, adversarialOrderCanLowerRankUtilization) {
  // spectrum 1, 1, 1, 0.1: u(X) = 3.01/4 = 0.7525; the top-2 directions give u = 1, the bottom-2
  // (ascending: 0.1 then 1) give u = (0.01 + 1)/2 = 0.505 < u(X)
  SelectRng rng(statecut::test::master_seed(), 11);
  Vec s(4);
  s << 1.0, 1.0, 1.0, 0.1;
  const Mat X = statecut::test::with_spectrum(50, 4, s, rng);
  const Mat cov = X.transpose() * X;
  const double u = rank_utilization(X);
  EXPECT_NEAR(u, (3.0 + 0.01) / 4.0, 1e-12);
  EXPECT_NEAR(rank_utilization(X * pca_rotation(cov, 2, false).transpose()), 1.0, 1e-12);
  EXPECT_NEAR(rank_utilization(X * pca_rotation(cov, 2, true).transpose()), 0.505, 1e-12);
}

}  // namespace
