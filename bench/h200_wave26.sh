#!/usr/bin/env bash
# Issue 14, as landed: the GEMV at batch 1 only (cuBLAS from 2 rows on, 25th wave) with the gate|up GEMV's silu·mul
# epilogue (24th wave).
#   A  configure + build (Release, sm_90a); fused_ops_cuda, golden_models_cuda, decode_equivalence's CUDA cases;
#      random DeltaNet and Gated DeltaNet 1.3B and their 50% rand prunes; `statecut bench` (prefill 1x2048 and
#      8x2048, decode 1 / 64 / 256) and decode 2 / 4 / 8.
# Results under $OUT: 00_summary.log, bench_*.json. Run: bash bench/h200_wave26.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w26
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="fused_ops_cuda golden_models_cuda decode_equivalence"
if [ "$PHASE" = A ]; then
  # shellcheck disable=SC2086
  configure_and_build $TESTS
  # shellcheck disable=SC2086
  run_tests $TESTS
  checkpoint dn13 && pruned dn13 && checkpoint gdn13 --family gated_deltanet && pruned gdn13
  for n in dn13 gdn13; do
    bench $n
    bench_decode $n small 2,4,8
  done
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
