// The selectors' seed rule and the faithful row subsample (select_rng.h).
#include "reference/select_rng.h"

#include <algorithm>
#include <numeric>

namespace statecut::ref {

std::uint64_t selection_stream(Index layer, Index head) {
  if (layer < 0 || head < 0) throw ShapeError("selection_stream: layer and head must be >= 0");
  return static_cast<std::uint64_t>(layer) * 1000003ULL + static_cast<std::uint64_t>(head);
}

SelectRng::SelectRng(std::uint64_t seed, std::uint64_t stream) {
  // splitmix64 of (seed, stream) so nearby seeds/streams give unrelated generators
  auto mix = [](std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  gen_.seed(mix(seed ^ mix(stream)));
}

SelectRng SelectRng::for_head(std::uint64_t seed, Index layer, Index head) {
  return SelectRng(seed, selection_stream(layer, head));
}

std::uint64_t SelectRng::next() { return gen_(); }

std::uint64_t SelectRng::below(std::uint64_t n) {
  if (n == 0) throw ShapeError("SelectRng::below: n must be >= 1");
  // rejection of the top partial block keeps every residue equally likely
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
  std::uint64_t x;
  do x = gen_();
  while (x >= limit);
  return x % n;
}

std::vector<Index> faithful_subsample(Index m, Index take, SelectRng& rng) {
  if (m < 0 || take < 1) throw ShapeError("faithful_subsample: need m >= 0 and take >= 1");
  std::vector<Index> rows(m);
  std::iota(rows.begin(), rows.end(), Index{0});
  if (m <= take) return rows;
  for (Index t = 0; t < take; ++t)
    std::swap(rows[t], rows[t + static_cast<Index>(rng.below(static_cast<std::uint64_t>(m - t)))]);
  rows.resize(take);
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace statecut::ref
