#!/usr/bin/env bash
# The 51st wave (2026-12-06): where DeltaNet 1.3B's batch-64 step goes, each kernel's own duration (issue 14's
# unmet 1.25x of the floor at batch 64).
#   A  Kineto tables of 32 eager decode steps at batch 64 of DeltaNet 1.3B and its 50% prune with programmatic
#      dependent launches off (STATECUT_PDL=0: a kernel's duration is then its own work, not its wait for the one
#      before), then with them on; `statecut bench` of both at 64 with STATECUT_PDL=0 and as they are (graphs), for
#      what the overlap buys.
# Run: bash bench/h200_wave51.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w51
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  configure_and_build
  checkpoint dn13 && pruned dn13
  STATECUT_PDL=0 profile_decode dn13 64
  STATECUT_PDL=0 profile_decode dn13_p50 64
  STATECUT_PDL=0 bench_decode dn13 nopdl 64
  bench_decode dn13 pdl 64
  [ "$(elapsed)" -lt 380 ] && profile_decode dn13 64
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
