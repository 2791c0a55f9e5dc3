// Every selector returns a valid sorted set of the requested size; L1 / S-Wanda / Grad equal a
// brute-force top-k of their formulas written out element by element; the scoring sides of paper
// Table 16 are what their formulas say (joint = q-only + k-only; each side ignores the other).
#include "properties/master_seed.h"
#include "reference/selection_budget.h"
#include "reference/selectors.h"
#include "tests/ref/selector_util.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace {
using namespace statecut::ref;

struct Layer {
  LayerInputs in;
  Index dk = 0, hidden = 0;
};

Layer gen_layer() {
  Layer L;
  const Index heads = *rc::gen::inRange(1, 4);
  L.dk = *rc::gen::element<Index>(1, 2, 7, 16, 33);
  L.hidden = *rc::gen::inRange(1, 24);
  const Index N = *rc::gen::inRange(L.dk, 3 * L.dk + 5);
  SelectRng rng(*rc::gen::arbitrary<std::uint64_t>(), 0);
  for (Index h = 0; h < heads; ++h) {
    HeadInputs hi;
    hi.wq = statecut::test::gaussian(L.dk, L.hidden, rng);
    hi.wk = statecut::test::gaussian(L.dk, L.hidden, rng);
    hi.grad_wq = statecut::test::gaussian(L.dk, L.hidden, rng);
    hi.grad_wk = statecut::test::gaussian(L.dk, L.hidden, rng);
    hi.q = statecut::test::gaussian(N, L.dk, rng);
    hi.k = statecut::test::gaussian(N, L.dk, rng);
    L.in.heads.push_back(hi);
  }
  L.in.rms = statecut::test::gaussian(L.hidden, 1, rng).cwiseAbs();
  return L;
}

// The formulas of DESIGN.md §4 written as plain loops, then a full sort: the brute-force answer.
std::vector<Index> brute_top_k(SelectMethod m, ScoreSide side, const HeadInputs& h, const Vec& rms, Index k) {
  const Index dk = h.wq.rows();
  std::vector<std::pair<double, Index>> s;
  for (Index i = 0; i < dk; ++i) {
    double sq = 0, sk = 0;
    for (Index j = 0; j < h.wq.cols(); ++j) {
      if (m == SelectMethod::L1) {
        sq += std::abs(h.wq(i, j));
        sk += std::abs(h.wk(i, j));
      } else if (m == SelectMethod::SWanda) {
        sq += std::abs(h.wq(i, j)) * rms(j);
        sk += std::abs(h.wk(i, j)) * rms(j);
      } else {
        sq += std::abs(h.wq(i, j) * h.grad_wq(i, j));
        sk += std::abs(h.wk(i, j) * h.grad_wk(i, j));
      }
    }
    const double v = side == ScoreSide::QOnly ? sq : side == ScoreSide::KOnly ? sk : sq + sk;
    s.push_back({-v, i});
  }
  std::sort(s.begin(), s.end());
  std::vector<Index> out;
  for (Index t = 0; t < k; ++t) out.push_back(s[t].second);
  std::sort(out.begin(), out.end());
  return out;
}

bool valid_sorted(const std::vector<Index>& v, Index k, Index dk) {
  if (Index(v.size()) != k) return false;
  for (std::size_t t = 0; t < v.size(); ++t) {
    if (v[t] < 0 || v[t] >= dk) return false;
    if (t && v[t] <= v[t - 1]) return false;
  }
  return true;
}

RC_GTEST_PROP(Prop_Selector, everyMethodReturnsValidSortedSetOfRequestedSize, ()) {
  const Layer L = gen_layer();
  SelectOptions o;
  o.method = *rc::gen::element(SelectMethod::Rand, SelectMethod::L1, SelectMethod::SWanda, SelectMethod::Grad,
                               SelectMethod::Drrqr);
  o.side = *rc::gen::element(ScoreSide::Joint, ScoreSide::QOnly, ScoreSide::KOnly);
  o.faithful = *rc::gen::arbitrary<bool>();
  const bool by_ratio = *rc::gen::arbitrary<bool>();
  if (by_ratio) o.ratio = *rc::gen::element(0.1, 0.3, 0.5, 0.75, 0.99);
  else o.keep = *rc::gen::inRange<Index>(1, L.dk + 1);
  const Index k = by_ratio ? budget_from_ratio(L.dk, o.ratio) : o.keep;
  const auto sel = select_channels(L.in, o);
  RC_ASSERT(sel.size() == L.in.heads.size());
  for (const auto& s : sel) RC_ASSERT(valid_sorted(s, k, L.dk));
  RC_TAG(method_name(o.method));
}

RC_GTEST_PROP(Prop_Selector, scoreMethodsAgreeWithBruteForceTopK, ()) {
  const Layer L = gen_layer();
  SelectOptions o;
  o.method = *rc::gen::element(SelectMethod::L1, SelectMethod::SWanda, SelectMethod::Grad);
  o.side = *rc::gen::element(ScoreSide::Joint, ScoreSide::QOnly, ScoreSide::KOnly);
  o.keep = *rc::gen::inRange<Index>(1, L.dk + 1);
  const auto sel = select_channels(L.in, o);
  for (std::size_t h = 0; h < sel.size(); ++h)
    RC_ASSERT(sel[h] == brute_top_k(o.method, o.side, L.in.heads[h], L.in.rms, o.keep));
  RC_CLASSIFY(o.keep == L.dk, "keep all (trivial)");
}

RC_GTEST_PROP(Prop_Selector, table16SidesAreWhatTheirFormulasSay, ()) {
  const Layer L = gen_layer();
  const HeadInputs& h = L.in.heads.front();
  using Fn = std::function<Vec(const HeadInputs&, ScoreSide)>;
  const Fn fns[] = {
      [](const HeadInputs& x, ScoreSide s) { return l1_scores(x.wq, x.wk, s); },
      [&](const HeadInputs& x, ScoreSide s) { return swanda_scores(x.wq, x.wk, L.in.rms, s); },
      [](const HeadInputs& x, ScoreSide s) { return grad_scores(x.wq, x.wk, x.grad_wq, x.grad_wk, s); }};
  for (const Fn& f : fns) {
    const Vec j = f(h, ScoreSide::Joint), q = f(h, ScoreSide::QOnly), k = f(h, ScoreSide::KOnly);
    RC_ASSERT((j - (q + k)).cwiseAbs().maxCoeff() <= 1e-12 * (1 + j.cwiseAbs().maxCoeff()));
    HeadInputs other = h;  // change the k side only: q-only scores must not move, k-only must
    other.wk *= 3.0;
    other.grad_wk *= 2.0;
    RC_ASSERT(f(other, ScoreSide::QOnly) == q);
    RC_ASSERT(f(other, ScoreSide::KOnly) != k);
    other = h;
    other.wq *= 3.0;
    other.grad_wq *= 2.0;
    RC_ASSERT(f(other, ScoreSide::KOnly) == k);
  }
  // drrqr: q-only sees Q alone, k-only K alone, joint the stacked [Q; K]
  RC_ASSERT(drrqr_matrix(h.q, h.k, ScoreSide::QOnly) == h.q);
  RC_ASSERT(drrqr_matrix(h.q, h.k, ScoreSide::KOnly) == h.k);
  const Mat j = drrqr_matrix(h.q, h.k, ScoreSide::Joint);
  RC_ASSERT(j.topRows(h.q.rows()) == h.q && j.bottomRows(h.k.rows()) == h.k);
}

RC_GTEST_PROP(Prop_Selector, randIsReproducibleAndValid, ()) {
  const Index dk = *rc::gen::inRange(1, 130), k = *rc::gen::inRange<Index>(1, dk + 1);
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  SelectRng a(seed, 3), b(seed, 3);
  const auto x = rand_subset(dk, k, a);
  RC_ASSERT(x == rand_subset(dk, k, b));
  RC_ASSERT(valid_sorted(x, k, dk));
}

}  // namespace
