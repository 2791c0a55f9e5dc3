#!/usr/bin/env bash
# Where a decode step stands after the 35th wave, and the plain GEMVs' register bound isolated.
#   A  configure + build; fused_ops_cuda and decode_equivalence's CUDA cases; random DeltaNet and Gated DeltaNet 1.3B
#      with their 50% prunes: `statecut bench --decode 1,8` with the plain GEMVs unbounded (STATECUT_GEMV_PLAIN_BOUND=0,
#      the compiler's 30-38 registers) then bounded to one block an SM (80 / 70 registers, the landed form), same
#      call; `--decode 64,256` as landed; Kineto tables of a DeltaNet step at batch 64 and 256; every GPU test.
# STATECUT_GEMV_PLAIN_BOUND existed only in the call's tree (kernels/gemv.cu chose the bare-bound instances when it
# was 0); the bounded form won and the switch was not kept, so the two rows now time the same kernels.
# Results under $OUT: 00_summary.log, bench_*.json, failing logs. Run: bash bench/h200_wave36.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w36
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  gpu_tests=$(for f in tests/gpu/*.cpp; do basename "$f" .cpp; done | tr '\n' ' ')
  # shellcheck disable=SC2086
  configure_and_build $gpu_tests decode_equivalence
  run_tests fused_ops_cuda decode_equivalence
  for n in dn13 gdn13; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"
    # shellcheck disable=SC2086
    checkpoint $n $f && pruned $n || continue
    export STATECUT_GEMV_PLAIN_BOUND=0; bench_decode $n plain_unbounded 1,8
    unset STATECUT_GEMV_PLAIN_BOUND; bench_decode $n plain_one_block 1,8
    bench_decode $n batched 64,256
  done
  [ "$(elapsed)" -lt 400 ] && profile_decode dn13 64
  [ "$(elapsed)" -lt 430 ] && profile_decode dn13 256
  [ "$(elapsed)" -lt 440 ] && {
    (cd "$BUILD" && ctest -L GPU -j4 --timeout 150) >"$LOGS/ctest_gpu.log" 2>&1 || { rc=1; keep "$LOGS/ctest_gpu.log"; }
    say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log" | tail -1) at $(elapsed) s"
    grep -E "^ *[0-9]+/[0-9]+ Test.*(Failed|Not Run)" "$LOGS/ctest_gpu.log" | tee -a "$S"
  }
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
