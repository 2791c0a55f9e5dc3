/// Channel budget of the paper (DESIGN.md §4, anchor-original §2.0):
///   k' = max(1, floor(dk * (1 - ratio)))        the same in every head and layer,
/// or an explicit k with 1 <= k <= dk. Both throw ShapeError with a one-line reason on bad input.
/// The floor is taken of the double product; ratios of the paper give exact answers
/// (dk = 128: 0.3/0.4/0.5/0.75 -> 89/76/64/32; dk = 256 -> 179/153/128/64).
#pragma once
#include "reference/types.h"

namespace statecut::ref {

/// k' for a pruning ratio in the open interval (0, 1); throws ShapeError if ratio is outside
/// (0, 1) or not finite, or dk < 1.
Index budget_from_ratio(Index dk, double ratio);

/// Validates an explicit budget: throws ShapeError unless 1 <= k <= dk. Returns k.
Index validate_keep(Index k, Index dk);

}  // namespace statecut::ref
