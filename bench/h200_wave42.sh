#!/usr/bin/env bash
# Which tokenizer transformers 5 builds, and where a 50% DeltaNet prune's decode step goes at batch 256 (2026-12-05):
#   A  HF tokenizers 0.23 and transformers 5.17's AutoTokenizer over every text of .probe/tokc/texts.jsonl on the real
#      tokenizers of .probe/tokc/tokfiles.tar.xz and on their variants in .probe/tokc/variants.tar.xz (tokenizer_config.json
#      edited: legacy, add_prefix_space, tokenizer_class, none at all, config.json's model_type only), both carried and
#      never committed; the goldens come back as one archive, $OUT/tok.tar.xz. Then Kineto tables of a DeltaNet 1.3B
#      decode step at batch 256 and of its 50% prune, and statecut bench of both at 64 and 256 (graphs).
# Run: bash bench/h200_wave42.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w42
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  mkdir -p "$WORK/tok/files" && tar xJf .probe/tokc/tokfiles.tar.xz -C "$WORK/tok" &&
    tar xJf .probe/tokc/variants.tar.xz -C "$WORK/tok" && mv "$WORK"/tok/tokvar/* "$WORK/tok/files/"
  (python3 tools/tokenizer_oracle/oracle.py "$WORK/tok/files" .probe/tokc/texts.jsonl "$WORK/gold" >"$LOGS/oracle.log" 2>&1;
   echo "oracle rc=$? at $(elapsed) s" >>"$LOGS/oracle.log"; tar cJf "$OUT/tok.tar.xz" -C "$WORK" gold) &
  oracle=$!
  configure_and_build
  checkpoint dn13 && pruned dn13 && profile_decode dn13_p50 256 && profile_decode dn13 256 && bench_decode dn13 b64_256 64,256
  wait $oracle
  grep -v '^\[transformers\]' "$LOGS/oracle.log" | grep -E 'transformers |refuses|failed|oracle rc' >>"$S"
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
