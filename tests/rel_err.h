/// The tests' one error metric (as CUTLASS keeps its error metrics in one place): normwise relative error
///   rel_err(y, ref) = ||y - ref||_F / ||ref||_F     in double, on the CPU
/// with the conventions every test relies on: y of another shape, or holding NaN/Inf, gives +inf (fails any bound);
/// a zero reference gives the absolute norm ||y||_F (0 when both are 0). Tensors: tests/rel_err_tensor.h.
#pragma once
#include <cmath>
#include <limits>
#include <vector>

namespace statecut::test {

inline double rel_err(const std::vector<double>& y, const std::vector<double>& ref) {
  if (y.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) return std::numeric_limits<double>::infinity();
    num += (y[i] - ref[i]) * (y[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}


}  // namespace statecut::test
