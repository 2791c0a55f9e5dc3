// Heads and layers on several threads (parallel_for_each.h).
#include "optimized/models/parallel_for_each.h"

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
// LibTorch's OpenMP runtime, already in the process; declared weak so that a build without it still links.
extern "C" void omp_set_num_threads(int) __attribute__((weak));
#endif

namespace statecut {

namespace {

#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
/// How many threads take items: what OMP_NUM_THREADS asks when it is set; else every hardware thread, at least
/// LibTorch's count. LibTorch defaults to the physical cores (1 on a 2-vCPU machine), right for its dense kernels;
/// the items here are per-head Eigen work and page faults of mmapped weights, where the second hardware thread of a
/// core helps: `prune --method l1` of the 1.3B selected in 7.4 s on 1 thread, 2.5 s on 2 (2-vCPU machine).
int64_t item_threads() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env != nullptr && *env != '\0') return at::get_num_threads();
  return std::max<int64_t>(at::get_num_threads(), static_cast<int64_t>(std::thread::hardware_concurrency()));
}
#endif

/// Runs f on every item, keeps the first exception; shared by both paths.
struct Items {
  const std::function<void(int64_t)>& f;
  std::mutex mu;
  std::exception_ptr first;
  void run(int64_t i) {
    try {
      f(i);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mu);
      if (!first) first = std::current_exception();
    }
  }
};

}  // namespace

void parallel_for_each(int64_t n, const std::function<void(int64_t)>& f) {
  Items items{f, {}, {}};
#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
  // With LibTorch's OpenMP backend at::parallel_for is a header template whose `#pragma omp parallel` is compiled
  // here, without -fopenmp: it would run every item on this thread (seen on the H200: 64 heads of `verify`'s theorems
  // on 1 thread, 10 s per layer). So: item_threads() plain threads taking items in turn; each sets its own
  // OpenMP thread count to 1 (a per-thread setting), so LibTorch operations inside an item do not start a team of
  // their own on every worker. Workers take the caller's LibTorch thread-local state (grad mode, inference mode,
  // autocast), as at::parallel_for's own threads do.
  const at::ThreadLocalState caller;
  const int64_t workers = std::min<int64_t>(n, std::max<int64_t>(1, item_threads()));
  std::atomic<int64_t> next{0};
  auto body = [&](bool worker) {
    if (worker && omp_set_num_threads) {
      at::internal::lazy_init_num_threads();  // LibTorch's own first-use setup of this thread, which would undo ours
      omp_set_num_threads(1);
    }
    const at::ThreadLocalStateGuard state(caller);
    for (int64_t i = next++; i < n; i = next++) items.run(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(std::max<int64_t>(0, workers - 1)));
  for (int64_t w = 1; w < workers; ++w) pool.emplace_back(body, true);
  body(false);
  for (auto& t : pool) t.join();
#else
  at::parallel_for(0, n, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) items.run(i);
  });
#endif
  if (items.first) std::rethrow_exception(items.first);
}

}  // namespace statecut
