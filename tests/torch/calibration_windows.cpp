/// The calibration windows prune and rank draw from a token stream (optimized/text/token_stream.h, sample_windows):
/// N windows of L consecutive tokens, each row the stream's ids from its recorded start, every start in [0, n - L],
/// the same draw for the same seed. The stream is 0, 1, ..., n - 1, so a row shows where it was cut from. Seed:
/// STATECUT_SEED (printed).
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "optimized/text/token_stream.h"
#include "tests/test_env.h"

namespace {

statecut::TokenStream counting_stream(int64_t n) {
  statecut::TokenStream s;
  s.source = "counting.safetensors";
  s.ids.resize(static_cast<size_t>(n));
  std::iota(s.ids.begin(), s.ids.end(), 0);
  return s;
}

}  // namespace

TEST(Unit_CalibrationWindows, eachRowIsTheStreamFromItsStart) {
  const uint64_t seed = statecut::test::env_seed(20261206);
  for (const auto& [n, N, L] : {std::tuple<int64_t, int64_t, int64_t>{1000, 16, 63}, {65, 5, 65}, {127, 1, 2}}) {
    const statecut::Windows w = statecut::sample_windows(counting_stream(n), N, L, seed);
    ASSERT_EQ(w.ids.sizes(), (std::vector<int64_t>{N, L})) << n;
    ASSERT_EQ(static_cast<int64_t>(w.starts.size()), N) << n;
    for (int64_t r = 0; r < N; ++r) {
      const int64_t start = w.starts[static_cast<size_t>(r)];
      EXPECT_GE(start, 0);
      EXPECT_LE(start, n - L);
      for (int64_t t = 0; t < L; ++t) ASSERT_EQ(w.ids[r][t].item<int64_t>(), start + t) << "row " << r;
    }
    if (L == n) EXPECT_EQ(std::set<int64_t>(w.starts.begin(), w.starts.end()), std::set<int64_t>{0});
  }
}

TEST(Unit_CalibrationWindows, everyStartIsDrawnTheLastOneToo) {
  // 64 tokens, windows of 63: starts 0 and 1, each with probability 1/2; 200 windows miss one with probability 2^-199.
  const uint64_t seed = statecut::test::env_seed(20261206);
  const statecut::Windows w = statecut::sample_windows(counting_stream(64), 200, 63, seed);
  EXPECT_EQ(std::set<int64_t>(w.starts.begin(), w.starts.end()), (std::set<int64_t>{0, 1}));
}

TEST(Unit_CalibrationWindows, theSameSeedCutsTheSameWindowsAndAnotherSeedOthers) {
  const statecut::TokenStream s = counting_stream(5000);
  const auto a = statecut::sample_windows(s, 8, 100, 1), b = statecut::sample_windows(s, 8, 100, 1);
  const auto c = statecut::sample_windows(s, 8, 100, 2);
  EXPECT_EQ(a.starts, b.starts);
  EXPECT_TRUE(torch::equal(a.ids, b.ids));
  EXPECT_NE(a.starts, c.starts);  // 8 starts among 4901 places: equal by chance with probability ~1e-29
}

TEST(BadInput_CalibrationWindows, aStreamShorterThanOneWindowIsOneLineNamingIt) {
  try {
    statecut::sample_windows(counting_stream(10), 4, 11, 1);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "counting.safetensors: too short for 4×11 calibration windows: 10 tokens < 11");
  }
  EXPECT_THROW(statecut::sample_windows(counting_stream(10), 0, 5, 1), std::runtime_error);
  EXPECT_THROW(statecut::sample_windows(counting_stream(10), 2, 1, 1), std::runtime_error);
}
