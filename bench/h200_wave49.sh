#!/usr/bin/env bash
# The 49th wave (2026-12-06): Gated DeltaNet's gated output norm inside the o_proj GEMV at batch 1 (gemv_norm with
# fla's gate), and the 48th wave's sigmoid made one.
#   A  SKIP_SANITIZER=1 ci/device.sh (every GPU test: FusedOps.gatedNormGemv*, SkinnyGemm.gatedNormLinear*,
#      Meta_GatedDeltaCuda.decodeReadsOddlyPlacedGateAndBetaInPlace with beta's one sigmoid; decode_equivalence's CUDA
#      cases; its summary under $OUT/gate); `statecut bench` of Gated DeltaNet 1.3B against its 50% prune at 1, 8, 64,
#      256 and of DeltaNet 1.3B at 1 and 8 (a control: no gated norm); the Kineto table of Gated DeltaNet 1.3B's
#      batch-1 step; the gated GEMV with the gate planted out (the bit test must fail); the GDN bench once more.
# Run (on branch exp/gated-norm-gemv, which has the gated GEMV; main does not: no faster, 49th wave):
#   git checkout exp/gated-norm-gemv && bash bench/h200_wave49.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w49
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  gpu_gate
  configure_and_build fused_ops_cuda
  checkpoint gdn13 --family gated_deltanet && pruned gdn13 && bench_decode gdn13 now 1,8,64,256
  checkpoint dn13 && pruned dn13 && bench_decode dn13 control 1,8
  profile_decode gdn13 1
  planted_bug kernels/gemv.cu 's|detail::warp_norm_row<T, 1, 8, false>(x + at|detail::warp_norm_row<T, 0, 8, false>(x + at|' \
    fused_ops_cuda '*gatedNormGemvIsThe*' "the gated GEMV's gate dropped"
  if [ "$(elapsed)" -lt 480 ]; then  # the planted bug left the library built with it: rebuild what runs next
    cmake --build "$BUILD" -j"$(nproc)" --target statecut >"$LOGS/rebuild.log" 2>&1 && bench_decode gdn13 again 1,8
  fi
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
