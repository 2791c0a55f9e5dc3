#!/usr/bin/env bash
# Issue 14 (seventh wave) on one H200: the Qwen3.5-style hybrid decodes under CUDA graphs (the KV cache a reserved
# buffer, the position on the device) on the fused blocks (zero-centred add + norm, Qwen's gated norm, stacked
# projections, the decode kernel reading b and a in place).
#   Q  configure + build (Release, sm_90a); fused_ops_cuda, the CUDA cases of decode_equivalence (incl. 40 replayed
#      steps against eager ones, past the reserved room) and golden_models_cuda; two deliberate bugs must fail their
#      tests (the zero-centred offset dropped, Qwen's gated norm rounded once); a random Qwen3.5-style hybrid (2.3B)
#      and its 50% rand prune through `statecut bench` (prefill 1x2048 and 8x2048, decode 1/64/256 after 512, 128
#      steps, graphs) and eagerly (--no-graphs) at 1 and 64; the same checkpoints in transformers (its
#      Qwen3_5ForCausalLM, bf16, its cache; fla's kernels on the path when .fla is carried); a Kineto profile of 32
#      eager steps at batch 1.
#   D  the same build and tests; fla DeltaNet 1.3B and Gated DeltaNet 1.3B and their 50% prunes through `statecut
#      bench`. (Its first run, 15:16 UTC, measured a GEMV launched as a programmatic dependent that loaded its weight
#      rows before waiting on the kernel before it: every batch-1 step 0.2-0.35 ms slower, so it was reverted.)
#   F  the final tree: the same build and tests; the three 1.3B/2.3B shapes and their prunes through `statecut bench`;
#      a Kineto profile of 32 eager batch-1 steps of the hybrid.
#   G  the same build (warm: incremental); `ctest -L GPU` (every GPU test); the hybrid's bench again (the floor now
#      counts the KV cache read); fla on the DeltaNet 1.3B prune (decode 1 and 64), time permitting.
# Results under $OUT: 00_summary.log (verdicts, tables), bench_*.json, peer_*.jsonl, failing logs.
# Run from the repository root: bash bench/h200_wave7.sh Q|G
set -uo pipefail
PHASE=${1:-Q}
TAG=w7
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="fused_ops_cuda decode_equivalence golden_models_cuda"

mutant() {  # the zero-centred offset dropped; Qwen's gated norm with fla's single rounding
  cp kernels/fused_layer_ops.cu "$LOGS/flo.orig"
  sed -i 's/o\[i\] = (xv\[i\] \* inv) \* (w_offset + wv\[i\]);/o[i] = (xv[i] * inv) * wv[i];/' kernels/fused_layer_ops.cu
  sed -i 's/o\[i\] = to_f<T>(from_f<T>((w_offset + wv\[i\]) \* to_f<T>(from_f<T>(xv\[i\] \* inv))));/o[i] = (w_offset + wv[i]) * (xv[i] * inv);/' kernels/fused_layer_ops.cu
  if [ "$(diff kernels/fused_layer_ops.cu "$LOGS/flo.orig" | grep -c '^<')" != 2 ]; then
    say "mutant: sed did not apply both edits"
  else
    cmake --build "$BUILD" -j"$(nproc)" --target fused_ops_cuda >"$LOGS/build_mut.log" 2>&1
    timeout 120 "$BUILD/tests/fused_ops_cuda" --gtest_filter='*zeroCentered*' >"$LOGS/mut1.log" 2>&1
    say "mutant offset dropped: exit $? — $(grep -c Failure "$LOGS/mut1.log") failures; $(grep -m1 -A2 Failure "$LOGS/mut1.log" | tr '\n' ' ' | cut -c1-250)"
    timeout 120 "$BUILD/tests/fused_ops_cuda" --gtest_filter='*qwenGated*' >"$LOGS/mut2.log" 2>&1
    say "mutant Qwen gate rounded once: exit $? — $(grep -c Failure "$LOGS/mut2.log") failures; $(grep -m1 -A3 Failure "$LOGS/mut2.log" | tr '\n' ' ' | cut -c1-300)"
  fi
  cp "$LOGS/flo.orig" kernels/fused_layer_ops.cu
  cmake --build "$BUILD" -j"$(nproc)" --target statecut fused_ops_cuda >>"$LOGS/build_mut.log" 2>&1
}

eager() {  # NAME: decode at 1 and 64 without graphs
  timeout 150 "$SC" bench --checkpoint "$WORK/$1" --compare "$WORK/${1}_p50" --device cuda --prefill "" \
    --decode 1,64 --prompt 512 --new-tokens 32 --no-graphs --json >"$OUT/bench_${1}_eager.json" 2>"$LOGS/eager.err" ||
    { keep "$LOGS/eager.err"; say "eager bench $1 FAILED"; return 0; }
  say "--- bench $1 eager (--no-graphs)"
  python3 bench/bench_table.py "$OUT/bench_${1}_eager.json" >>"$S" 2>&1
}

peer() {  # NAME: transformers on the same checkpoints (fla on PYTHONPATH when carried)
  [ -d .fla/fla ] && export PYTHONPATH=.fla
  timeout "${PEER_S:-200}" python3 bench/fla_model_decode.py "$WORK/$1" "$WORK/${1}_p50" --decode 1,64 \
    --prefill 8x2048 --prompt 512 --steps 32 >"$OUT/peer_$1.jsonl" 2>"$LOGS/peer_$1.err"
  say "--- transformers on $1 (exit $?): $(tr '\n' ' ' <"$OUT/peer_$1.jsonl" | cut -c1-1200)"
  tail -3 "$LOGS/peer_$1.err" >>"$S"
}

if [ "$PHASE" = Q ]; then
  configure_and_build $TESTS
  run_tests $TESTS
  mutant
  checkpoint q35 --family qwen3_5 && pruned q35 && bench q35 && eager q35
  timeout 120 "$BUILD/cli/statecut-profile-step" "$WORK/q35" "$LOGS/decode_q35_1.json" 1 16 32 >/dev/null 2>&1 &&
    { say "--- kernels of a q35 decode step at batch 1 (eager, Kineto, 32 steps)";
      python3 bench/profile_summary.py "$LOGS/decode_q35_1.json" 22 --within statecut_decode_step >>"$S" 2>&1; }
  peer q35
elif [ "$PHASE" = D ]; then
  configure_and_build $TESTS
  run_tests $TESTS
  for n in dn13 gdn13; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"
    # shellcheck disable=SC2086
    checkpoint $n $f && pruned $n && bench $n
  done
elif [ "$PHASE" = F ]; then
  configure_and_build $TESTS
  run_tests $TESTS
  for n in dn13 gdn13 q35; do
    f=""; [ $n = gdn13 ] && f="--family gated_deltanet"; [ $n = q35 ] && f="--family qwen3_5"
    # shellcheck disable=SC2086
    checkpoint $n $f && pruned $n && bench $n
  done
  timeout 60 "$BUILD/cli/statecut-profile-step" "$WORK/q35" "$LOGS/decode_q35_1.json" 1 16 32 >/dev/null 2>&1 &&
    { say "--- kernels of a q35 decode step at batch 1 (eager, Kineto, 32 steps)";
      python3 bench/profile_summary.py "$LOGS/decode_q35_1.json" 30 --within statecut_decode_step >>"$S" 2>&1; }
elif [ "$PHASE" = G ]; then
  configure_and_build $TESTS metamorphic_gated_delta_cuda equiv_gated_delta_cuda badinput_gated_delta_cuda \
    calibration_cuda train_cuda
  (cd "$BUILD" && timeout 400 ctest -L GPU --output-on-failure -j4 >"$LOGS/ctest_gpu.log" 2>&1) ||
    { rc=1; keep "$LOGS/ctest_gpu.log"; }
  say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log")"
  grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|SEGFAULT" "$LOGS/ctest_gpu.log" | head -20 >>"$S"
  checkpoint q35 --family qwen3_5 && pruned q35 && bench q35
  if [ -d .fla/fla ] && [ "$(elapsed)" -lt 380 ]; then
    pruned dn13 && PYTHONPATH=.fla timeout $(( 560 - $(elapsed) )) python3 bench/fla_model_decode.py "$WORK/dn13_p50" \
      --decode 1,64 --prefill "" --prompt 512 --steps 32 >"$OUT/peer_dn13_p50.jsonl" 2>"$LOGS/peer_dn13.err"
    say "--- fla on dn13_p50 (exit $?): $(tr '\n' ' ' <"$OUT/peer_dn13_p50.jsonl" | cut -c1-800)"
  fi
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
