#!/usr/bin/env bash
# Where the skinny GEMM's time goes at 64 rows (2026-12-05, 44th wave):
#   A  one build; the GPU tests of the step kernels (e6f954e's binding changes had only been compiled); `statecut
#      bench` of DeltaNet 1.3B and Gated DeltaNet 1.3B against their 50% prunes at 1, 8, 64, 256 as it is and with
#      STATECUT_PDL_TRIGGER=0 STATECUT_SKINNY_GEMM=0; a Kineto table of a DeltaNet 1.3B step at batch 64; Nsight
#      Compute's sections (speed of light, memory, warp states) of the skinny GEMM and cuBLAS on each DeltaNet 1.3B
#      shape at 64 and 8 rows (bench/skinny_gemm_step.cu with SKINNY_PROFILE).
#   B  the gated MLP's silu·mul in the skinny GEMM's epilogue (skinny_gemm_silu_mul_bf16): the GPU tests, a planted
#      bug (the up rows read from the gate rows) that skinny_gemm_cuda must catch, `statecut bench` of both 1.3B
#      shapes and their prunes at 8 and 64 as it is and with STATECUT_SKINNY_SILU_MUL=0, twice each, interleaved.
# Run: bash bench/h200_wave44.sh A|B
set -uo pipefail
PHASE=${1:-A}
TAG=w44
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
ncu_gemms() {  # rows: ncu over the harness's one launch of each shape, ours and cuBLAS's
  local m=$1
  timeout 150 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section LaunchStats --section Occupancy "$BUILD/bench/bench_skinny_gemm_step" >"$OUT/ncu_rows$m.txt" 2>&1 \
    < /dev/null
  say "ncu rows $m rc=$? at $(elapsed) s"
  grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Grid Size|Cluster Size" \
    "$OUT/ncu_rows$m.txt" | head -120 >>"$S"
}
if [ "$PHASE" = A ]; then
  BENCH=ON configure_and_build skinny_gemm_cuda fused_ops_cuda decode_equivalence decode_fold_cuda mamba2_step_cuda \
    golden_models_cuda bench_skinny_gemm_step
  run_tests skinny_gemm_cuda fused_ops_cuda decode_equivalence decode_fold_cuda mamba2_step_cuda golden_models_cuda
  SKINNY_PROFILE=64 ncu_gemms 64
  SKINNY_PROFILE=8 ncu_gemms 8
  for n in dn13 gdn13; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"
    # shellcheck disable=SC2086
    checkpoint $n $f && pruned $n || continue
    bench_decode $n new 1,8,64,256
    STATECUT_PDL_TRIGGER=0 STATECUT_SKINNY_GEMM=0 bench_decode $n before 1,8,64,256
  done
  [ "$(elapsed)" -lt 480 ] && profile_decode dn13 64
fi
if [ "$PHASE" = B ]; then
  BENCH=ON configure_and_build skinny_gemm_cuda fused_ops_cuda decode_equivalence golden_models_cuda
  run_tests skinny_gemm_cuda fused_ops_cuda decode_equivalence golden_models_cuda
  for n in dn13 gdn13; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"
    # shellcheck disable=SC2086
    checkpoint $n $f && pruned $n || continue
    bench_decode $n fused 1,8,64
    STATECUT_SKINNY_SILU_MUL=0 bench_decode $n unfused 8,64
    bench_decode $n fused_again 8,64
    STATECUT_SKINNY_SILU_MUL=0 bench_decode $n unfused_again 8,64
  done
  # last: it leaves the library built with the bug
  planted_bug kernels/skinny_gemm.cu 's/k, N + tile \* 64);/k, tile * 64);/' skinny_gemm_cuda '*siluMul*' \
    "the up rows read from the gate rows"
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
