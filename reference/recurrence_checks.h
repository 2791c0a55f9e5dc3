/// Internal argument checks shared by the recurrence files (not part of the public API).
#pragma once
#include <initializer_list>
#include <string>

#include "reference/types.h"

namespace statecut::ref::detail {

inline std::string dims(const Mat& m) {
  return "[" + std::to_string(m.rows()) + ", " + std::to_string(m.cols()) + "]";
}

/// q, k [T, dk], v [T, dv], S0 [dk, dv]; `fn` names the caller in the message.
inline void check_qkv(const char* fn, const Mat& q, const Mat& k, const Mat& v, const Mat* S0) {
  if (k.rows() != q.rows() || k.cols() != q.cols())
    throw ShapeError(std::string(fn) + ": k is " + dims(k) + " but q is " + dims(q));
  if (v.rows() != q.rows())
    throw ShapeError(std::string(fn) + ": v has " + std::to_string(v.rows()) + " rows but q has " +
                     std::to_string(q.rows()));
  if (S0 && (S0->rows() != q.cols() || S0->cols() != v.cols()))
    throw ShapeError(std::string(fn) + ": S0 is " + dims(*S0) + ", expected [" + std::to_string(q.cols()) + ", " +
                     std::to_string(v.cols()) + "]");
}

/// A per-step vector `name` must have T entries.
inline void check_steps(const char* fn, const char* name, const Vec& x, Index T) {
  if (x.size() != T)
    throw ShapeError(std::string(fn) + ": " + name + " has " + std::to_string(x.size()) + " entries, expected T = " +
                     std::to_string(T));
}

/// A per-step input of a rule, by name (for the message) and value.
struct StepInput {
  const char* name;
  const Vec& x;
};

/// Every check of one rule's inputs: q, k, v, S0 as check_qkv, then each per-step input has T = q.rows() entries.
inline void check_rule(const char* fn, const Mat& q, const Mat& k, const Mat& v, const Mat* S0,
                       std::initializer_list<StepInput> steps) {
  check_qkv(fn, q, k, v, S0);
  for (const StepInput& s : steps) check_steps(fn, s.name, s.x, q.rows());
}

inline void check_chunk(const char* fn, Index chunk) {
  if (chunk < 1) throw ShapeError(std::string(fn) + ": chunk must be >= 1, got " + std::to_string(chunk));
}

inline Mat initial_state(const Mat* S0, Index dk, Index dv) { return S0 ? *S0 : Mat::Zero(dk, dv); }

}  // namespace statecut::ref::detail
