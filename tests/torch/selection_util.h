// Subset selections written by rule for surgery tests: one LayerSelection per prunable layer, head h of layer L
// keeping keep_of(L, h).
#pragma once
#include <cstdint>
#include <vector>

#include "optimized/prune/surgery.h"

namespace statecut::test {

template <typename KeepOf>
std::vector<LayerSelection> keep_per_head(const std::vector<PrunableLayer>& layers, KeepOf keep_of) {
  std::vector<LayerSelection> sel;
  for (const auto& L : layers) {
    LayerSelection s;
    s.layer = L.layer;
    for (int h = 0; h < L.num_key_heads; ++h) s.keep.push_back(keep_of(L, h));
    sel.push_back(std::move(s));
  }
  return sel;
}

}  // namespace statecut::test
