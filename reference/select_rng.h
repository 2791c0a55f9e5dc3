/// The seed rule of the selectors: every seeded draw of a selection (rand's subset, drrqr --faithful's row
/// subsample) for layer l, key head h comes from its own generator
///   SelectRng(seed, selection_stream(l, h)),   selection_stream(l, h) = l * 1000003 + h
/// l is the model's layer index (what statecut.json records), h the key head inside the layer. A head's draws
/// depend on nothing else (not the other heads, the layer count, nor the order heads are visited), so
/// `statecut prune`, `statecut select --layer l --head h` and verify re-derive the same draws.
/// The generator is mt19937_64 (its output is fixed by the C++ standard) seeded with splitmix64(seed, stream), and
/// uniform integers are drawn by rejection (no std::uniform_int_distribution): the same on every platform.
#pragma once
#include "reference/types.h"

#include <cstdint>
#include <random>
#include <vector>

namespace statecut::ref {

/// l * 1000003 + h (distinct for h < 1000003).
std::uint64_t selection_stream(Index layer, Index head);

class SelectRng {
 public:
  SelectRng(std::uint64_t seed, std::uint64_t stream);
  /// The generator of layer `layer`, head `head` (the seed rule above).
  static SelectRng for_head(std::uint64_t seed, Index layer, Index head);
  std::uint64_t next();                  ///< raw 64-bit output
  std::uint64_t below(std::uint64_t n);  ///< uniform in [0, n), n >= 1
 private:
  std::mt19937_64 gen_;  // the standard fixes its output sequence, unlike the distributions
};

/// The faithful row subsample of drrqr (the published rrqr.py draws 5,000 rows): `take` distinct row indices of
/// 0..m-1 by partial Fisher-Yates on `rng`, returned in ascending order (the subsample keeps M's row order), or
/// every row when m <= take. Calibration (which streams the rows) and strong_rrqr's faithful mode (which gets the
/// whole matrix) both call it, so both keep the same rows.
std::vector<Index> faithful_subsample(Index m, Index take, SelectRng& rng);

}  // namespace statecut::ref
