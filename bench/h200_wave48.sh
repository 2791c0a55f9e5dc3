#!/usr/bin/env bash
# The 48th wave (2026-12-06): Gated DeltaNet's beta and gate logits read in place at any alignment (two conversion
# launches a layer fewer at batch 1, one at larger batches).
#   A  the tests the change touches (metamorphic_gated_delta_cuda with decodeReadsOddlyPlacedGateAndBetaInPlace,
#      decode_equivalence's CUDA cases, golden_models_cuda, decode_fold_cuda), the new test with the old rule planted
#      back (g and beta read with q's alignment rule: it must fail); `statecut bench` of Gated DeltaNet 1.3B and of
#      DeltaNet 1.3B (a control: its beta was already read in place) against their 50% prunes at 1, 8, 64, 256; the
#      Kineto table of Gated DeltaNet 1.3B's batch-1 step (the conversions gone?); the GDN bench once more.
# Run: bash bench/h200_wave48.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w48
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  configure_and_build metamorphic_gated_delta_cuda decode_equivalence golden_models_cuda decode_fold_cuda
  run_tests metamorphic_gated_delta_cuda decode_equivalence golden_models_cuda decode_fold_cuda
  checkpoint gdn13 --family gated_deltanet && pruned gdn13 && bench_decode gdn13 now 1,8,64,256
  checkpoint dn13 && pruned dn13 && bench_decode dn13 control 1,8,64,256
  profile_decode gdn13 1
  planted_bug kernels/binding/gated_delta_torch.cpp 's|token_stride(\*t, /\*vector_loads=\*/false)|token_stride(*t)|' \
    metamorphic_gated_delta_cuda '*OddlyPlaced*' "g and beta under q's alignment rule"
  if [ "$(elapsed)" -lt 470 ]; then  # the planted bug left the library built with it: rebuild what runs next
    cmake --build "$BUILD" -j"$(nproc)" --target statecut >"$LOGS/rebuild.log" 2>&1 && bench_decode gdn13 again 1,8
  fi
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
