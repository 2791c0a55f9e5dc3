// parallel_for_each (optimized/models/parallel_for_each.h): every item once, on the intra-op thread count, the first
// exception rethrown after all items ran. The thread count is the property that regressed unseen: with LibTorch's
// OpenMP backend at::parallel_for compiled in our code without -fopenmp ran every item on the calling thread
// (verify's theorems: 64 heads on 1 thread on a 16-core H200).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "optimized/models/parallel_for_each.h"
#include "tests/scoped_env.h"

namespace statecut {
namespace {

/// Two threads for one test (OMP_NUM_THREADS, which parallel_for_each follows when set, and LibTorch's count), then
/// the previous state.
struct ThreadCount {
  int saved = at::get_num_threads();
  test::ScopedEnv env;
  explicit ThreadCount(int n) : env("OMP_NUM_THREADS", std::to_string(n)) { at::set_num_threads(n); }
  ~ThreadCount() { at::set_num_threads(saved); }
};

TEST(ParallelForEach, itemsRunOnTheIntraOpThreadCount) {
  const ThreadCount tc(2);
  std::mutex mu;
  std::set<std::thread::id> ids;
  parallel_for_each(16, [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // 0.48 s in all: a worker starts well before
    const std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 2u) << "16 items of 30 ms with 2 intra-op threads";
}

TEST(ParallelForEach, withoutOmpNumThreadsEveryHardwareThreadTakesItems) {
  const ThreadCount tc(1);
  unsetenv("OMP_NUM_THREADS");  // the default: LibTorch's count (1 here) or the hardware threads, whichever is more
  const unsigned hw = std::thread::hardware_concurrency();
  std::mutex mu;
  std::set<std::thread::id> ids;
  parallel_for_each(4 * static_cast<int64_t>(hw), [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), std::max(1u, hw)) << "hardware threads " << hw;
}

TEST(ParallelForEach, everyItemRunsOnceAndTheFirstExceptionFollowsThem) {
  const ThreadCount tc(2);
  for (int64_t n : {0, 1, 63, 65}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
    auto body = [&](int64_t i) {
      runs[static_cast<size_t>(i)]++;
      if (i % 7 == 3) throw std::runtime_error("item " + std::to_string(i));
    };
    if (n > 3) {
      EXPECT_THROW(parallel_for_each(n, body), std::runtime_error) << "n=" << n;
    } else {
      EXPECT_NO_THROW(parallel_for_each(n, body)) << "n=" << n;
    }
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(runs[static_cast<size_t>(i)].load(), 1) << "item " << i << " of " << n;
  }
}

TEST(ParallelForEach, itemsSeeTheCallersGradMode) {
  const ThreadCount tc(2);
  const torch::NoGradGuard no_grad;
  const auto w = torch::ones({4}, torch::requires_grad());
  std::vector<char> graph(8, 1);
  parallel_for_each(8, [&](int64_t i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    graph[static_cast<size_t>(i)] = (w * 2).requires_grad();  // no graph under the caller's no-grad
  });
  for (size_t i = 0; i < graph.size(); ++i) EXPECT_FALSE(graph[i]) << "item " << i << " recorded a graph";
}

TEST(ParallelForEach, libTorchOperationsInsideItemsGiveTheSerialResults) {
  const ThreadCount tc(2);
  torch::manual_seed(11);
  const auto a = torch::randn({16, 300, 300}, torch::kFloat64);
  std::vector<torch::Tensor> out(16);
  std::vector<int> threads_inside(16, 0);
  const auto caller = std::this_thread::get_id();
  parallel_for_each(16, [&](int64_t i) {
    out[static_cast<size_t>(i)] = torch::mm(a[i], a[i].t()).sum(1);
    // after a LibTorch operation (which initialises the thread's count), a worker still runs one thread
    threads_inside[static_cast<size_t>(i)] = std::this_thread::get_id() == caller ? 1 : at::get_num_threads();
  });
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(threads_inside[static_cast<size_t>(i)], 1) << "item " << i;
  // BLAS may block the product differently by thread count: equal to a few f64 units, not bit for bit.
  for (int64_t i = 0; i < 16; ++i) {
    const auto ref = torch::mm(a[i], a[i].t()).sum(1);
    EXPECT_LE((out[static_cast<size_t>(i)] - ref).norm().item<double>(), 1e-13 * ref.norm().item<double>()) << i;
  }
}

}  // namespace
}  // namespace statecut
