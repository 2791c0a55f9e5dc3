#!/usr/bin/env bash
# Issue 19.7: peak memory of a data-driven prune of a checkpoint, with the whole fp32 model in memory and with
# StreamedModel (one block's weights resident). Writes a random 1.3B DeltaNet checkpoint (fla-hub shapes, bf16,
# 2.73 GB) unless CKPT names one, then runs `statecut prune --method drrqr` both ways under /usr/bin/time -v and
# checks that both write the same model.safetensors.
# Usage: bench/stream_calibration.sh [BUILD_DIR=build] ; env CKPT, SEQS (2), LEN (256), OUT (/tmp/stream_bench)
set -euo pipefail
build="${1:-build}"
out="${OUT:-/tmp/stream_bench}"
ckpt="${CKPT:-$out/ckpt}"
rm -rf "$out/off" "$out/on"
mkdir -p "$out"
[ -f "$ckpt/model.safetensors" ] || "$build/cli/statecut-random-checkpoint" --out "$ckpt"
calib="$(dirname "$0")/../assets/corpora/pydocs_train.txt"
tok=()  # a random checkpoint has no tokenizer: byte-level ids (speed and memory do not depend on the text)
[ -f "$ckpt/tokenizer.json" ] || [ -f "$ckpt/tokenizer.model" ] || tok=(--tokenizer bytes)
for mode in off on; do
  /usr/bin/time -v -o "$out/$mode.time" "$build/cli/statecut" prune --checkpoint "$ckpt" --method drrqr --ratio 0.5 \
    --calib "$calib" --calib-seqs "${SEQS:-2}" --calib-len "${LEN:-256}" --stream-weights "$mode" "${tok[@]}" --quiet \
    --out "$out/$mode" > "$out/$mode.log"
  echo "stream-weights $mode: $(grep -h '^time:' "$out/$mode.log")"
  echo "  peak RSS $(awk '/Maximum resident/ {printf "%.2f GB", $6 / 1e6}' "$out/$mode.time"), wall $(awk -F': ' '/Elapsed/ {print $2}' "$out/$mode.time")"
done
echo "checkpoint: $(stat -c %s "$ckpt/model.safetensors") bytes"
cmp "$out/off/model.safetensors" "$out/on/model.safetensors" && echo "same model.safetensors"
