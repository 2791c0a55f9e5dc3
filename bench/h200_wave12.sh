#!/usr/bin/env bash
# Issue 14's prefill target on one H200, both sides in one call: `statecut bench --prefill 8x2048` of random fla
# DeltaNet and Gated DeltaNet 1.3B checkpoints and their 50% rand prunes, and fla's own models' forward of the same
# checkpoints (bench/fla_model_decode.py, fla's package carried in .fla; Triton compiles its forward kernels first).
# Results under $OUT: 00_summary.log, bench_*.json, fla_prefill.jsonl. Run from the repository root: bash bench/h200_wave12.sh P
set -uo pipefail
PHASE=${1:-P}
TAG=w12
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = P ]; then
  configure_and_build
  for n in dn13 gdn13; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"
    # shellcheck disable=SC2086
    checkpoint $n $f && pruned $n || continue
    bench_prefill $n 8x2048,1x2048
  done
  fla_prefill 560 dn13 dn13_p50 gdn13 gdn13_p50
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
