#!/usr/bin/env bash
# Small decode grids split (kernels/gated_delta_recurrent.cu, split_small_grid): a [K,V] decode grid that fills at
# most half the SMs takes lanes of 2 columns instead of 4 — twice the blocks, half the state each (Gated DeltaNet 1.3B
# at batch 1: 24 blocks of 128 KiB -> 48 of 64 KiB; the Qwen3.5 hybrid's 32 -> 64).
#   A  configure + build; the gated delta kernels' equivalence and metamorphic tests, decode_equivalence's CUDA cases;
#      Gated DeltaNet 1.3B and the Qwen3.5-style hybrid with their 50% prunes: `statecut bench --decode 1,8` with
#      STATECUT_DECODE_SPLIT=0 and as built, twice, same call; DeltaNet 1.3B batch 1 as built (its fold path is not
#      split: a control); every GPU test if time is left.
# Results under $OUT: 00_summary.log, bench_*.json, failing logs. Run: bash bench/h200_wave39.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w39
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  gpu_tests=$(for f in tests/gpu/*.cpp; do basename "$f" .cpp; done | tr '\n' ' ')
  # shellcheck disable=SC2086
  configure_and_build $gpu_tests decode_equivalence
  run_tests equiv_gated_delta_cuda metamorphic_gated_delta_cuda decode_fold_cuda decode_equivalence
  ab() {  # name, batches: decode without and with the split, twice
    export STATECUT_DECODE_SPLIT=0; bench_decode "$1" off "$2"
    unset STATECUT_DECODE_SPLIT; bench_decode "$1" split "$2"
    export STATECUT_DECODE_SPLIT=0; bench_decode "$1" off_again "$2"
    unset STATECUT_DECODE_SPLIT; bench_decode "$1" split_again "$2"
  }
  checkpoint gdn13 --family gated_deltanet && pruned gdn13 && ab gdn13 1,8
  checkpoint q35 --family qwen3_5 && pruned q35 && ab q35 1
  [ "$(elapsed)" -lt 380 ] && checkpoint dn13 && pruned dn13 && bench_decode dn13 control 1
  [ "$(elapsed)" -lt 430 ] && {
    (cd "$BUILD" && ctest -L GPU -j4 --timeout 150) >"$LOGS/ctest_gpu.log" 2>&1 || { rc=1; keep "$LOGS/ctest_gpu.log"; }
    say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log" | tail -1) at $(elapsed) s"
    grep -E "^ *[0-9]+/[0-9]+ Test.*(Failed|Not Run)" "$LOGS/ctest_gpu.log" | tee -a "$S"
  }
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
