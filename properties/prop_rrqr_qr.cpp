// QR with column pivoting, LAPACK's acceptance ratios (TESTING/LIN): ||M Pi - Q R||_F / (||M||_F eps n)
// < 30 and ||Q^T Q - I||_F / (eps n) < 30, and |R_ii| non-increasing (what makes QRCP rank-revealing).
// Also the R factor strong_rrqr returns: R^T R = (R0 Pi)^T (R0 Pi) for the compressed problem.
#include "properties/master_seed.h"
#include "reference/rrqr.h"
#include "tests/ref/selector_util.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <limits>

namespace {
using namespace statecut::ref;
constexpr double kEps = std::numeric_limits<double>::epsilon();

Mat gen_matrix() {
  const Index m = *rc::gen::inRange(1, 90), n = *rc::gen::inRange(1, 60);
  SelectRng rng(*rc::gen::arbitrary<std::uint64_t>(), 0);
  const Index p = std::min(m, n);
  switch (*rc::gen::inRange(0, 3)) {
    case 0: return statecut::test::gaussian(m, n, rng);
    case 1: return statecut::test::with_spectrum(m, n, statecut::test::geometric(p, 16.0), rng);
    default: return statecut::test::with_spectrum(m, n, statecut::test::geometric(*rc::gen::inRange<Index>(1, p + 1), 1.0), rng);
  }
}

RC_GTEST_PROP(Prop_Qrcp, residualAndOrthogonalityRatiosBelowThirty, ()) {
  const Mat M = gen_matrix();
  const Index n = M.cols();
  const QrcpResult q = qrcp(M);
  Mat MP(M.rows(), n);
  for (Index j = 0; j < n; ++j) MP.col(j) = M.col(q.perm[j]);
  const double res = (MP - q.q * q.r).norm() / (M.norm() * kEps * double(n));
  const double orth = (q.q.transpose() * q.q - Mat::Identity(q.q.cols(), q.q.cols())).norm() / (kEps * double(n));
  RC_ASSERT(res < 30.0);
  RC_ASSERT(orth < 30.0);
  RC_CLASSIFY(res > 3.0, "residual ratio > 3 (within 10x of the limit)");
  RC_CLASSIFY(orth > 3.0, "orthogonality ratio > 3");
}

RC_GTEST_PROP(Prop_Qrcp, pivotDiagonalNonIncreasing, ()) {
  const Mat M = gen_matrix();
  const QrcpResult q = qrcp(M);
  const Index p = std::min(M.rows(), M.cols());
  for (Index i = 0; i + 1 < p; ++i)
    RC_ASSERT(std::abs(q.r(i + 1, i + 1)) <= std::abs(q.r(i, i)) * (1 + 1e-12) + 1e-300);
}

RC_GTEST_PROP(Prop_StrongRrqr, returnedFactorIsTheRFactorOfThePermutedMatrix, ()) {
  const Mat M = gen_matrix();
  const Index n = M.cols(), k = *rc::gen::inRange<Index>(1, n + 1);
  const RrqrResult r = strong_rrqr(M, k);
  Mat MP(M.rows(), n);
  for (Index j = 0; j < n; ++j) MP.col(j) = M.col(r.perm[j]);
  // R^T R = (M Pi)^T (M Pi): Gram error of a backward-stable QR is <= c n eps ||M||^2
  const double err = (r.r.transpose() * r.r - MP.transpose() * MP).norm() / (M.squaredNorm() * kEps * n);
  RC_ASSERT(err < 30.0 * (1 + r.swaps));
  RC_ASSERT((r.r.triangularView<Eigen::StrictlyLower>().toDenseMatrix().array() == 0.0).all());
}

}  // namespace
