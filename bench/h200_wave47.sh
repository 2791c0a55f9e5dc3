#!/usr/bin/env bash
# The 47th wave (2026-12-06): the GPU gate with decode_equivalence's CUDA cases in it, and the residual GEMMs' sum
# left to the add + norm that reads it (skinny_gemm_partials_f32).
#   A  SKIP_SANITIZER=1 ci/device.sh (every GPU test, the CLI's CUDA logits, decode_equivalence's CUDA cases; among
#      them SkinnyGemm.partialsAddedInSplitOrderGiveTheClustersBits; its summary under $OUT/gate) while the harness
#      builds beside it; the harness (SKINNY_QUICK=1 SKINNY_NO_SHAPES=1 bench/skinny_gemm_step.cu: its f64 checks,
#      Part 4's o and down with y or with partials then an add + norm, two rounds), once more with SKINNY_SPLIT=8; then
#      while the call has time a Kineto table of Gated DeltaNet 1.3B's batch-1 decode step with programmatic
#      dependent launches off (each kernel's own duration, not its wait), and with them on.
# Run (on branch exp/skinny-partials, whose kernel has the partials epilogue and the harness its Part 4):
#   git checkout exp/skinny-partials && bash bench/h200_wave47.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w47
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
harness() {  # label, env...: the base harness, quick, without the single shapes, its lines into the summary
  local label=$1
  shift
  [ -x "$LOGS/v_base/harness" ] || { say "--- $label: no harness"; return 0; }
  env SKINNY_QUICK=1 SKINNY_NO_SHAPES=1 "$@" timeout 120 "$LOGS/v_base/harness" >"$LOGS/harness_$label.log" 2>&1
  say "--- harness $label (rc $?) at $(elapsed) s"
  grep -E "rows|copy bandwidth|checks:|FAIL" "$LOGS/harness_$label.log" >>"$S"
}
if [ "$PHASE" = A ]; then
  (skinny_variant base; echo "harness built at $(elapsed) s" >"$LOGS/variants.log") &
  vb=$!
  gpu_gate
  wait $vb
  say "$(cat "$LOGS/variants.log")"
  harness split_auto
  [ "$(elapsed)" -lt 440 ] && harness split8 SKINNY_SPLIT=8
  if [ "$(elapsed)" -lt 470 ]; then
    cmake --build "$BUILD" -j"$(nproc)" --target statecut-profile-step >"$LOGS/build_profile.log" 2>&1 ||
      cmake -S . -B "$BUILD" -DSTATECUT_PROFILE_TOOL=ON >>"$LOGS/build_profile.log" 2>&1 &&
      cmake --build "$BUILD" -j"$(nproc)" --target statecut-profile-step >>"$LOGS/build_profile.log" 2>&1
    checkpoint gdn13 --family gated_deltanet &&
      STATECUT_PDL=0 profile_decode gdn13 1 && [ "$(elapsed)" -lt 540 ] && profile_decode gdn13 1
  fi
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
