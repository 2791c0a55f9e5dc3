/// Independent work items (heads of a layer, layers of a selection) on several threads, for `rank`, `verify` and
/// `prune`.
#pragma once
#include <cstdint>
#include <functional>

namespace statecut {

/// f(i) for every i in [0, n) on OMP_NUM_THREADS threads when it is set, else on every hardware thread (one item is
/// a whole head's scan or f64 reference, far above the cost of a thread). Every item runs even when one throws; the first exception caught is
/// rethrown here, after all threads are done.
void parallel_for_each(int64_t n, const std::function<void(int64_t)>& f);

}  // namespace statecut
