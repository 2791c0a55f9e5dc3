#!/usr/bin/env bash
# The skinny GEMM and the early PDL trigger on whole decode steps (2026-12-05):
#   A  two builds from this tree: as it is (kernels/pdl.cuh's trigger on; statecut::linear gives 2..64 rows to
#      kernels/skinny_gemm.cu) and with -DSTATECUT_PDL_TRIGGER=0 (the trigger out; with STATECUT_SKINNY_GEMM=0 that is
#      the tree before this wave). The GPU tests of the kernels and of decoding; a planted bug in the skinny GEMM (its
#      k16 step read at half the offset) must fail skinny_gemm_cuda; `statecut bench` of DeltaNet 1.3B and Gated
#      DeltaNet 1.3B against their 50% prunes at batch 1, 8, 64, 256 in three forms: new, new with cuBLAS
#      (STATECUT_SKINNY_GEMM=0), before; then bench/skinny_gemm_step.cu (the projections of a step, ours vs cuBLAS).
#   B  the trigger made a runtime switch that batch 1 leaves off (kernels/pdl.cuh, trigger_for): one build, the GPU
#      tests of the step kernels, `statecut bench` at 1, 8, 64, 256 as it is and with STATECUT_PDL_TRIGGER=0
#      STATECUT_SKINNY_GEMM=0 (the tree before this wave), batch 1 and 8 twice.
# Run: bash bench/h200_wave43.sh A|B
set -uo pipefail
PHASE=${1:-A}
TAG=w43
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
BUILD_OFF=${BUILD_OFF:-build-gpu-off}
if [ "$PHASE" = A ]; then
  (TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
   cmake -S . -B "$BUILD_OFF" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
     -DCMAKE_CUDA_FLAGS=-DSTATECUT_PDL_TRIGGER=0 -DSTATECUT_BENCH=OFF -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
     >"$LOGS/configure_off.log" 2>&1 && cmake --build "$BUILD_OFF" -j8 --target statecut >"$LOGS/build_off.log" 2>&1
   echo "off-tree build rc=$? at $(elapsed) s" >>"$LOGS/build_off.log") &
  off=$!
  configure_and_build skinny_gemm_cuda fused_ops_cuda decode_equivalence golden_models_cuda decode_fold_cuda
  wait $off
  say "$(tail -1 "$LOGS/build_off.log")"
  run_tests skinny_gemm_cuda fused_ops_cuda decode_equivalence golden_models_cuda decode_fold_cuda
  for n in dn13 gdn13; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"
    # shellcheck disable=SC2086
    checkpoint $n $f && pruned $n || continue
    bench_decode $n new 1,8,64,256
    STATECUT_SKINNY_GEMM=0 bench_decode $n new_cublas 8,64
    SC="$BUILD_OFF/cli/statecut" STATECUT_SKINNY_GEMM=0 bench_decode $n before 1,8,64,256
  done
  # last: it leaves the library built with the bug
  [ "$(elapsed)" -lt 500 ] &&
    planted_bug kernels/skinny_gemm.cu 's/+ kk \* 32),/+ kk * 16),/' skinny_gemm_cuda '*' "skinny GEMM k16 step at half its offset"
  if [ "$(elapsed)" -lt 480 ]; then
    nvcc -std=c++17 -O2 -I. -gencode=arch=compute_90a,code=sm_90a bench/skinny_gemm_step.cu kernels/skinny_gemm.cu \
      -lcublas -o "$LOGS/skinny_gemm_step" >"$LOGS/harness_build.log" 2>&1 &&
      SKINNY_NO_SHAPES=1 timeout 90 "$LOGS/skinny_gemm_step" >"$OUT/skinny_gemm_step.log" 2>&1
    say "skinny_gemm_step rc=$? at $(elapsed) s"
  fi
fi
if [ "$PHASE" = B ]; then
  configure_and_build skinny_gemm_cuda fused_ops_cuda decode_equivalence decode_fold_cuda mamba2_step_cuda
  run_tests skinny_gemm_cuda fused_ops_cuda decode_equivalence decode_fold_cuda mamba2_step_cuda
  for n in dn13 gdn13; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"
    # shellcheck disable=SC2086
    checkpoint $n $f && pruned $n || continue
    bench_decode $n new 1,8,64,256
    STATECUT_PDL_TRIGGER=0 STATECUT_SKINNY_GEMM=0 bench_decode $n before 1,8,64,256
    bench_decode $n new_again 1,8
    STATECUT_PDL_TRIGGER=0 STATECUT_SKINNY_GEMM=0 bench_decode $n before_again 1,8
  done
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
