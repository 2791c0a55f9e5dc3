// Test inputs with meaning for the selector tests and properties: Gaussian and orthonormal factors
// from a platform-independent generator, matrices with a prescribed spectrum, the Kahan matrix.
#pragma once
#include "reference/selectors.h"
#include "tests/test_env.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace statecut::test {
using ref::Index;
using ref::Mat;
using ref::Vec;

/// Master seed: env STATECUT_SEED or 20240213; printed once per process so a failure replays.
inline std::uint64_t master_seed() { return env_seed(20240213ULL); }

/// Standard normal entries by Box–Muller on SelectRng (same numbers on every platform).
inline Mat gaussian(Index m, Index n, ref::SelectRng& rng) {
  Mat g(m, n);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < m; ++i) {
      const double u1 = (static_cast<double>(rng.next() >> 11) + 0.5) * 0x1.0p-53;
      const double u2 = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
      g(i, j) = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
  return g;
}

/// m x n with orthonormal columns (m >= n).
inline Mat orthonormal(Index m, Index n, ref::SelectRng& rng) {
  Eigen::HouseholderQR<Mat> qr(gaussian(m, n, rng));
  return qr.householderQ() * Mat::Identity(m, n);
}

/// U diag(sigma) V^T with random orthonormal U [m, p], V [n, p], p = sigma.size() <= min(m, n).
inline Mat with_spectrum(Index m, Index n, const Vec& sigma, ref::SelectRng& rng) {
  const Index p = sigma.size();
  return orthonormal(m, p, rng) * sigma.asDiagonal() * orthonormal(n, p, rng).transpose();
}

/// sigma_i = 10^(-e (i-1)/(p-1)): geometric decay from 1 to 10^-e.
inline Vec geometric(Index p, double e) {
  Vec s(p);
  for (Index i = 0; i < p; ++i) s(i) = std::pow(10.0, p == 1 ? 0.0 : -e * double(i) / double(p - 1));
  return s;
}

/// Kahan's matrix diag(1, s, .., s^{n-1}) (I - c * strict upper ones), s^2 + c^2 = 1, with column j
/// scaled by (1 - 1e-7)^j so QRCP's ties break towards no pivoting (its classic failure) despite the
/// rounding of its column-norm downdates.
inline Mat kahan(Index n, double c) {
  const double s = std::sqrt(1.0 - c * c);
  Mat K = Mat::Zero(n, n);
  for (Index i = 0; i < n; ++i) {
    K(i, i) = std::pow(s, double(i));
    for (Index j = i + 1; j < n; ++j) K(i, j) = -c * std::pow(s, double(i));
  }
  for (Index j = 0; j < n; ++j) K.col(j) *= std::pow(1.0 - 1e-7, double(j));
  return K;
}

/// Singular values, descending.
inline Vec singular_values(const Mat& A) { return Eigen::BDCSVD<Mat>(A).singularValues(); }

}  // namespace statecut::test
