// Equiv_StateCarry: run(T1 + T2) = run(T2, S0 = run(T1).state) for every rule, recurrent and chunked,
// with splits inside and on chunk boundaries (T1 in {1, 63, 64}, T2 in {1, 65}).
#include <functional>
#include <sstream>

#include "reference/delta_rule.h"
#include "reference/gated_delta_rule.h"
#include "reference/general_rule.h"
#include "reference/linear_attention.h"
#include "reference/mamba2_ssd.h"
#include "tests/ref/ref_test_util.h"

namespace statecut::ref {
namespace {

constexpr Index kCarryDk = 89, kCarryDv = 33;

/// All per-step inputs of one sequence; slice(t0, n) keeps rows [t0, t0 + n).
struct Seq {
  Mat q, k, v;
  Vec beta, g, alpha, gamma, dt;
  Seq slice(Index t0, Index n) const {
    return {q.middleRows(t0, n), k.middleRows(t0, n), v.middleRows(t0, n), beta.segment(t0, n), g.segment(t0, n),
            alpha.segment(t0, n), gamma.segment(t0, n), dt.segment(t0, n)};
  }
};

Seq make_seq(Index T, test::Rng& rng) {
  Seq s;
  s.q = rng.normal(T, kCarryDk);
  s.k = rng.unit_rows(T, kCarryDk);
  s.v = rng.normal(T, kCarryDv);
  s.beta = rng.uniform(T, 0, 1);
  s.g = rng.log_gates(T);
  s.alpha = rng.uniform(T, -1, 1);
  s.gamma = rng.normal(T, 1);
  s.dt = rng.uniform(T, 0.01, 2.0);
  return s;
}

using Runner = std::function<HeadResult(const Seq&, const Mat*)>;

struct Form {
  const char* name;
  Runner run;
};

std::vector<Form> forms() {
  const double sc = 1.0 / std::sqrt(double(kCarryDk));
  return {
      {"linear_recurrent", [=](const Seq& s, const Mat* S0) { return linear_attention_recurrent(s.q, s.k, s.v, sc, S0); }},
      {"linear_chunked", [=](const Seq& s, const Mat* S0) { return linear_attention_chunked(s.q, s.k, s.v, sc, S0); }},
      {"delta_recurrent", [=](const Seq& s, const Mat* S0) { return delta_rule_recurrent(s.q, s.k, s.v, s.beta, sc, S0); }},
      {"delta_chunked", [=](const Seq& s, const Mat* S0) { return delta_rule_chunked(s.q, s.k, s.v, s.beta, sc, S0); }},
      {"gated_recurrent",
       [=](const Seq& s, const Mat* S0) { return gated_delta_recurrent(s.q, s.k, s.v, s.beta, s.g, sc, S0); }},
      {"gated_chunked",
       [=](const Seq& s, const Mat* S0) { return gated_delta_chunked(s.q, s.k, s.v, s.beta, s.g, sc, S0); }},
      {"general_recurrent",
       [=](const Seq& s, const Mat* S0) {
         return general_rule_recurrent(s.q, s.k, s.v, s.alpha, s.alpha - s.beta, s.gamma, sc, S0);
       }},
      {"general_chunked",
       [=](const Seq& s, const Mat* S0) {
         return general_rule_chunked(s.q, s.k, s.v, s.alpha, s.alpha - s.beta, s.gamma, sc, S0);
       }},
      {"mamba2_recurrent", [](const Seq& s, const Mat* S0) { return mamba2_ssd_recurrent(s.q, s.k, s.v, s.dt, -0.8, 0.5, S0); }},
      {"mamba2_chunked", [](const Seq& s, const Mat* S0) { return mamba2_ssd_chunked(s.q, s.k, s.v, s.dt, -0.8, 0.5, S0); }},
  };
}

TEST(Equiv_StateCarry, splitRunEqualsWholeRun) {
  test::Rng rng(test::test_seed(4242, "Equiv_StateCarry.splitRunEqualsWholeRun"));
  for (const Form& f : forms())
    for (Index T1 : {1, 63, 64})
      for (Index T2 : {1, 65}) {
        SCOPED_TRACE(std::string(f.name) + " T1=" + std::to_string(T1) + " T2=" + std::to_string(T2));
        const Seq s = make_seq(T1 + T2, rng);
        const Mat S0 = rng.normal(kCarryDk, kCarryDv);
        const HeadResult whole = f.run(s, &S0);
        const HeadResult first = f.run(s.slice(0, T1), &S0);
        const HeadResult second = f.run(s.slice(T1, T2), &first.state);
        Mat o(T1 + T2, kCarryDv);
        o << first.o, second.o;
        // The split changes only where chunk boundaries fall, i.e. the order of roundings: n eps with
        // n = T + dk + chunk as in Equiv_Chunked, factor 2 as margin.
        const double bound = 2 * test::kEps * double(T1 + T2 + kCarryDk + 64);
        EXPECT_LE(test::rel_err(o, whole.o), bound);
        EXPECT_LE(test::rel_err(second.state, whole.state), bound);
      }
}

}  // namespace
}  // namespace statecut::ref
