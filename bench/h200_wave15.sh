#!/usr/bin/env bash
# Issue 14, prefill 8 x 2048 against fla's models: after the one-k-buffer state kernel (fourteenth wave: Gated
# DeltaNet 1.3B 101.28 vs fla 98.67 ms), the chunk op reads q, k and v in place as slices of the packed projection
# output (the thirteenth wave's profile: three strided copies a layer, 63 x 80 us of a 111 ms prefill).
#   P  configure + build (Release, sm_90a, the CLI and tools, the kernel and model tests); the kernel tests, the CUDA
#      model goldens and decode equivalence; random DeltaNet and Gated DeltaNet 1.3B and their 50% rand prunes;
#      statecut bench prefill 8 x 2048 of each pair; fla's model forward on the same four; a Kineto profile of the
#      Gated DeltaNet prefill when time is left.
# Results under $OUT: 00_summary.log, bench_*.json, fla_prefill.jsonl. Run: bash bench/h200_wave15.sh P
set -uo pipefail
PHASE=${1:-P}
TAG=w15
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="equiv_gated_delta_cuda metamorphic_gated_delta_cuda badinput_gated_delta_cuda golden_models_cuda \
decode_equivalence fused_ops_cuda"
if [ "$PHASE" = P ]; then
  # shellcheck disable=SC2086
  configure_and_build $TESTS
  # shellcheck disable=SC2086
  run_tests $TESTS
  grep -h "packed slices" "$LOGS/metamorphic_gated_delta_cuda.log" >>"$S"
  for n in gdn13 dn13; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"
    # shellcheck disable=SC2086
    checkpoint $n $f && pruned $n || continue
    timeout 120 "$SC" bench --checkpoint "$WORK/$n" --compare "$WORK/${n}_p50" --device cuda --prefill 8x2048 \
      --decode 1 --json >"$OUT/bench_$n.json" 2>"$LOGS/bench_$n.err" || { rc=1; keep "$LOGS/bench_$n.err"; }
    say "--- statecut bench $n at $(elapsed) s"
    python3 bench/bench_table.py "$OUT/bench_$n.json" >>"$S" 2>&1
  done
  if [ -d .fla/fla ]; then
    PYTHONPATH=.fla timeout $(( 540 - $(elapsed) )) python3 bench/fla_model_decode.py "$WORK/gdn13" "$WORK/gdn13_p50" \
      "$WORK/dn13" "$WORK/dn13_p50" --decode "" --prefill 8x2048 >"$OUT/fla_prefill.jsonl" 2>"$LOGS/fla.err" ||
      { rc=1; tail -3 "$LOGS/fla.err" | cut -c1-300 >>"$S"; }
    say "--- fla's models, prefill 8x2048, at $(elapsed) s"; cat "$OUT/fla_prefill.jsonl" >>"$S"
  fi
  [ "$(elapsed)" -lt 550 ] && profile_prefill gdn13 8 2048
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
