#!/usr/bin/env bash
# The 50th wave (2026-12-06): the regression gate on the tree the session lands (beta's one sigmoid in every gated
# delta kernel, g and beta read in place): SKIP_TESTS=1 BENCH=1 ci/device.sh (the kernels' benchmark, the model
# benchmark of DeltaNet 1.3B and its 50% prune, and bench/compare.py over both; its summary under $OUT/bench).
# Run: bash bench/h200_wave50.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w50
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
[ "$PHASE" = A ] && bench_gate
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
