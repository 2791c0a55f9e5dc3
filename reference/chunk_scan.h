/// Internal pieces shared by the chunked forms of the recurrences (not part of the public API).
///
/// scan_chunks: the chunk loop. Rows [c0, c0 + n) of q, k, v [T, *] go to body(rows, S, O) in order, n = chunk
/// except for the last chunk; S [dk, dv] holds the state before the chunk (S0 or zero at c0 = 0) and body leaves
/// the state after it; O is the chunk's n rows of the output o [T, dv]. Returns {o, S after the last chunk}.
///
/// chunk_decay: the within-chunk decays of a chunk from its per-step log decays a [n] (a = g for the gated delta
/// rule, a = dt A for Mamba-2):
///   G_i = a_0 + ... + a_i,   D_ij = exp(G_i - G_j) = exp(a_{j+1} + ... + a_i) for j <= i, 0 above the diagonal.
/// D is summed directly, not as G_i - G_j: subtracting two large cumulative sums would lose |G| eps absolute
/// accuracy in the exponent.
#pragma once
#include <algorithm>
#include <cmath>

#include "reference/recurrence_checks.h"
#include "reference/types.h"

namespace statecut::ref::detail {

/// Rows [c0, c0 + n) of q, k, v.
struct ChunkRows {
  Index c0, n;
  Mat::ConstRowsBlockXpr Q, K, V;
};

template <class Body>
HeadResult scan_chunks(const char* fn, const Mat& q, const Mat& k, const Mat& v, const Mat* S0, Index chunk,
                       Body&& body) {
  check_chunk(fn, chunk);
  const Index T = q.rows();
  Mat S = initial_state(S0, q.cols(), v.cols());
  Mat o(T, v.cols());
  for (Index c0 = 0; c0 < T; c0 += chunk) {
    const Index n = std::min(chunk, T - c0);
    Mat::RowsBlockXpr O = o.middleRows(c0, n);
    body(ChunkRows{c0, n, q.middleRows(c0, n), k.middleRows(c0, n), v.middleRows(c0, n)}, S, O);
  }
  return {o, S};
}

struct ChunkDecay {
  Vec G;  // [n] within-chunk cumulative log decay
  Mat D;  // [n, n] exp(G_i - G_j) on and below the diagonal
};

inline ChunkDecay chunk_decay(const Vec& a) {
  const Index n = a.size();
  ChunkDecay d{Vec(n), Mat::Zero(n, n)};
  double acc = 0.0;
  for (Index i = 0; i < n; ++i) d.G(i) = acc += a(i);
  for (Index i = 0; i < n; ++i) {
    double part = 0.0;
    d.D(i, i) = 1.0;
    for (Index j = i - 1; j >= 0; --j) d.D(i, j) = std::exp(part += a(j + 1));
  }
  return d;
}

}  // namespace statecut::ref::detail
