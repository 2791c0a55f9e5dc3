#!/usr/bin/env bash
# The decode fold (kernels/gated_delta.h, GatedDeltaArgs::fold): the short conv and the output norm of a DeltaNet
# layer's decode step inside the decode kernel's launch, two launches fewer a layer. Second form (37th wave, second
# call): the whole block convolves the head's channels with every load in flight at once (the first form's per-channel
# loop on two warps made a 1.3B step at batch 256 5.35 -> 8.39 ms).
#   A  configure + build; the fold's test, the fused ops' test and decode_equivalence's CUDA cases; random DeltaNet
#      1.3B and its 50% prune: `statecut bench --decode 1,8,64,256` without the fold (STATECUT_DECODE_FOLD=0) and
#      with it, same call; compute-sanitizer memcheck and racecheck over the fold's test; a planted bug (the conv's
#      bias dropped from the fold) must fail its test; every GPU test if time is left.
#   B  (the landed form: the fold where its grid is one wave, cuda::decode_fold_pays) build; the fold's and the fused
#      ops' tests, decode_equivalence's CUDA cases; DeltaNet 1.3B and its prune `--decode 1,8,64,256` as landed and
#      `--decode 1,8` without the fold; every GPU test.
# Results under $OUT: 00_summary.log, bench_*.json, failing logs. Run: bash bench/h200_wave37.sh A|B
set -uo pipefail
PHASE=${1:-A}
TAG=w37
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  gpu_tests=$(for f in tests/gpu/*.cpp; do basename "$f" .cpp; done | tr '\n' ' ')
  # shellcheck disable=SC2086
  configure_and_build $gpu_tests decode_equivalence
  run_tests decode_fold_cuda fused_ops_cuda decode_equivalence
  if checkpoint dn13 && pruned dn13; then
    export STATECUT_DECODE_FOLD=0; bench_decode dn13 nofold 1,8,64,256
    unset STATECUT_DECODE_FOLD; bench_decode dn13 fold 1,8,64,256
    export STATECUT_DECODE_FOLD=0; bench_decode dn13 nofold_again 64,256
    unset STATECUT_DECODE_FOLD; bench_decode dn13 fold_again 64,256
  fi
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 "$BUILD/tests/decode_fold_cuda" >"$LOGS/san_$tool.log" 2>&1
    r=$?; [ $r -ne 0 ] && { rc=1; keep "$LOGS/san_$tool.log"; }
    say "compute-sanitizer $tool decode_fold_cuda: rc=$r $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS/san_$tool.log" | tail -1)"
  done
  [ "$(elapsed)" -lt 330 ] && planted_bug kernels/gated_delta_recurrent.cu 's/    if (cb) acc += to_f<T>(b\[i\]);/    (void)b;/' \
    decode_fold_cuda '*BitForBit*' "fold without the conv bias"
  [ "$(elapsed)" -lt 420 ] && {
    cmake --build "$BUILD" -j"$(nproc)" --target decode_fold_cuda >"$LOGS/rebuild.log" 2>&1
    (cd "$BUILD" && ctest -L GPU -j4 --timeout 150) >"$LOGS/ctest_gpu.log" 2>&1 || { rc=1; keep "$LOGS/ctest_gpu.log"; }
    say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log" | tail -1) at $(elapsed) s"
    grep -E "^ *[0-9]+/[0-9]+ Test.*(Failed|Not Run)" "$LOGS/ctest_gpu.log" | tee -a "$S"
  }
fi
if [ "$PHASE" = B ]; then
  gpu_tests=$(for f in tests/gpu/*.cpp; do basename "$f" .cpp; done | tr '\n' ' ')
  # shellcheck disable=SC2086
  configure_and_build $gpu_tests decode_equivalence
  run_tests decode_fold_cuda fused_ops_cuda decode_equivalence
  if checkpoint dn13 && pruned dn13; then
    bench_decode dn13 landed 1,8,64,256
    export STATECUT_DECODE_FOLD=0; bench_decode dn13 nofold 1,8
    unset STATECUT_DECODE_FOLD; bench_decode dn13 landed_again 1,8
  fi
  (cd "$BUILD" && ctest -L GPU -j4 --timeout 150) >"$LOGS/ctest_gpu.log" 2>&1 || { rc=1; keep "$LOGS/ctest_gpu.log"; }
  say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log" | tail -1) at $(elapsed) s"
  grep -E "^ *[0-9]+/[0-9]+ Test.*(Failed|Not Run)" "$LOGS/ctest_gpu.log" | tee -a "$S"
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
