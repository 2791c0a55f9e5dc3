/// rel_err of tests/rel_err.h for tensors (any dtype and device; computed in double on the CPU), same conventions.
#pragma once
#include <ATen/ATen.h>

#include <limits>

#include "tests/rel_err.h"

namespace statecut::test {

inline double rel_err(const at::Tensor& y, const at::Tensor& ref) {
  const at::Tensor a = y.detach().to(at::kCPU, at::kDouble), b = ref.detach().to(at::kCPU, at::kDouble);
  if (a.sizes() != b.sizes() || !at::isfinite(a).all().item<bool>()) return std::numeric_limits<double>::infinity();
  const double num = (a - b).norm().item<double>(), den = b.norm().item<double>();
  return den > 0 ? num / den : num;
}

}  // namespace statecut::test
