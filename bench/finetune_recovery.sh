#!/usr/bin/env bash
# Recovery of the shipped model after drrqr pruning (issue 13): prune at each RATIO, finetune (LoRA on q/k/v +
# conv/norm/bias, CE + KD from the unpruned model), and evaluate bits/byte on pydocs_valid before and after.
#   bench/finetune_recovery.sh [BUILD_DIR=build-train] [WORK=/tmp/statecut-recovery]
# Knobs (environment): SC=<statecut binary>, RATIOS="0.75 0.5", STEPS=120, SEQ=512, BATCH=4, ACCUM=1, LR=1e-3, MODEL=<checkpoint>,
# EVAL_TOKENS=8192. MODEL defaults to ../shared/models/byte_delta_net_4L (the fp32 original) when present, else
# assets/byte_delta_net_4L (the same weights rounded to bf16). Prints one table row per ratio and writes
# $WORK/recovery.json.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build-train}
WORK=${2:-/tmp/statecut-recovery}
SC=${SC:-"$ROOT/$BUILD/cli/statecut"}
RATIOS=${RATIOS:-"0.75 0.5"}
STEPS=${STEPS:-120}
SEQ=${SEQ:-512}
BATCH=${BATCH:-4}
ACCUM=${ACCUM:-1}
LR=${LR:-1e-3}
EVAL_TOKENS=${EVAL_TOKENS:-8192}
if [[ -z "${MODEL:-}" ]]; then
  MODEL="$ROOT/../shared/models/byte_delta_net_4L"
  [[ -f "$MODEL/model.safetensors" ]] || MODEL="$ROOT/assets/byte_delta_net_4L"
fi
CORPORA="$ROOT/../shared/corpora"
[[ -f "$CORPORA/pydocs_train.txt" ]] || CORPORA="$ROOT/assets/corpora"
TRAIN="$CORPORA/pydocs_train.txt"
VALID="$CORPORA/pydocs_valid.txt"
mkdir -p "$WORK"

bpb() {  # bits/byte of checkpoint $1 on the first EVAL_TOKENS of pydocs_valid
  "$SC" eval --checkpoint "$1" --text "$VALID" --max-tokens "$EVAL_TOKENS" --json --quiet |
    python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["results"][0]["bits_per_byte"])'
}

base=$(bpb "$MODEL")
echo "model $MODEL: $base bits/byte (pydocs_valid, first $EVAL_TOKENS tokens)"
printf '%-6s %10s %10s %12s %10s %8s %s\n' ratio unpruned pruned finetuned recovered seconds command
rows=()
for R in $RATIOS; do
  P="$WORK/drrqr_$R" F="$WORK/drrqr_${R}_ft"
  rm -rf "$P" "$F" "$F.state"
  "$SC" prune --checkpoint "$MODEL" --method drrqr --ratio "$R" --calib "$TRAIN" --calib-seqs 4 --calib-len 512 \
    --out "$P" --quiet >/dev/null
  pruned=$(bpb "$P")
  cmd=(finetune --checkpoint "$P" --teacher "$MODEL" --text "$TRAIN" --out "$F" --steps "$STEPS" --seq-len "$SEQ"
       --batch "$BATCH" --accum "$ACCUM" --lr "$LR" --quiet)
  t0=$(date +%s.%N)
  "$SC" "${cmd[@]}" >/dev/null
  t1=$(date +%s.%N)
  ft=$(bpb "$F")
  secs=$(python3 -c "print('%.0f' % ($t1 - $t0))")
  rec=$(python3 -c "b,p,f=$base,$pruned,$ft; print('%.0f%%' % (100*(p-f)/(p-b)) if p>b else 'n/a')")
  printf '%-6s %10s %10s %12s %10s %8s statecut %s\n' "$R" "$base" "$pruned" "$ft" "$rec" "$secs" "${cmd[*]}"
  rows+=("{\"ratio\": $R, \"unpruned\": $base, \"pruned\": $pruned, \"finetuned\": $ft, \"seconds\": $secs}")
done
(IFS=,; echo "{\"model\": \"$MODEL\", \"eval_tokens\": $EVAL_TOKENS, \"steps\": $STEPS, \"seq_len\": $SEQ, \"batch\": $BATCH, \"accum\": $ACCUM, \"lr\": $LR, \"rows\": [${rows[*]}]}") > "$WORK/recovery.json"
