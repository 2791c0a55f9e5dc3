/// LibTorch tensors to the reference's f64 Eigen types and back: the one bridge between optimized/ and reference/
/// (selection, verify, rank). Copies, never views: the reference works on its own f64 data.
#pragma once
#include <torch/torch.h>

#include "reference/types.h"

namespace statecut {

/// A 2-D tensor of any dtype and device as an f64 matrix (detached; rows and columns as the tensor's).
ref::Mat to_mat(const torch::Tensor& t);
/// A tensor of any shape as an f64 vector of its elements in row-major order.
ref::Vec to_vec(const torch::Tensor& t);
/// An f64 matrix as a [rows, cols] f64 CPU tensor.
torch::Tensor from_mat(const ref::Mat& m);

}  // namespace statecut
