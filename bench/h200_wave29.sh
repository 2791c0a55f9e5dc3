#!/usr/bin/env bash
# Where the [V,K] decode kernel at dk 128 lost ~9% against its baseline (28th wave: copy fraction 0.716 / 0.822 /
# 0.855 at B = 64 / 256 / 1024 against 0.78 / 0.90 / 0.94), and Mamba-2 at its 1.3B shape.
#   P  the decode kernel of six trees built here by nvcc into a throwaway probe (.probe/vk, ignored, carried: the
#      kernel source of 4c59ffe — the tree of the last passing gate —, HEAD, and HEAD without each of the later
#      changes to recurrent_vk_kernel: the programmatic dependent launch, the token-stride offsets, the typed
#      gate/beta reads, and all three), each at B = 64 / 256 / 1024 x 16 heads, both layouts, dk 128 and 64; HEAD
#      again with STATECUT_PDL=0. Then, while time is left, the CLI and a random Mamba-2 at state-spaces/
#      mamba2-1.3b's shape and its 50% rand prune through `statecut bench`.
# Results under $OUT: 00_summary.log, bench_m2.json. Run: bash bench/h200_wave29.sh P
set -uo pipefail
PHASE=${1:-P}
TAG=w29
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = P ]; then
  for v in old head nopdl oldoff oldgate all; do
    timeout 60 .probe/vk/vk_$v $v >>"$S" 2>&1 || say "probe $v rc=$?"
  done
  STATECUT_PDL=0 timeout 60 .probe/vk/vk_head head_pdl0 >>"$S" 2>&1 || say "probe head_pdl0 rc=$?"
  say "probes done at $(elapsed) s"
  configure_and_build
  if [ "$(elapsed)" -lt "${M2_DEADLINE:-330}" ]; then
    checkpoint m2 --family mamba2 && pruned m2 && bench m2
  else
    say "Mamba-2 skipped: $(elapsed) s elapsed"
  fi
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
