#include "reference/selection_budget.h"

#include <cmath>
#include <string>

namespace statecut::ref {

Index budget_from_ratio(Index dk, double ratio) {
  if (dk < 1) throw ShapeError("budget: dk must be >= 1, got " + std::to_string(dk));
  if (!std::isfinite(ratio) || ratio <= 0.0 || ratio >= 1.0)
    throw ShapeError("budget: ratio must lie in the open interval (0, 1), got " + std::to_string(ratio));
  // dk·(1 − ratio) in doubles lands just below an integer that it equals in exact arithmetic (20·(1 − 0.8) =
  // 3.9999999999999996): the slack, 1e-12·dk, is far above that rounding (a few ulps, ~1e-13 at dk 256) and far
  // below the fractional part of any product with a ratio of up to nine decimals, so floor takes the exact value.
  const double kept = std::floor(static_cast<double>(dk) * (1.0 - ratio) + 1e-12 * static_cast<double>(dk));
  return std::max<Index>(1, static_cast<Index>(kept));
}

Index validate_keep(Index k, Index dk) {
  if (dk < 1) throw ShapeError("budget: dk must be >= 1, got " + std::to_string(dk));
  if (k < 1) throw ShapeError("budget: keep must be >= 1, got " + std::to_string(k));
  if (k > dk)
    throw ShapeError("budget: keep = " + std::to_string(k) + " exceeds the " + std::to_string(dk) +
                     " channels of a head");
  return k;
}

}  // namespace statecut::ref
