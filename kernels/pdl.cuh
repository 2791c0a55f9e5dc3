// Programmatic dependent launch (sm_90) for the kernels of a decode step, where a graph replay is a chain of ~250
// launches of a few µs each (issue 14: a DeltaNet 1.3B step at batch 1 takes 2.1x its byte floor, the GEMVs 0.86
// ms of its 1.33 and ~150 small kernels the rest). A kernel launched with programmatic stream serialization may be
// scheduled while the kernel before it in the stream is still finishing; it must not read what that kernel writes
// before `pdl_wait()` (griddepcontrol.wait: returns once every prerequisite grid has completed and its memory is
// visible; a no-op in a kernel launched without the attribute). The kernels here call it first thing and never
// trigger early, so a dependent's blocks are scheduled only as its primary's blocks exit: what overlaps is the launch
// of the next grid, not its work (the seventh wave's attempt, with each GEMV lane loading weights before the wait,
// held SM slots early and was slower). On by default; STATECUT_PDL=0 turns it off. Measured (bench/README.md, 21st
// wave): batch-1 steps 3-9% faster (DeltaNet 1.3B 1.360 -> 1.234 ms, Gated DeltaNet 1.474 -> 1.366), batches 64 and
// 256 unchanged within 1% (their time is in cuBLAS and the decode kernel), decode_equivalence's CUDA cases 108/108.
#pragma once
#include <cuda_runtime_api.h>

#include <utility>

#include "kernels/device_env.h"

namespace statecut::cuda::pdl {

__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

inline bool enabled() {
  static const bool on = env_switch_on("STATECUT_PDL");
  return on;
}

/// kernel<<<grid, block, smem, s>>>(args...), as a programmatic dependent of the stream's previous kernel when
/// `dependent`. Returns the launch error.
template <typename... Params, typename... Args>
cudaError_t launch_as(bool dependent, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                      Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = dependent ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}

/// launch_as(enabled(), ...): the decode step's kernels, switched by STATECUT_PDL.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args&&... args) {
  return launch_as(enabled(), kernel, grid, block, smem, s, std::forward<Args>(args)...);
}

}  // namespace statecut::cuda::pdl
