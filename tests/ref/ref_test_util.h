/// Shared helpers of the tests/ref and tests/golden executables (header only; not a test file itself).
///   - seeded RNG: STATECUT_SEED overrides the default, and the seed is printed so a failure can be replayed;
///   - normwise relative error ||y - y_ref||_F / ||y_ref||_F (the verdict), max-abs error as a diagnostic;
///   - recurrence inputs with meaning: L2-normalised keys, beta in [0, 1], log-gates in [-20, -1e-4].
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>
#include <string>

#include "reference/primitives.h"
#include "reference/types.h"
#include "tests/test_env.h"

namespace statecut::test {

using ref::Index;
using ref::Mat;
using ref::Vec;

constexpr double kEps = std::numeric_limits<double>::epsilon();

/// Seed from env STATECUT_SEED (decimal), else `fallback`; printed once per call site.
inline std::uint64_t test_seed(std::uint64_t fallback, const std::string& what) {
  const std::uint64_t seed = seed_value(fallback);
  std::cout << "[seed] " << what << ": STATECUT_SEED=" << seed << "\n";
  return seed;
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  Mat normal(Index r, Index c) {
    std::normal_distribution<double> d(0.0, 1.0);
    Mat m(r, c);
    for (Index j = 0; j < c; ++j)
      for (Index i = 0; i < r; ++i) m(i, j) = d(gen_);
    return m;
  }
  Vec uniform(Index n, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    Vec v(n);
    for (Index i = 0; i < n; ++i) v(i) = d(gen_);
    return v;
  }
  /// Log-gates g = -exp(u), u uniform in [log 1e-4, log 20]: decays from almost 1 to a near reset.
  Vec log_gates(Index n) { return -uniform(n, std::log(1e-4), std::log(20.0)).array().exp().matrix(); }
  Mat unit_rows(Index r, Index c) { return ref::l2norm_rows(normal(r, c), 0.0); }

 private:
  std::mt19937_64 gen_;
};

inline double rel_err(const Mat& y, const Mat& y_ref) {
  const double d = y_ref.norm();
  return d == 0.0 ? (y - y_ref).norm() : (y - y_ref).norm() / d;
}

inline double max_abs(const Mat& y, const Mat& y_ref) {
  return y.size() == 0 ? 0.0 : (y - y_ref).cwiseAbs().maxCoeff();
}

/// EXPECT that `stmt` throws ref::ShapeError whose message contains `needle`.
#define STATECUT_EXPECT_SHAPE_ERROR(stmt, needle)                                                      \
  do {                                                                                                 \
    try {                                                                                              \
      stmt;                                                                                            \
      ADD_FAILURE() << "no ShapeError from: " #stmt;                                                   \
    } catch (const ::statecut::ref::ShapeError& e) {                                                   \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)                                 \
          << "message '" << e.what() << "' does not name '" << (needle) << "'";                       \
    }                                                                                                  \
  } while (0)

}  // namespace statecut::test
