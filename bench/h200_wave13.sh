#!/usr/bin/env bash
# Prepared for the next H200 session (issue 14: Gated DeltaNet 1.3B's prefill 8x2048 was 0.91x fla's model forward in
# the twelfth wave while DeltaNet's was 1.05x): where the Gated DeltaNet prefill's time goes, and how the chunk kernel
# does at that layer's shape against fla's.
#   G  configure + build (Release, sm_90a, the CLI and tools); a random Gated DeltaNet 1.3B and its 50% rand prune; a
#      Kineto profile of one 8x2048 prefill of each (device_env.sh's profile_prefill); fla's chunk_gated_delta_rule
#      against ours at H 6, dk 256 and 128, dv 512, 8x2048 (bench/cuda_fla_compare.py, fla carried in .fla).
#   T  (after G, same machine) a Kineto profile of two bf16 LoRA + KD finetune steps of DeltaNet 1.3B's 50% prune
#      from the full model (device_env.sh's profile_train): where a training step's time goes, by kernel and by
#      operator (issue 13).
# Results under $OUT: 00_summary.log, fla_gdn.txt. Run from the repository root: bash bench/h200_wave13.sh G; bash
# bench/h200_wave13.sh T
set -uo pipefail
PHASE=${1:-G}
TAG=w13
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = G ]; then
  configure_and_build
  checkpoint gdn13 --family gated_deltanet && pruned gdn13
  profile_prefill gdn13 8 2048
  profile_prefill gdn13_p50 8 2048
  if [ -d .fla/fla ]; then
    FLA_H=6 FLA_K=256,128 FLA_V=512 FLA_SHAPES=8x2048 PYTHONPATH=.fla timeout $(( 560 - $(elapsed) )) \
      python3 bench/cuda_fla_compare.py "$BUILD/kernels/libstatecut_cuda_torch.so" "$OUT/fla_gdn.txt" \
      >"$LOGS/fla_gdn.log" 2>&1 || rc=1
    say "--- chunk kernel vs fla at Gated DeltaNet 1.3B's layer (H 6, dv 512, 8 x 2048)"
    tail -6 "$LOGS/fla_gdn.log" >>"$S"
  fi
fi
if [ "$PHASE" = T ]; then
  [ -x "$SC" ] || configure_and_build
  checkpoint dn13 && pruned dn13 && profile_train dn13_p50 dn13
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
