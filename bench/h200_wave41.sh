#!/usr/bin/env bash
# Tokenizer oracle and the GPU gate on one machine (2026-12-05):
#   A  HF tokenizers 0.23 / transformers 5.17 give their ids for every text of .probe/tokc/texts.jsonl
#      (tools/tokenizer_oracle/make_texts.py) on every real tokenizer.json in .probe/tokc/tokfiles.tar.xz (carried; gathered
#      from public repositories, never committed) -> $OUT/tok/<name>.jsonl, run beside the build; then the GPU gate
#      (`SKIP_SANITIZER=1 bash ci/device.sh`, its summary under $OUT/gate); then a Kineto table of a DeltaNet 1.3B
#      decode step at batch 256 and of its 50% prune (where the prune's step goes: issue 14's 50% speedup at 256).
# Run: bash bench/h200_wave41.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w41
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
if [ "$PHASE" = A ]; then
  mkdir -p "$WORK/tok" && tar xJf .probe/tokc/tokfiles.tar.xz -C "$WORK/tok"
  (python3 tools/tokenizer_oracle/oracle.py "$WORK/tok/files" .probe/tokc/texts.jsonl "$OUT/tok" >"$LOGS/oracle.log" 2>&1;
   echo "oracle rc=$? at $(elapsed) s" >>"$LOGS/oracle.log") &
  oracle=$!
  OUT="$OUT/gate" LOGS="$LOGS/gate" BUILD="$BUILD" SKIP_SANITIZER=1 bash ci/device.sh >"$LOGS/gate.log" 2>&1 || rc=1
  say "gate: $(tail -1 "$LOGS/gate.log") at $(elapsed) s"
  wait $oracle
  say "$(tail -1 "$LOGS/oracle.log")"; cp "$LOGS/oracle.log" "$OUT/"
  if [ "$(elapsed)" -lt 400 ]; then
    configure_and_build
    checkpoint dn13 && pruned dn13 && profile_decode dn13_p50 256 && profile_decode dn13 256
  fi
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
