#!/usr/bin/env bash
# Wave 8 on one H100/H200: `statecut generate` on CUDA replays one captured step per token (GreedyStepper fed the
# sampled ids) instead of an eager forward_cached.
#   A  configure + build (Release, sm_90a) the CLI and every GPU test; `ctest -L GPU`; the CUDA cases of
#      decode_equivalence (incl. generateWithAGraphPicksTheEagerLoopsTokens: graphed generate = eager generate,
#      greedy and sampled); then `statecut generate --device cuda --dtype bf16` of 256 tokens after a 512-byte prompt on
#      random checkpoints of fla DeltaNet 1.3B, Gated DeltaNet 1.3B and the Qwen3.5-style hybrid (2.3B), with graphs
#      and with --no-graphs: decode tokens/s of each, and the two runs' ids compared (greedy: must be equal).
#      (Its run at 18:58 UTC: build, ctest -L GPU 64/64, decode_equivalence 90/90; the 1.3B checkpoints' 32,000-id
#      vocabularies cannot be printed through the byte-level tokenizer, so generate refused them.)
#   B  the same generate runs on checkpoints with a 256-id vocabulary (the head 0.5 MB instead of 131 / 311 MB).
#      (Its run at 19:03 UTC, each step fed the host's pick: graph / eager 635 / 511, 593 / 467, 390 / 278 tokens/s.)
#   C  greedy generate takes the stepper's argmax with the next step in flight: the build, decode_equivalence's CUDA
#      cases (graphed generate = eager generate = the host's top-1 draw; stop ids), then phase B's runs.
#      (Its run at 19:11 UTC: 108/108; 642 / 494 and 604 / 456 tokens/s; the hybrid's graph run 117 tokens/s with its
#      prefill 4x slower than in every other run, 1.35 s: the machine, not the step; ids equal in all three.)
#   D  phase B's runs, 512 tokens, the hybrid twice, with the setup (first step + capture) timed apart.
#   E  the final tree (boundaries handed over layer by layer, logits = false in calibration and rank): the build,
#      `ctest -L GPU`, decode_equivalence's CUDA cases, and the 1.3B DeltaNet drrqr prune on CUDA at 16 x 2048
#      (wall, calibrate, peak host RSS; last measured 16.4 s, bench/README "Pruning speed" (b)).
# Results under $OUT: 00_summary.log, gen_*.json, failing logs. Run from the repository root: bash bench/h200_wave8.sh A
set -uo pipefail
PHASE=${1:-A}
TAG=w8
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
GPU_TESTS="fused_ops_cuda golden_models_cuda metamorphic_gated_delta_cuda equiv_gated_delta_cuda badinput_gated_delta_cuda
  calibration_cuda train_cuda"

gen() {  # NAME: generate 256 tokens with and without graphs; tokens/s and whether the ids agree
  local n=$1 m
  head -c 512 assets/corpora/pydocs_train.txt >"$WORK/prompt.txt"
  for m in graph eager; do
    local f=""; [ $m = eager ] && f="--no-graphs"
    # shellcheck disable=SC2086
    timeout 120 "$SC" generate --checkpoint "$WORK/$n" --prompt-file "$WORK/prompt.txt" --tokenizer bytes \
      --max-new-tokens "${NEW:-256}" --device cuda --dtype bf16 --json $f >"$OUT/gen_${n}_$m.json" 2>"$LOGS/gen_${n}_$m.err" ||
      { rc=1; keep "$LOGS/gen_${n}_$m.err"; say "generate $n $m FAILED"; return 0; }
  done
  python3 - "$OUT/gen_${n}_graph.json" "$OUT/gen_${n}_eager.json" "$n" >>"$S" 2>&1 <<'PY'
import json, sys
g, e = (json.load(open(p)) for p in sys.argv[1:3])
steady = lambda j: (j['new_tokens'] - 2) / (j['decode_seconds'] - j.get('setup_seconds', 0))
print(f"generate {sys.argv[3]}: steady (after the first step and the capture) graph {steady(g):.1f} / eager {steady(e):.1f} "
      f"tok/s = {steady(g) / steady(e):.2f}x; setup {g.get('setup_seconds', 0)*1e3:.0f} / {e.get('setup_seconds', 0)*1e3:.0f} ms")
print(f"generate {sys.argv[3]}: graph {g['decode_tokens_per_s']:.1f} tok/s (cuda_graph={g['cuda_graph']}), "
      f"eager {e['decode_tokens_per_s']:.1f} tok/s: {g['decode_tokens_per_s'] / e['decode_tokens_per_s']:.2f}x; "
      f"prefill {g['prefill_seconds']*1e3:.1f} / {e['prefill_seconds']*1e3:.1f} ms; "
      f"{g['new_tokens']} tokens, ids {'EQUAL' if g['ids'] == e['ids'] else 'DIFFER'}")
PY
}

if [ "$PHASE" = A ]; then
  # shellcheck disable=SC2086
  configure_and_build $GPU_TESTS decode_equivalence streamed_model
  (cd "$BUILD" && timeout 300 ctest -L GPU --output-on-failure -j4 >"$LOGS/ctest_gpu.log" 2>&1) ||
    { rc=1; keep "$LOGS/ctest_gpu.log"; }
  say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log")"
  grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|SEGFAULT" "$LOGS/ctest_gpu.log" | head -20 >>"$S"
  run_tests decode_equivalence streamed_model
  grep -h "graphed vs eager" "$LOGS/decode_equivalence.log" | head -12 >>"$S"
  for n in dn13 gdn13 q35; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"; [ $n = q35 ] && f="--family qwen3_5"
    # shellcheck disable=SC2086
    checkpoint $n $f && gen $n
  done
elif [ "$PHASE" = B ]; then  # generate only; vocabulary 256 so that byte-level text decodes (random weights)
  configure_and_build
  for n in dn13 gdn13 q35; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"; [ $n = q35 ] && f="--family qwen3_5"
    # shellcheck disable=SC2086
    checkpoint ${n}v $f --vocab 256 && gen ${n}v
  done
elif [ "$PHASE" = C ]; then
  configure_and_build decode_equivalence
  run_tests decode_equivalence
  for n in dn13 gdn13 q35; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"; [ $n = q35 ] && f="--family qwen3_5"
    # shellcheck disable=SC2086
    checkpoint ${n}v $f --vocab 256 && gen ${n}v
  done
elif [ "$PHASE" = D ]; then
  configure_and_build
  for n in q35 dn13 gdn13 q35; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"; [ $n = q35 ] && f="--family qwen3_5"
    # shellcheck disable=SC2086
    checkpoint ${n}v $f --vocab 256 && NEW=512 gen ${n}v
  done
elif [ "$PHASE" = E ]; then
  # shellcheck disable=SC2086
  configure_and_build $GPU_TESTS decode_equivalence
  (cd "$BUILD" && timeout 300 ctest -L GPU --output-on-failure -j4 >"$LOGS/ctest_gpu.log" 2>&1) ||
    { rc=1; keep "$LOGS/ctest_gpu.log"; }
  say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log")"
  grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|SEGFAULT" "$LOGS/ctest_gpu.log" | head -20 >>"$S"
  run_tests decode_equivalence
  checkpoint dn13 && for i in 1 2; do
    rm -rf "$WORK/dn13_drrqr"
    /usr/bin/time -v -o "$LOGS/prune_time.txt" timeout 200 "$SC" prune --checkpoint "$WORK/dn13" --method drrqr \
      --ratio 0.5 --calib assets/corpora/pydocs_train.txt --calib-seqs 16 --calib-len 2048 --tokenizer bytes \
      --device cuda --quiet --out "$WORK/dn13_drrqr" >"$LOGS/prune_drrqr.log" 2>&1 || { rc=1; keep "$LOGS/prune_drrqr.log"; }
    say "prune drrqr 16x2048 cuda (run $i): $(grep '^time:' "$LOGS/prune_drrqr.log"); wall $(awk -F': ' '/Elapsed/ {print $2}' \
      "$LOGS/prune_time.txt"), peak host RSS $(awk '/Maximum resident/ {printf "%.2f GB", $6 / 1e6}' "$LOGS/prune_time.txt")"
  done
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
