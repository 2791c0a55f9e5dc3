#!/usr/bin/env bash
# Prints the README's walkthrough block with the real output of each command (run from the repository root):
#   tools/readme_walkthrough.sh build/cli/statecut > /tmp/walk.md   then paste it between the walkthrough markers.
# tests/cli/readme_walkthrough.cpp runs the same commands and checks the output's words and layout.
set -euo pipefail
bin="${1:-build/cli/statecut}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
cmds=(
  "prune --quiet --checkpoint assets/byte_delta_net_4L --method drrqr --ratio 0.5 --calib assets/corpora/pydocs_train.txt --calib-seqs 2 --calib-len 256 --out \$OUT/half"
  "eval --quiet --checkpoint assets/byte_delta_net_4L --text assets/corpora/pydocs_valid.txt --max-tokens 2048"
  "eval --quiet --checkpoint \$OUT/half --text assets/corpora/pydocs_valid.txt --max-tokens 2048"
  "rank --checkpoint \$OUT/half --text assets/corpora/pydocs_valid.txt --len 256"
  "verify --quiet --checkpoint \$OUT/half --source assets/byte_delta_net_4L --windows 1 --len 128 --only load,config,pruned,reference,chunk-recurrent"
  "finetune --quiet --checkpoint \$OUT/half --teacher assets/byte_delta_net_4L --text assets/corpora/pydocs_train.txt --steps 4 --seq-len 256 --lora-rank 8 --out \$OUT/half-ft"
  "eval --quiet --checkpoint \$OUT/half-ft --text assets/corpora/pydocs_valid.txt --max-tokens 2048"
  "generate --checkpoint assets/byte_delta_net_4L --prompt 'The function' --max-new-tokens 48"
)
echo '```'
for c in "${cmds[@]}"; do
  echo "\$ statecut $c"
  eval "\"$bin\" ${c//\\\$OUT/$OUT}" 2>/dev/null | sed "s#$OUT#\$OUT#g"
  echo
done
echo '```'
