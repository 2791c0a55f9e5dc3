#!/usr/bin/env bash
# Issue 13 on one H200: how fast `statecut finetune --device cuda` trains a 1.3B model, against fla's own training step.
#   T  configure + build (Release, sm_90a, the profile tool, the GPU tests); tests/gpu/train_cuda; a random fla
#      DeltaNet 1.3B and its 50% rand prune; finetune of the prune from the full model (the recipe: LoRA + KD, 4 x 2048
#      tokens a step) in bf16 mixed precision and in f32; `--full --no-kd` in bf16 on the full model (the work of fla's
#      training step); fla's own training step on the same checkpoint (.fla carried); a Kineto profile of the bf16
#      LoRA + KD step; the same finetune for Gated DeltaNet 1.3B; every GPU test (ctest -L GPU) last. The CPU training
#      tests (train_lora, train_finetune, train_gradcheck, equiv_recurrence) run there too, and their measured
#      bf16-vs-f32 figures go into the summary. FULL=0 (a short call): only the bf16 LoRA + KD rates, the profile and
#      the tests; FULL=1 adds the f32 and --full runs, fla's training step and ctest -L GPU.
# Results under $OUT: 00_summary.log (verdicts, rates, kernel sums), ft_*.json, fla_train.jsonl, failing logs.
# Run from the repository root: bash bench/h200_wave6.sh T
set -uo pipefail
PHASE=${1:-T}
TAG=w6
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
GPU_TESTS="train_cuda fused_ops_cuda decode_equivalence golden_models_cuda metamorphic_gated_delta_cuda \
equiv_gated_delta_cuda badinput_gated_delta_cuda calibration_cuda"

# steady tokens/s of a finetune from its loss.csv (steps 2..N: the first step carries loading and first-call costs)
if [ "$PHASE" = T ]; then
  # shellcheck disable=SC2086
  configure_and_build $GPU_TESTS train_lora train_finetune train_gradcheck equiv_recurrence
  run_tests train_cuda train_lora train_finetune train_gradcheck equiv_recurrence
  grep -h "worst\|moved-weight" "$LOGS"/train_*.log >>"$S"
  random_tokens
  checkpoint dn13 && pruned dn13 && {
    ft dn_lora_bf16 dn13_p50 dn13 --steps 8 --precision bf16
    [ "${FULL:-0}" = 1 ] && ft dn_lora_f32 dn13_p50 dn13 --steps 3 --precision f32
    [ "${FULL:-0}" = 1 ] && ft dn_full_bf16 dn13 "" --steps 6 --full --precision bf16
    if [ "${FULL:-0}" = 1 ] && [ -d .fla/fla ]; then  # Triton compiles fla's backward kernels first: minutes
      PYTHONPATH=.fla timeout 300 python3 bench/fla_model_decode.py "$WORK/dn13" --decode "" --prefill "" --train 4x2048 \
        >"$OUT/fla_train.jsonl" 2>"$LOGS/fla.err" || { tail -3 "$LOGS/fla.err" | cut -c1-300 >>"$S"; }
      say "--- fla's DeltaNet training step (forward + backward, bf16, every parameter) at $(elapsed) s"
      cat "$OUT/fla_train.jsonl" >>"$S"
    fi
    timeout 120 "$BUILD/cli/statecut-profile-step" --train "$WORK/dn13_p50" "$WORK/dn13" "$WORK/tok.bin" \
      "$LOGS/train.json" 4 2048 2 bf16 >"$LOGS/profile.log" 2>&1 || { keep "$LOGS/profile.log"; say "profile FAILED"; }
    say "--- kernels of a bf16 LoRA + KD finetune step (DeltaNet 1.3B 50% from the full model, 4 x 2048)"
    python3 bench/profile_summary.py "$LOGS/train.json" 30 --within statecut_train_step >>"$S" 2>&1
  }
  if [ "$(elapsed)" -lt 380 ]; then
    checkpoint gdn13 --family gated_deltanet && pruned gdn13 && ft gdn_lora_bf16 gdn13_p50 gdn13 --steps 6 --precision bf16
  fi
  if [ "${FULL:-0}" = 1 ]; then
    (cd "$BUILD" && timeout $(( 580 - $(elapsed) )) ctest -L GPU --output-on-failure -j4 >"$LOGS/ctest_gpu.log" 2>&1) ||
      { rc=1; keep "$LOGS/ctest_gpu.log"; }
    say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log")"
    grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|SEGFAULT" "$LOGS/ctest_gpu.log" | head -20 >>"$S"
  fi
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
