// Programmatic dependent launch (sm_90) for the kernels of a decode step, where a graph replay is a chain of ~250
// launches of a few µs each (issue 14: a DeltaNet 1.3B step at batch 1 takes 2.1x its byte floor, the GEMVs 0.86
// ms of its 1.33 and ~150 small kernels the rest). A kernel launched with programmatic stream serialization may be
// scheduled while the kernel before it in the stream is still finishing; it must not read what that kernel writes
// before `pdl_wait()` (griddepcontrol.wait: returns once every prerequisite grid has completed and its memory is
// visible; a no-op in a kernel launched without the attribute). The kernels here call it first thing: before any
// read of what an earlier kernel wrote, and before any write (the caching allocator may hand a kernel memory that the
// one before it still reads). On by default; STATECUT_PDL=0 turns it off. Measured (bench/README.md, 21st wave):
// batch-1 steps 3-9% faster (DeltaNet 1.3B 1.360 -> 1.234 ms, Gated DeltaNet 1.474 -> 1.366), batches 64 and 256
// unchanged within 1% (their time is in cuBLAS and the decode kernel), decode_equivalence's CUDA cases 108/108.
//
// The trigger (griddepcontrol.launch_dependents, issued by trigger_then_wait(true) just before it waits): once every
// block of a grid has issued it, the next grid's blocks may be scheduled on free SM slots at once instead of as this
// grid's blocks exit. They park in their own wait, except that the skinny GEMM (kernels/skinny_gemm.cu) first streams
// its weights into shared memory: weights never depend on an earlier kernel. A dependent launches only after all of
// its primary's blocks are resident, so parked blocks never keep a primary's blocks off the SMs. The kernels of a
// batched step trigger (trigger_for: 2 rows or more, where the skinny GEMM serves); at batch 1 they do not: there
// the 38th wave (H200) measured early triggers before the GEMVs 5% slower. Measured (43rd wave, an
// H100, the 97 projections of a DeltaNet 1.3B step with a norm-like kernel after each, as one graph): at 8 rows
// cuBLAS 1.499 ms, the skinny GEMM without the trigger 1.537, with it 1.262; at 64 rows 1.558 / 1.735 / 1.429. On
// whole steps (`statecut bench`, same call, first form: every kernel triggering), the trigger alone (cuBLAS kept)
// took DeltaNet 1.3B at batch 8 from 1.827 to 1.726 ms and Gated DeltaNet from 2.315 to 2.188. This form (batched
// steps only) with the skinny GEMM, against neither (STATECUT_PDL_TRIGGER=0 STATECUT_SKINNY_GEMM=0), same call, ms a
// step: batch 1 1.322 / 1.322 (DeltaNet), 1.478 / 1.482 (Gated DeltaNet); batch 8 1.569 / 1.825, 2.084 / 2.311;
// batch 64 2.904 / 3.027, 5.195 / 5.208; batch 256 6.648 / 6.687, 14.641 / 14.655.
// STATECUT_PDL_TRIGGER=0 in the environment turns it off (the benchmarks' "before").
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

#include "kernels/device_env.h"

namespace statecut::cuda::pdl {

__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/// The trigger when `on`: the next grid may launch now (see above).
__device__ __forceinline__ void trigger(bool on) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (on) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#else
  (void)on;
#endif
}

/// trigger(on), then wait(): the first statement of a decode step's kernels.
__device__ __forceinline__ void trigger_then_wait(bool on) {
  trigger(on);
  wait();
}

inline bool enabled() {
  static const bool on = env_switch_on("STATECUT_PDL");
  return on;
}

/// Whether a kernel of a step over `rows` rows (sequences) triggers its dependents first thing: PDL on, 2 rows or
/// more, and the environment does not say STATECUT_PDL_TRIGGER=0.
inline bool trigger_for(int64_t rows) {
  static const bool on = env_switch_on("STATECUT_PDL_TRIGGER");
  return on && rows >= 2 && enabled();
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
