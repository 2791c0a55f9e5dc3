/// RapidCheck generators with meaning, shared by the theorem / recurrence / metamorphic properties.
///
/// What they produce (all double):
///   - sizes that matter: T in {1, 2, 17, 63, 64, 65, 127, 130} (chunk edges around 64), dk in {1, 2, 5, 16, 63,
///     65, 89} (89 = the paper's 30%-pruned DeltaNet head), dv in {1, 3, 16, 33, 64, 65, 70} (dv != dk);
///     small enough that 100 cases of a property run in well under a second;
///   - Haar-random orthogonal T (QR of a Gaussian with the signs of diag(R) fixed), L2-normalised keys
///     (rows divided by their exact norm, not fla's eps convention), beta in [0, 1] (or [0, 2]), log-gates
///     g in [-20, -1e-4] (log-uniform in |g|), matrices with prescribed singular spectra U diag(s) V^T.
///
/// Randomness: RapidCheck draws the sizes (they shrink) and a 64-bit seed (not shrunk) that feeds a
/// std::mt19937_64 for the Gaussian entries, so a counterexample prints its sizes and seed and RC_PARAMS replays it.
/// The master seed (master_seed.h): RC_PARAMS="seed=N" wins; else STATECUT_SEED=N; else the fixed default
/// kDefaultSeed, so CI runs the same cases every time. It is printed once on stderr.
#pragma once

#include <rapidcheck.h>

#include <Eigen/QR>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "properties/master_seed.h"
#include "reference/delta_rule.h"
#include "reference/enum_names.h"
#include "reference/gated_delta_rule.h"
#include "reference/general_rule.h"
#include "reference/linear_attention.h"
#include "reference/mamba2_ssd.h"
#include "reference/types.h"

namespace statecut::prop {

using ref::Index;
using ref::Mat;
using ref::Vec;

/// Machine epsilon of double (2^-52); bounds are asserted as lhs <= rhs (1 + c eps).
constexpr double kEps = std::numeric_limits<double>::epsilon();

// ---------------------------------------------------------------------------------------------------------------
// Deterministic matrix factories (driven by an Rng seeded from a RapidCheck-drawn seed)
// ---------------------------------------------------------------------------------------------------------------

struct Rng {
  explicit Rng(std::uint64_t seed) : eng(seed) {}
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(eng); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(eng); }
  Index integer(Index lo, Index hi) { return std::uniform_int_distribution<Index>(lo, hi)(eng); }
  std::mt19937_64 eng;
};

inline Mat gaussian(Rng& rng, Index rows, Index cols) {
  Mat m(rows, cols);
  for (Index j = 0; j < cols; ++j)
    for (Index i = 0; i < rows; ++i) m(i, j) = rng.normal();
  return m;
}

inline Vec uniform_vec(Rng& rng, Index n, double lo, double hi) {
  Vec v(n);
  for (Index i = 0; i < n; ++i) v(i) = rng.uniform(lo, hi);
  return v;
}

/// Haar-distributed orthogonal n x n matrix: Q of a Gaussian's QR, columns signed so that diag(R) > 0.
inline Mat random_orthogonal(Rng& rng, Index n) {
  const Mat g = gaussian(rng, n, n);
  Eigen::HouseholderQR<Mat> qr(g);
  Mat q = qr.householderQ() * Mat::Identity(n, n);
  const Mat r = qr.matrixQR().triangularView<Eigen::Upper>();
  for (Index j = 0; j < n; ++j)
    if (r(j, j) < 0) q.col(j) = -q.col(j);
  return q;
}

/// n x r matrix with orthonormal columns (r <= n), a random r-dimensional subspace of R^n.
inline Mat orthonormal_columns(Rng& rng, Index n, Index r) { return random_orthogonal(rng, n).leftCols(r); }

/// Rows scaled to unit Euclidean norm exactly (zero rows, which Gaussians never give, are left as they are).
inline Mat unit_rows(Mat m) {
  for (Index i = 0; i < m.rows(); ++i) {
    const double n = m.row(i).norm();
    if (n > 0) m.row(i) /= n;
  }
  return m;
}

/// L2-normalised Gaussian keys/queries [T, d].
inline Mat unit_keys(Rng& rng, Index T, Index d) { return unit_rows(gaussian(rng, T, d)); }

/// Log-gates g in [-20, -1e-4], log-uniform in |g| so both "almost no decay" and "forget everything" occur.
inline Vec log_gates(Rng& rng, Index T) {
  Vec g(T);
  for (Index t = 0; t < T; ++t) g(t) = -std::pow(10.0, rng.uniform(-4.0, std::log10(20.0)));
  return g;
}

/// Kinds of prescribed singular spectra, largest value 1.
enum class Spectrum { Flat, Geometric, OneLarge, Clustered, RankDeficient };

/// Every spectrum with its printed name (genSpectrum draws from the same table).
constexpr ref::detail::Named<Spectrum> kSpectra[] = {{Spectrum::Flat, "flat"},
                                                     {Spectrum::Geometric, "geometric"},
                                                     {Spectrum::OneLarge, "one-large"},
                                                     {Spectrum::Clustered, "clustered"},
                                                     {Spectrum::RankDeficient, "rank-deficient"}};
inline const char* spectrum_name(Spectrum s) { return ref::detail::name_of(kSpectra, s); }

/// n singular values in [1/cond, 1], non-increasing:
///   Flat: all 1 (kappa = 1);  Geometric: 1 ... 1/cond geometrically;  OneLarge: 1 then all 1/cond;
///   Clustered: half at 1, half at 1/cond;  RankDeficient: geometric over the first ceil(n/2), then exact zeros.
inline Vec make_spectrum(Spectrum kind, Index n, double cond) {
  Vec s(n);
  for (Index i = 0; i < n; ++i) {
    const double frac = n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.0;
    switch (kind) {
      case Spectrum::Flat: s(i) = 1.0; break;
      case Spectrum::Geometric: s(i) = std::pow(cond, -frac); break;
      case Spectrum::OneLarge: s(i) = i == 0 ? 1.0 : 1.0 / cond; break;
      case Spectrum::Clustered: s(i) = 2 * i < n ? 1.0 : 1.0 / cond; break;
      case Spectrum::RankDeficient: {
        const Index r = (n + 1) / 2;
        s(i) = i < r ? std::pow(cond, -(r > 1 ? static_cast<double>(i) / static_cast<double>(r - 1) : 0.0)) : 0.0;
        break;
      }
    }
  }
  return s;
}

/// rows x cols matrix U diag(s) V^T with Haar-random U, V; s has min(rows, cols) entries.
inline Mat with_spectrum(Rng& rng, Index rows, Index cols, const Vec& s) {
  const Index d = std::min(rows, cols);
  const Mat u = orthonormal_columns(rng, rows, d);
  const Mat v = orthonormal_columns(rng, cols, d);
  return u * s.head(d).asDiagonal() * v.transpose();
}

/// Normwise relative error ||a - b||_F / ||b||_F (absolute when b == 0).
inline double rel_err(const Mat& a, const Mat& b) {
  const double nb = b.norm();
  return nb > 0 ? (a - b).norm() / nb : (a - b).norm();
}

// ---------------------------------------------------------------------------------------------------------------
// One head of any recurrence, with inputs drawn the way the models produce them
// ---------------------------------------------------------------------------------------------------------------

/// The rules of DESIGN.md §3. Mamba2 reads q as C, k as B, v as x (value dt x), no scale.
enum class RuleKind { Linear, Delta, GatedDelta, General, Mamba2 };

/// Every rule with its printed name (genRule draws from the same table).
constexpr ref::detail::Named<RuleKind> kRules[] = {{RuleKind::Linear, "linear"},
                                                   {RuleKind::Delta, "delta"},
                                                   {RuleKind::GatedDelta, "gated_delta"},
                                                   {RuleKind::General, "general"},
                                                   {RuleKind::Mamba2, "mamba2"}};
inline const char* rule_name(RuleKind r) { return ref::detail::name_of(kRules, r); }

/// Inputs of one head. Only the fields the rule reads are filled.
struct RecurrenceCase {
  RuleKind rule = RuleKind::Linear;
  Mat q, k, v;             // [T, dk], [T, dk], [T, dv]
  Vec beta, g;             // Delta / GatedDelta (beta also General)
  Vec alpha, gamma;        // General
  Vec dt;                  // Mamba2 (after softplus)
  double A = -1.0, D = 0.0;  // Mamba2
  double scale = 1.0;
  Mat S0;                  // [dk, dv]; empty = zero initial state (nullptr)
  Index T() const { return q.rows(); }
  Index dk() const { return q.cols(); }
  Index dv() const { return v.cols(); }
};

/// Draws a head of `rule`:
///   Linear: Gaussian q, k / sqrt(dk);  Delta, GatedDelta, General: L2-normalised q, k, beta in [0, 1];
///   GatedDelta: log-gates in [-20, -1e-4];  General: alpha in [-1, 1], beta = alpha b with b in [0, 2], gamma in
///   [0, 1] (so alpha I - beta k k^T has spectral norm <= 1);  Mamba2: Gaussian B, C, dt = softplus(U(-3, 3)),
///   A = -exp(U(-3, 1)), D in [-1, 1].  scale = dk^{-1/2} (1 for Mamba2).  S0 Gaussian when with_S0.
/// Every transition is non-expansive (spectral norm <= 1), so ||S_t|| <= ||S_{t-1}|| + |gain_t| ||k_t|| ||v_t||.
inline RecurrenceCase draw_recurrence(Rng& rng, RuleKind rule, Index T, Index dk, Index dv, bool with_S0) {
  RecurrenceCase c;
  c.rule = rule;
  c.v = gaussian(rng, T, dv);
  c.scale = rule == RuleKind::Mamba2 ? 1.0 : 1.0 / std::sqrt(static_cast<double>(dk));
  if (rule == RuleKind::Linear || rule == RuleKind::Mamba2) {
    const double s = 1.0 / std::sqrt(static_cast<double>(dk));
    c.q = s * gaussian(rng, T, dk);
    c.k = s * gaussian(rng, T, dk);
  } else {
    c.q = unit_keys(rng, T, dk);
    c.k = unit_keys(rng, T, dk);
  }
  switch (rule) {
    case RuleKind::Linear: break;
    case RuleKind::Delta: c.beta = uniform_vec(rng, T, 0.0, 1.0); break;
    case RuleKind::GatedDelta:
      c.beta = uniform_vec(rng, T, 0.0, 1.0);
      c.g = log_gates(rng, T);
      break;
    case RuleKind::General:
      c.alpha = uniform_vec(rng, T, -1.0, 1.0);
      c.beta = c.alpha.cwiseProduct(uniform_vec(rng, T, 0.0, 2.0));
      c.gamma = uniform_vec(rng, T, 0.0, 1.0);
      break;
    case RuleKind::Mamba2:
      c.dt.resize(T);
      for (Index t = 0; t < T; ++t) c.dt(t) = std::log1p(std::exp(rng.uniform(-3.0, 3.0)));
      c.A = -std::exp(rng.uniform(-3.0, 1.0));
      c.D = rng.uniform(-1.0, 1.0);
      break;
  }
  if (with_S0) c.S0 = gaussian(rng, dk, dv);
  return c;
}

/// Runs the head through the reference, recurrent or chunked.
inline ref::HeadResult run(const RecurrenceCase& c, bool chunked, Index chunk = 64) {
  const Mat* S0 = c.S0.size() ? &c.S0 : nullptr;
  switch (c.rule) {
    case RuleKind::Linear:
      return chunked ? ref::linear_attention_chunked(c.q, c.k, c.v, c.scale, S0, chunk)
                     : ref::linear_attention_recurrent(c.q, c.k, c.v, c.scale, S0);
    case RuleKind::Delta:
      return chunked ? ref::delta_rule_chunked(c.q, c.k, c.v, c.beta, c.scale, S0, chunk)
                     : ref::delta_rule_recurrent(c.q, c.k, c.v, c.beta, c.scale, S0);
    case RuleKind::GatedDelta:
      return chunked ? ref::gated_delta_chunked(c.q, c.k, c.v, c.beta, c.g, c.scale, S0, chunk)
                     : ref::gated_delta_recurrent(c.q, c.k, c.v, c.beta, c.g, c.scale, S0);
    case RuleKind::General:
      return chunked ? ref::general_rule_chunked(c.q, c.k, c.v, c.alpha, c.beta, c.gamma, c.scale, S0, chunk)
                     : ref::general_rule_recurrent(c.q, c.k, c.v, c.alpha, c.beta, c.gamma, c.scale, S0);
    case RuleKind::Mamba2:
      return chunked ? ref::mamba2_ssd_chunked(c.q, c.k, c.v, c.dt, c.A, c.D, S0, chunk)
                     : ref::mamba2_ssd_recurrent(c.q, c.k, c.v, c.dt, c.A, c.D, S0);
  }
  throw std::logic_error("run: unknown rule");
}

/// The input gain of each step (the coefficient of k_t v_t^T): 1, beta, beta, gamma, dt.
inline Vec input_gain(const RecurrenceCase& c) {
  switch (c.rule) {
    case RuleKind::Linear: return Vec::Ones(c.T());
    case RuleKind::Delta:
    case RuleKind::GatedDelta: return c.beta;
    case RuleKind::General: return c.gamma;
    case RuleKind::Mamba2: return c.dt;
  }
  return Vec();
}

/// An upper bound of every ||S_t||_F for the non-expansive cases draw_recurrence makes:
/// ||S_0||_F + sum_t |gain_t| ||k_t|| ||v_t||. Rounding errors of the recurrence are relative to this magnitude.
inline double state_magnitude(const RecurrenceCase& c) {
  const Vec gain = input_gain(c);
  double m = c.S0.size() ? c.S0.norm() : 0.0;
  for (Index t = 0; t < c.T(); ++t) m += std::abs(gain(t)) * c.k.row(t).norm() * c.v.row(t).norm();
  return m;
}

/// Copies the case with the per-step inputs restricted to rows [begin, begin + len).
inline RecurrenceCase slice_steps(const RecurrenceCase& c, Index begin, Index len) {
  RecurrenceCase s = c;
  s.q = c.q.middleRows(begin, len);
  s.k = c.k.middleRows(begin, len);
  s.v = c.v.middleRows(begin, len);
  auto cut = [&](Vec& x, const Vec& from) {
    if (from.size()) x = from.segment(begin, len);
  };
  cut(s.beta, c.beta);
  cut(s.g, c.g);
  cut(s.alpha, c.alpha);
  cut(s.gamma, c.gamma);
  cut(s.dt, c.dt);
  return s;
}

/// Rounding budget of a head's recurrence, for two computations that agree in exact arithmetic (chunked vs
/// recurrent, a permuted or rotated key basis, a state carried across calls, a state projected on its span):
/// every transition draw_recurrence makes is non-expansive, so each step adds at most ~ (dk + dv) eps M to the
/// state's error, M = state_magnitude(c) >= every ||S_t||; over T steps, c = 4 (two runs, two products):
///   state  4 (T + 1)(dk + dv) eps M,   outputs  that times max_t ||q_t|| scale sqrt(T).
struct RoundingBudget {
  double state, out;
};

inline RoundingBudget rounding_budget(const RecurrenceCase& c) {
  const double state = 4.0 * static_cast<double>((c.T() + 1) * (c.dk() + c.dv())) * kEps * state_magnitude(c);
  const double q_scale = c.scale * c.q.rowwise().norm().maxCoeff() * std::sqrt(static_cast<double>(c.T()));
  return {state, state * q_scale};
}

// ---------------------------------------------------------------------------------------------------------------
// RapidCheck generators (sizes shrink toward the first listed value; the data seed does not shrink)
// ---------------------------------------------------------------------------------------------------------------

inline rc::Gen<Index> genSeqLen() { return rc::gen::elementOf(std::vector<Index>{1, 2, 17, 63, 64, 65, 127, 130}); }
inline rc::Gen<Index> genKeyDim() { return rc::gen::elementOf(std::vector<Index>{1, 2, 5, 16, 63, 65, 89}); }
inline rc::Gen<Index> genValueDim() { return rc::gen::elementOf(std::vector<Index>{1, 3, 16, 33, 64, 65, 70}); }
/// Chunk sizes of the chunked forms: 1 (degenerate), 16 and 64 (the default), plus one not dividing 64.
inline rc::Gen<Index> genChunk() { return rc::gen::elementOf(std::vector<Index>{64, 1, 16, 37}); }
inline rc::Gen<std::uint64_t> genSeed() { return rc::gen::noShrink(rc::gen::arbitrary<std::uint64_t>()); }
inline rc::Gen<RuleKind> genRule() { return rc::gen::elementOf(ref::detail::values_of(kRules)); }
inline rc::Gen<Spectrum> genSpectrum() { return rc::gen::elementOf(ref::detail::values_of(kSpectra)); }
/// Condition numbers of prescribed spectra: 1 (orthogonal) up to 1e6 (still far from 1/eps).
inline rc::Gen<double> genCond() { return rc::gen::elementOf(std::vector<double>{1.0, 2.0, 10.0, 1e3, 1e6}); }

/// A head of any rule as most recurrence properties draw it: rule, T, dk, dv, recurrent or chunked (chunk 64),
/// with or without S_0, all drawn by RapidCheck in that order (they shrink), then the data from a drawn seed;
/// rng continues that data stream for whatever else the property draws.
struct DrawnHead {
  RecurrenceCase c;
  bool chunked;
  Rng rng;
};

inline DrawnHead draw_head() {
  const RuleKind rule = *genRule();
  const Index T = *genSeqLen();
  const Index dk = *genKeyDim();
  const Index dv = *genValueDim();
  const bool chunked = *rc::gen::arbitrary<bool>();
  const bool with_S0 = *rc::gen::arbitrary<bool>();
  Rng rng(*genSeed());
  RecurrenceCase c = draw_recurrence(rng, rule, T, dk, dv, with_S0);
  return {std::move(c), chunked, std::move(rng)};
}

/// Counterexamples print spectra and rules by name (found by argument-dependent lookup).
inline void showValue(Spectrum s, std::ostream& os) { os << spectrum_name(s); }
inline void showValue(RuleKind r, std::ostream& os) { os << rule_name(r); }

}  // namespace statecut::prop


// ---------------------------------------------------------------------------------------------------------------
// Tightness classification: every bound property tags how close lhs came to rhs, so a vacuous bound shows.
// ---------------------------------------------------------------------------------------------------------------

/// Tags lhs/rhs of an upper bound lhs <= rhs in decades.
#define STATECUT_CLASSIFY_RATIO(ratio)                                                  \
  do {                                                                                  \
    const double r_ = (ratio);                                                          \
    RC_CLASSIFY(r_ >= 0.999, "lhs/rhs >= 0.999 (tight)");                               \
    RC_CLASSIFY(r_ >= 0.9 && r_ < 0.999, "lhs/rhs in [0.9, 0.999)");                    \
    RC_CLASSIFY(r_ >= 0.1 && r_ < 0.9, "lhs/rhs in [0.1, 0.9)");                        \
    RC_CLASSIFY(r_ >= 1e-3 && r_ < 0.1, "lhs/rhs in [1e-3, 0.1)");                      \
    RC_CLASSIFY(r_ < 1e-3, "lhs/rhs < 1e-3 (loose)");                                   \
  } while (false)

/// Tags an error measured in units of eps (err / eps): how much of the allowed budget was used.
#define STATECUT_CLASSIFY_EPS(err_over_eps)                                             \
  do {                                                                                  \
    const double e_ = (err_over_eps);                                                   \
    RC_CLASSIFY(e_ == 0.0, "error = 0 (bitwise)");                                      \
    RC_CLASSIFY(e_ > 0.0 && e_ < 1.0, "error in (0, 1) eps");                           \
    RC_CLASSIFY(e_ >= 1.0 && e_ < 10.0, "error in [1, 10) eps");                        \
    RC_CLASSIFY(e_ >= 10.0 && e_ < 100.0, "error in [10, 100) eps");                    \
    RC_CLASSIFY(e_ >= 100.0 && e_ < 1e3, "error in [100, 1e3) eps");                    \
    RC_CLASSIFY(e_ >= 1e3, "error >= 1e3 eps");                                         \
  } while (false)
