// Tensor <-> Eigen copies (eigen_tensor.h).
#include "optimized/prune/eigen_tensor.h"

#include <stdexcept>
#include <string>

namespace statecut {
namespace {
using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}  // namespace

ref::Mat to_mat(const torch::Tensor& t) {
  if (t.dim() != 2) throw std::invalid_argument("to_mat: a " + std::to_string(t.dim()) + "-D tensor, not 2-D");
  // One pass: the column-major Mat is the row-major [cols, rows] tensor tᵀ, so LibTorch converts (dtype, device) and
  // transposes straight into the Mat's memory (no f64 row-major temporary; 1.3B prune: select time was that copy).
  ref::Mat m(t.size(0), t.size(1));
  if (m.size() > 0) torch::from_blob(m.data(), {t.size(1), t.size(0)}, torch::kFloat64).copy_(t.detach().t());
  return m;
}

ref::Vec to_vec(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  return Eigen::Map<const ref::Vec>(c.data_ptr<double>(), c.numel());
}

torch::Tensor from_mat(const ref::Mat& m) {
  torch::Tensor t = torch::empty({m.rows(), m.cols()}, torch::kFloat64);
  Eigen::Map<RowMajor>(t.data_ptr<double>(), m.rows(), m.cols()) = m;
  return t;
}

}  // namespace statecut
