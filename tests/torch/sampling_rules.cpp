/// The next-token rule of `statecut generate` (optimized/generate/sampling.h) drawn many times from one row of
/// logits with known probabilities: each id's frequency must match the rule's probability. N = 40000 draws a case;
/// a frequency's standard deviation is at most sqrt(0.25 / N) = 0.0025, so the tolerance 0.0125 is 5 of them (a
/// correct sampler fails with probability < 1e-6 an id, any seed), while each broken rule moves some probability by
/// >= 0.05. Seed: STATECUT_SEED (printed).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "optimized/generate/sampling.h"
#include "tests/test_env.h"

namespace {

using statecut::SamplingOptions;

constexpr int kDraws = 40000;
constexpr double kTolerance = 0.0125;  // 5 standard deviations of a frequency at N = 40000 (header)

/// Logits whose softmax at temperature 1 is p: log p (any shift would do).
std::vector<double> logits_of(const std::vector<double>& p) {
  std::vector<double> l;
  for (double x : p) l.push_back(std::log(x));
  return l;
}

void expect_frequencies(const std::vector<double>& logits, const SamplingOptions& s, const std::vector<double>& want) {
  std::mt19937_64 rng(statecut::test::env_seed(20261206));
  std::vector<int> count(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) ++count.at(static_cast<size_t>(statecut::sample_row(logits, s, rng)));
  for (size_t id = 0; id < want.size(); ++id)
    EXPECT_NEAR(static_cast<double>(count[id]) / kDraws, want[id], want[id] == 0.0 ? 0.0 : kTolerance)
        << "id " << id << " (temperature " << s.temperature << ", top-k " << s.top_k << ", top-p " << s.top_p << ")";
}

const std::vector<double> kP = {0.2, 0.5, 0.3};  // the largest in the middle: order of ids is not order of logits

}  // namespace

TEST(Unit_Sampling, temperatureOneDrawsTheSoftmax) {
  expect_frequencies(logits_of(kP), {1.0, 0, 1.0}, kP);
}

TEST(Unit_Sampling, temperatureScalesTheLogits) {
  // τ = 0.5: p_i ∝ p_i^2 = (0.04, 0.25, 0.09) / 0.38; τ = 2: p_i ∝ sqrt(p_i).
  expect_frequencies(logits_of(kP), {0.5, 0, 1.0}, {0.04 / 0.38, 0.25 / 0.38, 0.09 / 0.38});
  const double z = std::sqrt(0.2) + std::sqrt(0.5) + std::sqrt(0.3);
  expect_frequencies(logits_of(kP), {2.0, 0, 1.0}, {std::sqrt(0.2) / z, std::sqrt(0.5) / z, std::sqrt(0.3) / z});
}

TEST(Unit_Sampling, topKKeepsTheKLargestRenormalised) {
  expect_frequencies(logits_of(kP), {1.0, 2, 1.0}, {0.0, 0.5 / 0.8, 0.3 / 0.8});
  expect_frequencies(logits_of(kP), {1.0, 1, 1.0}, {0.0, 1.0, 0.0});
  expect_frequencies(logits_of(kP), {1.0, 3, 1.0}, kP);
  expect_frequencies(logits_of(kP), {1.0, 7, 1.0}, kP);  // more than the vocabulary: all
}

TEST(Unit_Sampling, topPKeepsTheSmallestPrefixReachingItsMass) {
  // By falling probability 0.5, 0.3, 0.2: P = 0.6 needs two (0.8 >= 0.6); P = 0.5 one (0.5 >= 0.5, as transformers'
  // TopPLogitsWarper keeps it); P = 0.81 all three.
  expect_frequencies(logits_of(kP), {1.0, 0, 0.6}, {0.0, 0.5 / 0.8, 0.3 / 0.8});
  expect_frequencies(logits_of(kP), {1.0, 0, 0.5}, {0.0, 1.0, 0.0});
  expect_frequencies(logits_of(kP), {1.0, 0, 0.81}, kP);
  expect_frequencies(logits_of(kP), {1.0, 2, 0.9}, {0.0, 0.5 / 0.8, 0.3 / 0.8});  // top-k first, then top-p of the rest
}

TEST(Unit_Sampling, greedyTakesTheLowestIdAmongEqualMaxima) {
  std::mt19937_64 rng(1);
  EXPECT_EQ(statecut::sample_row({0.1, 3.0, -2.0, 3.0}, {0.0, 0, 1.0}, rng), 1);
  EXPECT_EQ(statecut::sample_row({0.1, 3.0, -2.0, 3.0}, {0.0, 1, 0.5}, rng), 1);  // top-k / top-p do not apply
  // top-k 1 at any temperature is the same pick.
  EXPECT_EQ(statecut::sample_row({0.1, 3.0, -2.0, 3.0}, {5.0, 1, 1.0}, rng), 1);
}

TEST(Unit_Sampling, theSameSeedDrawsTheSameIds) {
  const std::vector<double> l = logits_of({0.1, 0.2, 0.3, 0.4});
  std::mt19937_64 a(7), b(7);
  const SamplingOptions s{0.9, 3, 0.95};
  for (int i = 0; i < 200; ++i) ASSERT_EQ(statecut::sample_row(l, s, a), statecut::sample_row(l, s, b));
}
