#!/usr/bin/env bash
# The 54th wave (2026-12-06): issue 14's decode figures on the landed tree (after the 48th wave's Gated DeltaNet change
# and the 52nd wave's experiment left out): `statecut bench`, graphs, DeltaNet 1.3B and Gated DeltaNet 1.3B against
# their 50% prunes at batch 1, 8, 64, 256, two rounds when time allows.
# Run: bash bench/h200_wave54.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w54
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  configure_and_build
  checkpoint dn13 && pruned dn13
  checkpoint gdn13 --family gated_deltanet && pruned gdn13
  for round in 1 2; do
    bench_decode dn13 "r$round" 1,8,64,256
    bench_decode gdn13 "r$round" 1,8,64,256
    [ "$(elapsed)" -gt 300 ] && break
  done
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
