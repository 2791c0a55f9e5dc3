/// Lemma (paper Lemma B.2): a causal depthwise convolution whose filter is shared by all channels of a head
/// commutes with every linear map on those channels; a general depthwise filter does not.
///
///   conv_w(x)_{t,c} = sum_{j=0}^{W-1} w(c, j) x_{t+j-(W-1), c}        x [T, C], w [C, W] (no bias, no SiLU)
///   shared filter, w(c, .) = f for all c:  conv_f(x M) = conv_f(x) M   for every M [C, C']
/// Proof: conv_f(x) = sum_j f_j S_j x with S_j the time shift, which acts on rows; M acts on columns, and left and
/// right multiplications commute. (The conv history [W-1, C] is part of x, so it maps to history M.)
///
/// Depthwise (per-channel) filters: conv_w(y) = sum_j S_j y D_j with D_j = diag(w(., j)), so
///   conv_w(x M) - conv_w(x) M = sum_j S_j x (M D_j - D_j M),   (M D_j - D_j M)_ab = M_ab (w(b, j) - w(a, j)).
/// An impulse at time 0 in channel a reads off row a of these commutators, so conv_w commutes with M (for all x)
/// iff w(a, .) = w(b, .) whenever M_ab != 0: exactly the shared-filter case for a mixing M. This is why PCA (a
/// rotation of the key channels) cannot be absorbed exactly into fla's depthwise q/k convs (paper App. B), and the
/// SiLU after the conv breaks commutation in any case.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "properties/generators.h"
#include "reference/primitives.h"

namespace statecut::prop {
namespace {

Mat conv(const Mat& x, const Mat& w, const Mat* history = nullptr) {
  return ref::causal_depthwise_conv(x, w, nullptr, /*apply_silu=*/false, history);
}

RC_GTEST_PROP(Lemma_ConvCommutes, sharedFilterCommutesWithAnyChannelMap, ()) {
  const Index T = *genSeqLen();
  const Index C = *genKeyDim();
  const Index C2 = *genKeyDim();  // M may change the channel count (projection to fewer channels, as PCA does)
  const Index W = *rc::gen::elementOf(std::vector<Index>{4, 1, 2, 3});
  const bool with_history = *rc::gen::arbitrary<bool>();
  Rng rng(*genSeed());
  const Mat x = gaussian(rng, T, C);
  const Mat M = gaussian(rng, C, C2);
  const Mat f = gaussian(rng, 1, W);
  const Mat h = gaussian(rng, W - 1, C);
  const Mat hM = h * M;

  const Mat lhs = conv(x * M, f.replicate(C2, 1), with_history ? &hM : nullptr);
  const Mat rhs = conv(x, f.replicate(C, 1), with_history ? &h : nullptr) * M;
  // Both sides sum W * C products per entry; elementwise |error| <= (W + C) eps (|f| * |x|) |M|, whose Frobenius
  // norm is <= ||f||_1 ||[h; x]||_F ||M||_F. c = 2: two independently rounded sides.
  const double scale = f.cwiseAbs().sum() * std::sqrt(x.squaredNorm() + (with_history ? h.squaredNorm() : 0.0)) *
                       M.norm();
  const double err = (lhs - rhs).norm();
  RC_ASSERT(err <= 2.0 * static_cast<double>(W + C) * kEps * scale);
  STATECUT_CLASSIFY_EPS(err / (kEps * scale));
}

RC_GTEST_PROP(Lemma_ConvCommutes, depthwiseCommutesIffFiltersAgreeOnMixedChannels, ()) {
  // Integer data: every conv and product is exact in double, so "commutes" is decided by exact equality.
  const Index C = *rc::gen::inRange<Index>(2, 7);
  const Index W = *rc::gen::inRange<Index>(1, 5);
  Rng rng(*genSeed());
  const Index groups = rng.integer(1, C);  // channels of one group share their filter
  std::vector<Index> group(C);
  for (auto& gidx : group) gidx = rng.integer(0, groups - 1);
  Mat filters(groups, W);
  for (Index i = 0; i < groups; ++i)
    for (Index j = 0; j < W; ++j) filters(i, j) = static_cast<double>(rng.integer(-3, 3));
  Mat w(C, W);
  for (Index c = 0; c < C; ++c) w.row(c) = filters.row(group[c]);
  Mat M = Mat::Zero(C, C);
  for (Index a = 0; a < C; ++a)
    for (Index b = 0; b < C; ++b)
      if (rng.integer(0, 1)) M(a, b) = static_cast<double>(rng.integer(-2, 2));

  bool predicted = true;  // w(a, .) == w(b, .) wherever M_ab != 0
  for (Index a = 0; a < C; ++a)
    for (Index b = 0; b < C; ++b)
      if (M(a, b) != 0.0 && w.row(a) != w.row(b)) predicted = false;

  // One impulse per channel, W steps apart so the responses do not overlap: the difference is then exactly the
  // table M_ab (w(b, .) - w(a, .)), so testing this x decides commutation for all x.
  Mat x = Mat::Zero(C * W, C);
  for (Index a = 0; a < C; ++a) x(a * W, a) = 1.0;
  const Mat diff = conv(x * M, w) - conv(x, w) * M;
  RC_ASSERT((diff.isZero(0.0)) == predicted);
  RC_CLASSIFY(predicted, "commutes");
  RC_CLASSIFY(!predicted, "does not commute");
  RC_CLASSIFY(groups == 1, "one shared filter");
}

TEST(Lemma_ConvCommutes, depthwiseFilterCounterexample) {
  // Two channels: channel 0 passes the current token, channel 1 delays by one step. M adds channel 0 into
  // channel 1. x = an impulse in channel 0 at t = 0.
  Mat w(2, 2);
  w << 0, 1,   // w(0, W-1) = 1: identity
      1, 0;    // w(1, W-2) = 1: one-step delay
  Mat M(2, 2);
  M << 1, 1,
      0, 1;
  Mat x(2, 2);
  x << 1, 0,
      0, 0;
  const Mat mixed_after = conv(x, w) * M;   // [[1, 1], [0, 0]]
  const Mat mixed_before = conv(x * M, w);  // [[1, 0], [0, 1]]
  Mat expect_after(2, 2), expect_before(2, 2);
  expect_after << 1, 1, 0, 0;
  expect_before << 1, 0, 0, 1;
  EXPECT_EQ(mixed_after, expect_after);
  EXPECT_EQ(mixed_before, expect_before);
  EXPECT_NE(mixed_after, mixed_before) << "a per-channel filter must not commute with a channel mix";

  // The same M with one filter shared by both channels (the delay) commutes exactly.
  Mat shared(2, 2);
  shared << 1, 0, 1, 0;
  EXPECT_EQ(conv(x * M, shared), conv(x, shared) * M);
}

}  // namespace
}  // namespace statecut::prop
