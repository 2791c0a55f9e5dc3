#!/usr/bin/env bash
# The GPU gate after the 29th session's CPU work, and what the skinny GEMM's epilogue still holds (2026-12-05, 45th
# wave):
#   A  SKIP_SANITIZER=1 ci/device.sh (every GPU test and the CLI's CUDA cases on this tree, the pushed epilogue's
#      bit test among them; its summary under $OUT/gate) while the harness variants build beside it; the skinny GEMM's
#      and the models' CUDA tests again with STATECUT_SKINNY_PUSH=1 (the pushed epilogue in every batched step); the
#      harness (SKINNY_QUICK=1 bench/skinny_gemm_step.cu) pulled / pushed / pulled / pushed; `statecut bench` of
#      DeltaNet 1.3B against its 50% prune at 8 and 64, pulled / pushed twice, interleaved; then while the call has
#      time the 44th wave's F: the harness from kernels/skinny_gemm.cu edited: nostore (the bf16 stores of y
#      skipped), nobar (the first cluster barrier skipped: wrong sums at cluster > 1, timing only), noload (the
#      partials not read: zeros stored), noepi (no epilogue at all). Only the edited ones' timings mean anything.
#   B  SKIP_TESTS=1 BENCH=1 ci/device.sh (the kernels' benchmark, the model benchmark of DeltaNet 1.3B and its 50%
#      prune, and the regression gate over both; its summary under $OUT/bench), then `statecut bench` of Gated
#      DeltaNet 1.3B against its 50% prune at 1, 8, 64, 256 while the call has time.
#   C  A in less time (for a session whose device time ran short): instead of the whole gate, the GPU tests of the
#      kernels and paths the last sessions touched (skinny GEMM, the models' decode and golden logits, the CLI's CUDA
#      logits), pulled and pushed; then A's harness and bench rounds (no F).
#   D  the least: the harness alone (one nvcc, its checks against f64 at every cluster size), pulled / pushed twice;
#      then the skinny GEMM's test target (the bit test), then C's bench round while the call has time.
# Run: bash bench/h200_wave45.sh A|B|C|D
set -uo pipefail
PHASE=${1:-A}
TAG=w45
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
noepi='s|__syncthreads();  // every stage read and every copy landed: the stages become the partial tile|__syncthreads(); return;|'
f_variants() {
  skinny_variant base &
  skinny_variant nostore 's|\*reinterpret_cast<uint2\*>(out) = packed;|if (packed.x == 0x7fc17fc1u) *reinterpret_cast<uint2*>(out) = packed;|' &
  skinny_variant nobar 's|    cluster_sync();  // every partial tile of the cluster written|    __syncthreads();  // every partial tile of the cluster written|' &
  skinny_variant noload 's|float4 acc = reduced(m \* ld + 4 \* q);|float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);|' &
  skinny_variant noepi "$noepi" &
  wait
}
run_variants() {  # deadline (s since start), names... (push: the base harness with STATECUT_SKINNY_PUSH=1)
  local deadline=$1 v h e
  shift
  for v in "$@"; do
    h=$v e=0
    [ "$v" = push ] && h=base e=1
    [ -x "$LOGS/v_$h/harness" ] || { say "--- $v: no harness"; continue; }
    [ "$(elapsed)" -lt "$deadline" ] || { say "variants stopped before $v at $(elapsed) s"; break; }
    STATECUT_SKINNY_PUSH=$e SKINNY_QUICK=1 timeout 100 "$LOGS/v_$h/harness" >"$OUT/harness_$v.log" 2>&1
    say "--- $v (rc $?) at $(elapsed) s"
    grep -E "^shape|rows|copy bandwidth|checks:" "$OUT/harness_$v.log" >>"$S"
  done
}
if [ "$PHASE" = A ]; then
  (f_variants; echo "variants built at $(elapsed) s" >"$LOGS/variants.log") &
  vb=$!
  SKIP_SANITIZER=1 OUT="$OUT/gate" LOGS="$LOGS/gate" bash ci/device.sh
  r=$?
  [ $r -ne 0 ] && rc=1
  say "gate: rc $r at $(elapsed) s"
  cat "$OUT/gate/00_summary.log" >>"$S"
  BUILD=build-gpu-device
  say "--- with STATECUT_SKINNY_PUSH=1:"
  STATECUT_SKINNY_PUSH=1 run_tests skinny_gemm_cuda decode_equivalence golden_models_cuda
  wait $vb
  say "$(cat "$LOGS/variants.log")"
  run_variants 400 base push base push
  if [ "$(elapsed)" -lt 430 ] && checkpoint dn13 && pruned dn13; then
    for i in 1 2; do
      STATECUT_SKINNY_PUSH=0 bench_decode dn13 pulled$i 8,64
      STATECUT_SKINNY_PUSH=1 bench_decode dn13 pushed$i 8,64
      [ "$(elapsed)" -lt 500 ] || break
    done
  fi
  run_variants 560 nostore nobar noload noepi
fi
if [ "$PHASE" = C ]; then  # most telling first: the call may be cut short by the session's device time
  (skinny_variant base; echo "harness built at $(elapsed) s" >"$LOGS/variants.log") &
  vb=$!
  configure_and_build skinny_gemm_cuda decode_equivalence golden_models_cuda logits_cmd
  run_tests skinny_gemm_cuda
  wait $vb
  say "$(cat "$LOGS/variants.log")"
  run_variants 300 base push
  both=0
  if [ "$(elapsed)" -lt 330 ] && checkpoint dn13 && pruned dn13; then
    both=1
    STATECUT_SKINNY_PUSH=0 bench_decode dn13 pulled1 8,64
    STATECUT_SKINNY_PUSH=1 bench_decode dn13 pushed1 8,64
  fi
  say "--- with STATECUT_SKINNY_PUSH=1:"
  STATECUT_SKINNY_PUSH=1 run_tests decode_equivalence golden_models_cuda
  say "--- as it is:"
  run_tests decode_equivalence golden_models_cuda
  "$BUILD/tests/logits_cmd" --gtest_filter='*cuda*:*Cuda*' >"$LOGS/logits_cuda.log" 2>&1 || { rc=1; keep "$LOGS/logits_cuda.log"; }
  say "logits_cmd (CUDA): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$LOGS/logits_cuda.log" | tr '\n' ' ')"
  run_variants 480 base push
  if [ "$both" = 1 ] && [ "$(elapsed)" -lt 490 ]; then
    STATECUT_SKINNY_PUSH=0 bench_decode dn13 pulled2 8,64
    STATECUT_SKINNY_PUSH=1 bench_decode dn13 pushed2 8,64
  fi
fi
if [ "$PHASE" = D ]; then
  skinny_variant base
  say "harness built at $(elapsed) s"
  run_variants 200 base push base push
  configure_and_build skinny_gemm_cuda
  run_tests skinny_gemm_cuda
  if checkpoint dn13 && pruned dn13; then
    STATECUT_SKINNY_PUSH=0 bench_decode dn13 pulled1 8,64
    STATECUT_SKINNY_PUSH=1 bench_decode dn13 pushed1 8,64
  fi
fi
if [ "$PHASE" = B ]; then
  bench_gate
  if [ "$(elapsed)" -lt 470 ]; then
    checkpoint gdn13 --family gated_deltanet && pruned gdn13 && bench_decode gdn13 now 1,8,64,256
  fi
fi
say "phase $PHASE done at $(elapsed) s, rc $rc"
exit $rc
