// Strong RRQR guarantees (Gu & Eisenstat 1996, Theorem 3.2) on termination, on random matrices with
// prescribed structure: Gaussian, geometric spectrum down to 1/eps, exact rank r < k, duplicated and
// zero columns, Kahan. Both sides in double; slack = c n eps sigma_1(M) (singular values of computed
// factors are exact only up to that absolute error).
#include "properties/master_seed.h"
#include "reference/rrqr.h"
#include "tests/ref/selector_util.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace {
using namespace statecut::ref;
using statecut::test::singular_values;
constexpr double kDoubleEps = std::numeric_limits<double>::epsilon();

struct Case {
  Mat M;
  Index k;
  double f;
  std::string kind;
};

// One input with meaning, drawn by RapidCheck (its seed replays the whole matrix).
Case gen_case() {
  const int kind = *rc::gen::inRange(0, 5);
  const Index n = *rc::gen::inRange(1, 41);
  const Index m = kind == 4 ? n : *rc::gen::inRange(1, 121);
  const Index k = *rc::gen::inRange<Index>(1, n + 1);
  const double f = *rc::gen::element(1.01, 1.5, 2.0);
  SelectRng rng(*rc::gen::arbitrary<std::uint64_t>(), 0);
  Case c{Mat(), k, f, ""};
  const Index p = std::min(m, n);
  switch (kind) {
    case 0:
      c.M = statecut::test::gaussian(m, n, rng);
      c.kind = "gaussian";
      break;
    case 1:
      c.M = statecut::test::with_spectrum(m, n, statecut::test::geometric(p, *rc::gen::inRange(1, 17)), rng);
      c.kind = "geometric";
      break;
    case 2: {
      const Index r = *rc::gen::inRange<Index>(1, p + 1);
      c.M = statecut::test::with_spectrum(m, n, statecut::test::geometric(r, 1.0), rng);
      c.kind = "exact-rank";
      break;
    }
    case 3: {
      c.M = statecut::test::gaussian(m, n, rng);
      for (Index j = 0; j + 1 < n; j += 3) c.M.col(j + 1) = c.M.col(j);  // duplicates
      if (n > 2) c.M.col(n - 1).setZero();
      c.kind = "dup-zero";
      break;
    }
    default:
      c.M = statecut::test::kahan(n, 0.3);
      c.kind = "kahan";
  }
  return c;
}

Mat cols(const Mat& M, const std::vector<Index>& p, Index from, Index count) {
  Mat out(M.rows(), count);
  for (Index j = 0; j < count; ++j) out.col(j) = M.col(p[from + j]);
  return out;
}

RC_GTEST_PROP(Prop_StrongRrqr, certificateAndSingularValueBoundsHoldOnTermination, ()) {
  const Case c = gen_case();
  const Index n = c.M.cols();
  const RrqrResult r = strong_rrqr(c.M, c.k, RrqrOptions{c.f});
  std::vector<Index> sorted(r.perm);
  std::sort(sorted.begin(), sorted.end());
  for (Index i = 0; i < n; ++i) RC_ASSERT(sorted[i] == i);
  RC_ASSERT(r.certified);
  const Index kc = r.k_certified;
  const Vec sm = singular_values(c.M);
  const double s1 = sm.size() ? sm(0) : 0.0, slack = 30.0 * n * kDoubleEps * s1;
  RC_CLASSIFY(kc < c.k, "rank below k");
  RC_CLASSIFY(r.swaps > 0, "swapped");
  RC_TAG(c.kind);
  if (kc == 0 || kc == n) return;
  const RrqrCertificate cert = rrqr_certificate(r.r, kc);
  RC_ASSERT(cert.w.cwiseAbs().maxCoeff() <= c.f * (1 + 1e-12));
  for (Index i = 0; i < kc; ++i)
    for (Index j = 0; j < n - kc; ++j) RC_ASSERT(cert.gamma(j) / cert.omega(i) <= c.f * (1 + 1e-12));
  const double g = std::sqrt(1.0 + c.f * c.f * double(kc) * double(n - kc));
  // sigma(A_k) are those of the selected columns of M: M[:, perm[:k]] = Q A_k
  const Vec sa = singular_values(cols(c.M, r.perm, 0, kc));
  double tight = 0.0;
  for (Index i = 0; i < kc; ++i) {
    RC_ASSERT(sa(i) >= sm(i) / g - slack);
    if (sm(i) > 1e3 * slack) tight = std::max(tight, sm(i) / (g * sa(i)));
  }
  const Mat C = r.r.bottomRightCorner(n - kc, n - kc);
  const Vec sc = singular_values(C);
  for (Index j = 0; j < sc.size(); ++j) {
    const double ref = kc + j < sm.size() ? sm(kc + j) : 0.0;
    RC_ASSERT(sc(j) <= ref * g + slack);
  }
  // how close sigma_i(A) came to its lower bound (1 = attained)
  RC_CLASSIFY(tight > 0.5, "sigma(A) bound within 2x");
  RC_CLASSIFY(tight <= 0.5 && tight > 0.1, "sigma(A) bound within 10x");
  RC_CLASSIFY(tight <= 0.1, "sigma(A) bound loose (>10x)");
}

RC_GTEST_PROP(Prop_StrongRrqr, everySwapGrowsDetByMoreThanFAndSwapCountIsBounded, ()) {
  const Case c = gen_case();
  const RrqrResult r = strong_rrqr(c.M, c.k, RrqrOptions{c.f});
  if (r.log_abs_det.empty()) return;
  for (std::size_t t = 1; t < r.log_abs_det.size(); ++t)
    RC_ASSERT(r.log_abs_det[t] - r.log_abs_det[t - 1] > std::log(c.f) - 1e-9);
  // |det A| <= prod_{i<=k} sigma_i(M) for any k columns, so #swaps <= log_f(prod sigma / |det A_0|)
  const Vec sm = singular_values(c.M);
  double log_prod = 0.0;
  for (Index i = 0; i < r.k_certified; ++i) log_prod += std::log(sm(i));
  const double bound = (log_prod - r.log_abs_det.front()) / std::log(c.f);
  RC_ASSERT(double(r.swaps) <= bound + 1e-6 * (1 + std::abs(bound)));
  RC_CLASSIFY(r.swaps == 0, "no swap");
  RC_CLASSIFY(r.swaps > 0 && double(r.swaps) >= 0.5 * bound, "swaps within 2x of bound");
  RC_CLASSIFY(r.swaps > 0 && double(r.swaps) < 0.5 * bound, "swaps below half the bound");
}

RC_GTEST_PROP(Prop_StrongRrqr, selectedColumnsHaveThePaperConditioningBound, ()) {
  // DRRQR's claim: kappa(M_S) <= (sigma_1(M)/sigma_k(M)) sqrt(1 + f^2 k (n-k)) for M = [Q; K]
  const Index n = *rc::gen::inRange(2, 33), N = *rc::gen::inRange(n, 4 * n + 1);
  const Index k = *rc::gen::inRange<Index>(1, n);
  SelectRng rng(*rc::gen::arbitrary<std::uint64_t>(), 0);
  const Vec sq = statecut::test::geometric(n, *rc::gen::inRange(0, 9));
  const Mat Q = statecut::test::with_spectrum(N, n, sq, rng), K = statecut::test::with_spectrum(N, n, sq, rng);
  const Mat M = drrqr_matrix(Q, K, ScoreSide::Joint);
  const std::vector<Index> sel = drrqr_pivots(M, k);
  const Vec sm = singular_values(M), ss = singular_values(cols(M, sel, 0, k));
  const double g = std::sqrt(1.0 + 1.5 * 1.5 * double(k) * double(n - k));
  const double kappa_s = ss(0) / ss(k - 1), bound = sm(0) / sm(k - 1) * g;
  RC_ASSERT(kappa_s <= bound * (1 + 1e-8));
  RC_CLASSIFY(kappa_s > 0.5 * bound, "within 2x");
  RC_CLASSIFY(kappa_s <= 0.5 * bound && kappa_s > 0.05 * bound, "within 20x");
  RC_CLASSIFY(kappa_s <= 0.05 * bound, "loose (>20x)");
}

RC_GTEST_PROP(Prop_StrongRrqr, choiceInvariantUnderRowPermutationSignsAndScaling, ()) {
  const Index n = *rc::gen::inRange(1, 33), m = *rc::gen::inRange(n, 3 * n + 20);
  const Index k = *rc::gen::inRange<Index>(1, n + 1);
  SelectRng rng(*rc::gen::arbitrary<std::uint64_t>(), 0);
  const Mat M = statecut::test::gaussian(m, n, rng);
  std::vector<Index> rows(m);
  for (Index i = 0; i < m; ++i) rows[i] = i;
  for (Index i = m - 1; i > 0; --i) std::swap(rows[i], rows[rng.below(i + 1)]);
  const double scale = std::ldexp(1.0, *rc::gen::inRange(-40, 41));  // exact power of two
  Mat P(m, n);
  for (Index i = 0; i < m; ++i) P.row(i) = (rng.below(2) ? -scale : scale) * M.row(rows[i]);
  std::vector<Index> a = drrqr_pivots(M, k), b = drrqr_pivots(P, k);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  RC_ASSERT(a == b);
}

}  // namespace
