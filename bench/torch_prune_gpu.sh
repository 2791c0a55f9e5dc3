#!/usr/bin/env bash
# Issue #5 §7(b): a 1.3B-shaped fla DeltaNet (fla-hub/delta_net-1.3B-100B shapes, random bf16 weights written by
# tools/statecut-random-checkpoint) pruned at 50% with drrqr and with grad by `statecut prune --device cuda`,
# 16 × 2048 calibration tokens of pydocs_train; target < 60 s each (wall time of the whole command).
# Each pruned checkpoint is checked: statecut.json keeps 64 of 128 channels in all 24 layers and the written
# k_proj is [1024, 2048].
#
# On the H200 (one device call, from the repository root):
#   bash bench/torch_prune_gpu.sh
# Local rehearsal on a tiny shape on CPU (no GPU needed):
#   BUILD=build-pipeline DEVICE=cpu SIZES="--hidden 128 --heads 2 --layers 2 --intermediate 256 --vocab 300" \
#     SEQS=2 LEN=256 bash bench/torch_prune_gpu.sh
# Env: BUILD (build folder; configured + built here unless SKIP_BUILD=1), DEVICE, SIZES, SEQS, LEN, METHODS, OUT.
set -uo pipefail
OUT=${OUT:-/tmp/statecut-prune-gpu}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu-pipeline}
DEVICE=${DEVICE:-cuda}
SIZES=${SIZES:-}
SEQS=${SEQS:-16}
LEN=${LEN:-2048}
METHODS=${METHODS:-"drrqr grad"}
WORK=${WORK:-/tmp/statecut-prune-gpu-work}
LOG="$OUT/prune_gpu.log"
{
  date -u
  git log -1 --format='commit %H %cd' 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  nproc
} | tee "$LOG"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  t0=$(date +%s)
  if [ "$DEVICE" = cpu ]; then
    cmake -S . -B "$BUILD" -G Ninja >"$OUT/configure.log" 2>&1
  else
    TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$OUT/configure.log" 2>&1
  fi || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target statecut statecut-random-checkpoint >"$OUT/build.log" 2>&1 ||
    { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -40; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
fi
BIN="$BUILD/cli"
corpus=../shared/corpora/pydocs_train.txt
[ -f "$corpus" ] || corpus=assets/corpora/pydocs_train.txt

rm -rf "$WORK"
mkdir -p "$WORK"
t0=$(date +%s)
# shellcheck disable=SC2086
"$BIN/statecut-random-checkpoint" --out "$WORK/model" $SIZES 2>&1 | tee -a "$LOG" || exit 1
echo "write random checkpoint: $(( $(date +%s) - t0 )) s" | tee -a "$LOG"

rc=0
for m in $METHODS; do
  # Wall, user + sys CPU and peak host memory of the whole command (load + calibrate + select + write).
  python3 - "$OUT/time_$m.txt" timeout 170 "$BIN/statecut" prune --checkpoint "$WORK/model" \
    --method "$m" --ratio 0.5 --tokenizer bytes --calib "$corpus" --calib-seqs "$SEQS" --calib-len "$LEN" --device "$DEVICE" \
    --out "$WORK/pruned_$m" --quiet --json >"$OUT/prune_$m.json" 2>"$OUT/prune_$m.err" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
r = subprocess.run(sys.argv[2:]).returncode
u = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("wall %.2f s user %.2f s sys %.2f s max_rss %d MB\n" % (time.monotonic() - t, u.ru_utime, u.ru_stime, u.ru_maxrss // 1024))
sys.exit(r)
PY
  r=$?
  echo "prune $m: rc=$r $(cat "$OUT/time_$m.txt")" | tee -a "$LOG"
  python3 - "$OUT/prune_$m.json" "$WORK/pruned_$m" <<'PY' 2>&1 | tee -a "$LOG" || rc=1
import json, struct, sys
rec = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("  seconds:", rec["seconds"], "| head_k_dim", rec["head_k_dim"], "->", rec["new_head_k_dim"])
layers = rec["selection"]["layers"]
ok = all(len(h) == rec["new_head_k_dim"] for L in layers for h in L["keep"])
with open(sys.argv[2] + "/model.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    hdr = json.loads(f.read(n))
shape = hdr["model.layers.0.attn.k_proj.weight"]["shape"]
heads = len(layers[0]["keep"])
ok = ok and shape[0] == heads * rec["new_head_k_dim"]
print("  layers", len(layers), "heads", heads, "k_proj", shape, "check", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
  [ $r -ne 0 ] && { rc=$r; tail -5 "$OUT/prune_$m.err"; }
  rm -rf "$WORK/pruned_$m"
done
rm -rf "$WORK"
exit $rc
