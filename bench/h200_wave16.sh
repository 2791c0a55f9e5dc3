#!/usr/bin/env bash
# Issue 13, a training step on the H200 after the chunked recurrence's inter-chunk scan became one autograd node
# (optimized/models/recurrence_scan.h: two GEMMs a chunk backward instead of autograd's ~8 launches, the weight,
# key and decay gradients batched) and grad_norm's one sync per step (the thirteenth wave's by-operator profile of
# the same step: BaddbmmBackward 3,000 bmm + 1,488 add + 1,512 mul launches a step).
#   T  configure + build (Release, sm_90a, the CLI, the profile tool, train_cuda); train_cuda; random DeltaNet and
#      Gated DeltaNet 1.3B with their 50% rand prunes; `statecut finetune --device cuda` of each prune from its full
#      model (LoRA + KD, bf16, 4 x 2048 tokens a step, 8 / 6 steps, steady rate from loss.csv); the DeltaNet step
#      under Kineto, by kernel and by operator (with input shapes) when time is left (GDN_BY, PROFILE_BY: the
#      elapsed seconds before which those still start).
# Results under $OUT: 00_summary.log, ft_*.json. Run: bash bench/h200_wave16.sh T
set -uo pipefail
PHASE=${1:-T}
TAG=w16
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = T ]; then
  configure_and_build train_cuda
  run_tests train_cuda
  grep -h "worst\|moved-weight" "$LOGS"/train_cuda.log >>"$S"
  checkpoint dn13 && pruned dn13 && ft dn_lora_bf16 dn13_p50 dn13 --steps 8 --precision bf16
  [ "$(elapsed)" -lt "${GDN_BY:-200}" ] && checkpoint gdn13 --family gated_deltanet && pruned gdn13 &&
    ft gdn_lora_bf16 gdn13_p50 gdn13 --steps 6 --precision bf16
  [ "$(elapsed)" -lt "${PROFILE_BY:-300}" ] && profile_train dn13_p50 dn13
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
