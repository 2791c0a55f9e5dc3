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
    timeout 150 "$SC" bench --checkpoint "$WORK/$n" --compare "$WORK/${n}_p50" --device cuda --prefill 8x2048,1x2048 \
      --decode 1 --json >"$OUT/bench_$n.json" 2>"$LOGS/bench_$n.err" || { rc=1; keep "$LOGS/bench_$n.err"; }
    say "--- statecut bench $n at $(elapsed) s"
    python3 bench/bench_table.py "$OUT/bench_$n.json" >>"$S" 2>&1
  done
  if [ -d .fla/fla ]; then
    PYTHONPATH=.fla timeout $(( 560 - $(elapsed) )) python3 bench/fla_model_decode.py "$WORK/dn13" "$WORK/dn13_p50" \
      "$WORK/gdn13" "$WORK/gdn13_p50" --decode "" --prefill 8x2048 >"$OUT/fla_prefill.jsonl" 2>"$LOGS/fla.err" ||
      { rc=1; tail -3 "$LOGS/fla.err" | cut -c1-300 >>"$S"; }
    say "--- fla's models, prefill 8x2048, at $(elapsed) s"; cat "$OUT/fla_prefill.jsonl" >>"$S"
  fi
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
