// The selectors' one seed rule (reference/select_rng.h): layer l, head h draw from SelectRng(seed, l*1000003 + h),
// whoever asks — a whole layer (select_layer, what prune runs), one head (select_head, what `statecut select`
// runs), or strong_rrqr's faithful mode given the whole matrix — and the faithful subsample is one function.
#include "reference/rrqr.h"
#include "reference/selectors.h"
#include "tests/ref/ref_test_util.h"
#include "tests/ref/selector_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace {
using namespace statecut::ref;
using statecut::test::gaussian;
using statecut::test::master_seed;

TEST(Unit_SeedRule, streamIsLayerTimes1000003PlusHead) {
  EXPECT_EQ(selection_stream(0, 0), 0u);
  EXPECT_EQ(selection_stream(0, 5), 5u);
  EXPECT_EQ(selection_stream(3, 2), 3u * 1000003u + 2u);
  SelectRng a = SelectRng::for_head(42, 3, 2), b(42, 3000011);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a.next(), b.next());
  EXPECT_THROW(selection_stream(-1, 0), ShapeError);
}

TEST(Unit_SeedRule, oneHeadAloneDrawsWhatItDrawsInsideItsLayer) {
  // rand and faithful drrqr (6,000 rows > the 5,000 subsample) of head 2 of layer 7: the same as a lone call.
  SelectRng gen(master_seed(), 11);
  LayerInputs in;
  for (int h = 0; h < 3; ++h) {
    HeadInputs hi;
    hi.m = gaussian(6000, 12, gen);
    hi.m.col(3) *= 1e-3;  // a weak channel, so the selection is not a tie everywhere
    in.heads.push_back(hi);
  }
  SelectOptions o;
  o.keep = 5;
  o.layer = 7;
  o.seed = 1234;
  for (SelectMethod m : {SelectMethod::Rand, SelectMethod::Drrqr}) {
    o.method = m;
    o.faithful = m == SelectMethod::Drrqr;
    const std::vector<HeadSelection> layer = select_layer(in, o);
    ASSERT_EQ(layer.size(), 3u);
    const HeadSelection alone = select_head(in.heads[2], Vec(), o, 2);
    EXPECT_EQ(alone.keep, layer[2].keep) << method_name(m);
    if (m == SelectMethod::Drrqr) {
      // ... and the rows are the ones strong_rrqr draws by the rule itself
      RrqrOptions ro;
      ro.mode = DrrqrMode::Faithful;
      ro.seed = 1234;
      ro.layer = 7;
      ro.head = 2;
      std::vector<Index> p = drrqr_pivots(in.heads[2].m, 5, ro);
      EXPECT_EQ(p, alone.pivots);
      // another head index (same matrix) is another subsample: the rule really reads the head
      SelectRng other = SelectRng::for_head(1234, 7, 1), same = SelectRng::for_head(1234, 7, 2);
      EXPECT_NE(faithful_subsample(6000, 5000, other), faithful_subsample(6000, 5000, same));
    }
  }
}

TEST(Unit_SeedRule, faithfulSubsampleIsSortedDistinctAndAllRowsWhenFew) {
  SelectRng rng = SelectRng::for_head(master_seed(), 0, 0);
  const std::vector<Index> r = faithful_subsample(9000, 5000, rng);
  ASSERT_EQ(r.size(), 5000u);
  EXPECT_TRUE(std::is_sorted(r.begin(), r.end()));
  EXPECT_EQ(std::set<Index>(r.begin(), r.end()).size(), 5000u);
  EXPECT_GE(r.front(), 0);
  EXPECT_LT(r.back(), 9000);
  const std::vector<Index> all = faithful_subsample(4000, 5000, rng);
  ASSERT_EQ(all.size(), 4000u);
  EXPECT_EQ(all.back(), 3999);
  EXPECT_TRUE(faithful_subsample(0, 5, rng).empty()) << "no calibration rows: an empty sample, not an error";
}

// A negative row count or a sample of no rows is a caller's bug, refused by name; either alone is enough (seed 307:
// the `||` of the two tests weakened to `&&` survived).
TEST(BadInput_SeedRule, faithfulSubsampleRefusesNegativeRowsOrAnEmptySample) {
  SelectRng rng = SelectRng::for_head(master_seed(), 0, 2);
  STATECUT_EXPECT_SHAPE_ERROR(faithful_subsample(-1, 5, rng), "need m >= 0 and take >= 1");
  STATECUT_EXPECT_SHAPE_ERROR(faithful_subsample(5, 0, rng), "need m >= 0 and take >= 1");
  STATECUT_EXPECT_SHAPE_ERROR(faithful_subsample(-1, 0, rng), "need m >= 0 and take >= 1");
}

TEST(Unit_SeedRule, faithfulSubsampleOfOneRowIsOneValidRow) {
  SelectRng rng = SelectRng::for_head(master_seed(), 0, 1);
  const std::vector<Index> one = faithful_subsample(10, 1, rng);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_GE(one[0], 0);
  EXPECT_LT(one[0], 10);
}

TEST(Unit_SeedRule, faithfulSubsampleDrawsEveryRowEquallyOften) {
  // 3 of 10 rows, 2000 draws: each row is in a draw with p = 0.3, so its count is Binomial(2000, 0.3), mean 600,
  // sd 20.5; [477, 723] is ±6 sd (a fair sampler leaves it with probability < 1e-8 per row). A biased shuffle
  // (a row that is never swapped out, a swap one slot off) puts some row in ~every draw.
  SelectRng rng = SelectRng::for_head(master_seed(), 3, 1);
  std::vector<int> count(10, 0);
  for (int d = 0; d < 2000; ++d)
    for (Index r : faithful_subsample(10, 3, rng)) ++count[static_cast<std::size_t>(r)];
  for (int r = 0; r < 10; ++r) {
    EXPECT_GE(count[r], 477) << "row " << r;
    EXPECT_LE(count[r], 723) << "row " << r;
  }
}

}  // namespace
