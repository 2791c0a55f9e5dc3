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
    bench_prefill $n 8x2048
  done
  fla_prefill 540 gdn13 gdn13_p50 dn13 dn13_p50
  [ "$(elapsed)" -lt 550 ] && profile_prefill gdn13 8 2048
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
