// What the kernels' host-side dispatch reads from the process rather than from its arguments: the environment
// switches that let one benchmark call time both sides of a choice (bench/README.md's waves), and the current
// device's SM count, which sizes grids and decides which form of a kernel fills the machine.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>

namespace statecut::cuda {

/// False when the environment sets `name` to "0" (STATECUT_PDL, STATECUT_DECODE_SPLIT, STATECUT_NORM_GEMV), true
/// otherwise. Callers keep the answer in a static: read once a process.
inline bool env_switch_on(const char* name) {
  const char* e = std::getenv(name);
  return e == nullptr || std::strcmp(e, "0") != 0;
}

/// The current device's number of SMs; `fallback` when the runtime cannot say.
inline int current_sm_count(int fallback) {
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return fallback;
  return n;
}

}  // namespace statecut::cuda
