#!/usr/bin/env bash
# The 46th wave (2026-12-06): the regression gate on the card that comes, and the skinny GEMM's reduction loop.
#   B  SKIP_TESTS=1 BENCH=1 ci/device.sh (the kernels' benchmark, the model benchmark of DeltaNet 1.3B and its 50%
#      prune, and the regression gate over both; its summary under $OUT/bench) while the harness is built beside it
#      as it is (base) and with the reduction loop unrolled 4 (u4) and not unrolled (u1); then `statecut bench` of
#      Gated DeltaNet 1.3B against its 50% prune at 1, 8, 64, 256, and base / u4 / u1 twice while the call has time.
#   P  the peers on the card that comes (issue 14.5): statecut's prefill of 8x2048 on DeltaNet 1.3B and Gated
#      DeltaNet 1.3B and their 50% prunes, then fla's own model forward on the same folders (.fla carried), then fla's
#      eager decode of DeltaNet 1.3B at batch 1 and 64 (prompt 512, 16 steps) while the call has time.
# Run: bash bench/h200_wave46.sh B|P
set -uo pipefail
PHASE=${1:-B}
TAG=w46
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
run_variants() {  # deadline (s since start), names...
  local deadline=$1 v
  shift
  for v in "$@"; do
    [ -x "$LOGS/v_$v/harness" ] || { say "--- $v: no harness"; continue; }
    [ "$(elapsed)" -lt "$deadline" ] || { say "variants stopped before $v at $(elapsed) s"; break; }
    SKINNY_QUICK=1 timeout 100 "$LOGS/v_$v/harness" >"$LOGS/harness_$v.log" 2>&1
    say "--- $v (rc $?) at $(elapsed) s"
    grep -E "rows|checks:" "$LOGS/harness_$v.log" | grep -v "^shape" >>"$S"
  done
}
if [ "$PHASE" = B ]; then
  (skinny_variant base &
   skinny_variant u4 's|#pragma unroll 2|#pragma unroll 4|' &
   skinny_variant u1 's|#pragma unroll 2|#pragma unroll 1|' &
   wait; echo "variants built at $(elapsed) s" >"$LOGS/variants.log") &
  vb=$!
  bench_gate
  wait $vb
  say "$(cat "$LOGS/variants.log")"
  run_variants 420 base u4 u1
  if [ "$(elapsed)" -lt 440 ]; then
    checkpoint gdn13 --family gated_deltanet && pruned gdn13 && bench_decode gdn13 now 1,8,64,256
  fi
  run_variants 560 base u4 u1
fi
if [ "$PHASE" = P ]; then
  configure_and_build
  checkpoint dn13 && pruned dn13
  checkpoint gdn13 --family gated_deltanet && pruned gdn13
  bench_prefill dn13 8x2048
  bench_prefill gdn13 8x2048
  fla_prefill 440 dn13 gdn13 dn13_p50 gdn13_p50
  if [ -d .fla/fla ] && [ "$(elapsed)" -lt 450 ]; then
    PYTHONPATH=.fla timeout $(( 530 - $(elapsed) )) python3 bench/fla_model_decode.py "$WORK/dn13" --decode 1,64 \
      --prefill "" --steps 16 >"$OUT/fla_decode.jsonl" 2>"$LOGS/fla_decode.err" || tail -3 "$LOGS/fla_decode.err" | cut -c1-300 >>"$S"
    say "--- fla's DeltaNet 1.3B eager decode at $(elapsed) s"; cat "$OUT/fla_decode.jsonl" >>"$S"
  fi
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
