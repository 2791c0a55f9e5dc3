#!/usr/bin/env bash
# Issue 14: where the small-batch GEMV stops beating cuBLAS (a decode step at batch 8 took 3.1x its byte floor in the
# 24th wave, at 16 on cuBLAS 2.6x): `statecut bench` decode 2 / 4 / 6 / 8 with the GEMV up to 8 rows and with only
# one row (STATECUT_GEMV_ROWS, measurement only), then the step at 1 / 64 / 256 as landed.
#   A  configure + build (Release, sm_90a); fused_ops_cuda; random DeltaNet and Gated DeltaNet 1.3B and their 50% rand
#      prunes; the benches.
# (STATECUT_GEMV_SILU, STATECUT_GEMV_SHAPE and STATECUT_GEMV_ROWS were measurement switches of the tree this ran on;
# main kept none: run on main, the script measures the landed path under each label. bench/README.md has the figures.)
# Results under $OUT: 00_summary.log, bench_*.json. Run: bash bench/h200_wave25.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w25
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  configure_and_build fused_ops_cuda
  run_tests fused_ops_cuda
  checkpoint dn13 && pruned dn13 && checkpoint gdn13 --family gated_deltanet && pruned gdn13
  for n in dn13 gdn13; do
    for r in 8 1; do STATECUT_GEMV_ROWS=$r bench_decode $n "rows$r" 2,3,4,6,8; done
  done
  for n in dn13 gdn13; do bench_decode $n landed 1,64,256; done
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
