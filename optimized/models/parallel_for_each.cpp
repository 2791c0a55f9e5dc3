// Heads on LibTorch's intra-op threads (parallel_for_each.h).
#include "optimized/models/parallel_for_each.h"

#include <ATen/Parallel.h>

#include <exception>
#include <mutex>

namespace statecut {

void parallel_for_each(int64_t n, const std::function<void(int64_t)>& f) {
  std::mutex mu;
  std::exception_ptr first;
  at::parallel_for(0, n, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      try {
        f(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    }
  });
  if (first) std::rethrow_exception(first);
}

}  // namespace statecut
