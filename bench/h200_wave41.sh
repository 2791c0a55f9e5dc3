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
  # statecut's tokenizers against both oracles on the untrimmed files: Golden_Tokenizers over a folder per tokenizer
  cmake --build "$BUILD" --target tokenizer_oracle >"$LOGS/build_oracle.log" 2>&1 || keep "$LOGS/build_oracle.log"
  READ="gpt2 gpt-neox-20b olmo-dolma2 olmo-gpt-neox-20b-pii-special olmo-gpt-neox-dolma-v1_5 phi-2 phi-3-mini mistral-7b-v0.1 whisper-large-v3 roberta-base chatglm"
  for src in hf tf; do
    root="$WORK/oracle_$src"
    for g in "$OUT"/tok/*.jsonl; do
      n=$(basename "$g" .jsonl); [ "$src" = hf ] && [ "${n%.tf}" != "$n" ] && continue
      [ "$src" = tf ] && { [ "${n%.tf}" = "$n" ] && continue; n=${n%.tf}; }
      case " $READ " in *" $n "*) ;; *) continue ;; esac  # the ones statecut reads; the others it refuses in one line
      mkdir -p "$root/$n" && cp "$WORK/tok/files/$n"/tokenizer.* "$root/$n/" && cp "$g" "$root/$n/golden.jsonl"
    done
    STATECUT_TOKENIZER_ORACLE="$root" "$BUILD/tests/tokenizer_oracle" >"$OUT/golden_tokenizers_$src.log" 2>&1
    say "Golden_Tokenizers against $src: rc=$? $(grep -cE '^[a-z].*: [0-9]+ texts' "$OUT/golden_tokenizers_$src.log") folders"
  done
  if [ "$(elapsed)" -lt 400 ]; then
    configure_and_build
    checkpoint dn13 && pruned dn13 && profile_decode dn13_p50 256 && profile_decode dn13 256
  fi
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
