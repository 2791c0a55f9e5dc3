/// Common types of statecut::ref, the double-precision oracle.
///
/// Conventions (DESIGN.md §3), per head:
///   q, k : [T, dk]   rows are time steps (row t is q_t / k_t)
///   v    : [T, dv]
///   beta, g, alpha, gamma : [T]
///   state S : [dk, dv]  key-major (fla's [B,H,K,V]); the readout is o_t = S_t^T (scale q_t)
///   o    : [T, dv]
#pragma once
#include <Eigen/Dense>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace statecut::ref {

using Mat = Eigen::MatrixXd;
using Vec = Eigen::VectorXd;
using Index = Eigen::Index;

/// Output of one head's recurrence: o [T, dv] and the final state S_T [dk, dv].
struct HeadResult {
  Mat o;
  Mat state;
};

/// Thrown on shape or argument errors; the message names the argument and the problem.
struct ShapeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

}  // namespace statecut::ref
