#!/usr/bin/env bash
# Issue 12's speed figures for `statecut verify`, in one device call on the H200 machine (16 cores), from the
# repository root:  bash bench/verify_h200.sh
#   (a) the shipped model on the CPU pinned to 2 cores (the CI machine's size), default windows (4 x 512):
#       random tokens, then pydocs_valid; target < 60 s;
#   (b) the shipped model with --device cuda (adds the kernels check);
#   (c) a 1.3B-shaped random fla DeltaNet (tools/statecut-random-checkpoint, bf16) with --device cuda; target < 2 min;
#   (d) the same pruned to dk 64 by l1, verified against it with --source (pruned rows bit for bit; kernels timed
#       at dk 64 vs 128).
# Every run's table and its wall time land in $OUT (default /tmp/statecut-verify-h200), one log per run.
# Env: BUILD (default build-gpu-verify; configured + built here unless SKIP_BUILD=1), SKIP_CPU=1 skips (a),
# SKIP_BIG=1 skips (c) and (d).
set -uo pipefail
OUT=${OUT:-/tmp/statecut-verify-h200}
BUILD=${BUILD:-build-gpu-verify}
WORK=${WORK:-/tmp/statecut-verify-work}
mkdir -p "$OUT" "$WORK"
LOG="$OUT/00_summary.log"
{
  date -u
  git log -1 --format='commit %H %cd' 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  echo "cores: $(nproc)"
} | tee "$LOG"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  t0=$(date +%s)
  TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target statecut statecut-random-checkpoint >"$OUT/build.log" 2>&1 ||
    { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -60; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
fi
BIN="$BUILD/cli"

run() {  # run NAME LIMIT_S ARGS...: one verify, its table in $OUT/NAME.log, wall time and exit code in the summary
  local name=$1 limit=$2
  shift 2
  local t0
  t0=$(date +%s%N)
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf '%-28s rc=%d wall %d.%03d s  %s\n' "$name" "$rc" $((ms / 1000)) $((ms % 1000)) \
    "$(grep -E '^(OK|FAILED):' "$OUT/$name.log")" | tee -a "$LOG"
}

model=assets/byte_delta_net_4L
if [ "${SKIP_CPU:-0}" != 1 ]; then
run cpu2_random 300 taskset -c 0,1 env OMP_NUM_THREADS=2 "$BIN/statecut" verify --quiet --checkpoint $model
run cpu2_pydocs 300 taskset -c 0,1 env OMP_NUM_THREADS=2 "$BIN/statecut" verify --quiet --checkpoint $model \
  --text assets/corpora/pydocs_valid.txt
fi
run cuda_shipped 300 "$BIN/statecut" verify --quiet --checkpoint $model --text assets/corpora/pydocs_valid.txt --device cuda
if [ "${SKIP_BIG:-0}" != 1 ]; then
  rm -rf "$WORK/big" "$WORK/big-l1"
  "$BIN/statecut-random-checkpoint" --out "$WORK/big" >>"$LOG" 2>&1 || exit 1
  run cuda_1p3b 300 "$BIN/statecut" verify --checkpoint "$WORK/big" --device cuda
  timeout 200 "$BIN/statecut" prune --quiet --checkpoint "$WORK/big" --method l1 --ratio 0.5 --out "$WORK/big-l1" \
    >>"$LOG" 2>&1
  run cuda_1p3b_l1_pruned 300 "$BIN/statecut" verify --checkpoint "$WORK/big-l1" --source "$WORK/big" --device cuda \
    --only load,config,pruned,kernels
fi
echo "done" | tee -a "$LOG"
