#!/usr/bin/env bash
# The README's whole GPU check as a user runs it, and Mamba-2 at its 1.3B shape.
#   A  `BENCH=1 SKIP_SANITIZER=1 bash ci/device.sh` (its summary, bench.json, model_bench.json and bench_compare.log
#      under $OUT/device: the build, every GPU test, the kernels' benchmark, the model benchmark and the regression
#      gate, never run on the GPU before), without bench/device_env.sh's libstdc++ preload; then, while time is left, a random Mamba-2 at state-spaces/mamba2-1.3b's
#      shape and its 50% rand prune through `statecut bench` (prefill 1x2048 and 8x2048, decode 1 / 64 / 256).
# Results under $OUT: 00_summary.log, device/, bench_m2.json. Run: bash bench/h200_wave28.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w28
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  # as a user runs it: without device_env.sh's libstdc++ preload (ran with a CMakeLists.txt that named libstdc++ first
  # in DT_NEEDED; on the device it was not first for the CLI, yet every step passed: the change was not kept)
  env -u LD_PRELOAD OUT="$OUT/device" LOGS="$LOGS/device" BENCH=1 SKIP_SANITIZER=1 BUILD="$BUILD" bash ci/device.sh \
    >"$LOGS/device.log" 2>&1 || rc=1
  say "ci/device.sh rc=$rc at $(elapsed) s:"
  cat "$OUT/device/00_summary.log" >>"$S" 2>/dev/null
  tl=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))')
  say "remove_all exported by: $(cd "$tl" && for f in *.so*; do nm -D --defined-only "$f" 2>/dev/null |
    grep -q 'filesystem.*remove_all' && printf '%s ' "$f"; done)"
  say "statecut NEEDED: $(readelf -d "$SC" | grep NEEDED | head -4 | grep -o '\[.*\]' | tr '\n' ' ')"
  if [ "$(elapsed)" -lt "${M2_DEADLINE:-400}" ]; then
    checkpoint m2 --family mamba2 && pruned m2 && bench m2
  else
    say "Mamba-2 skipped: $(elapsed) s elapsed"
  fi
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
