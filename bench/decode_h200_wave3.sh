#!/usr/bin/env bash
# Issue 14, third wave, on one H200: the fused step kernels (kernels/fused_layer_ops.h) and value dims up to 1024,
# measured on both 1.3B shapes with the fla peer in the same machine session. Two phases (one device call each, the
# second reuses the first one's build and checkpoints while the machine is warm):
#   A  configure + build (Release, sm_90a, torch's CMake prefix); the GPU tests that cover this change
#      (fused_ops_cuda, equiv_gated_delta_cuda with the dv 388/512/1024 cases, decode_equivalence *cuda*,
#      golden_models_cuda); random fla delta_net 1.3B (statecut-random-checkpoint defaults) pruned to 50% and 75%
#      (rand: speed does not depend on which channels stay); `statecut bench` full vs 50% vs 75% (prefill 1x2048 and
#      8x2048, decode 1/16/64/256 after a 512-token prompt, 128 steps, CUDA graphs); the same decode with
#      STATECUT_FUSED=0 (the LibTorch building blocks) at batch 1/64/256: what the fused kernels buy.
#   B  the same for gated_deltanet 1.3B (--family gated_deltanet: 21 layers, 6 heads, dk 256, dv 512), then fla's own
#      models on the same checkpoints (bench/fla_model_decode.py, .fla carried: decode 1/64 eager with fla's cache,
#      prefill 8x2048).
# Results under $OUT: 00_summary.log (verdicts, tables), bench_*.json, fla_*.jsonl, failing logs.
# Phase all: A, then fine-tuning on CUDA (the shipped model, LoRA and --full, 2 steps each; the 1.3B 50% student with
# its teacher, 4 steps of 4 x 2048 random tokens: tokens/s), then B; fla gets what is left of DEADLINE (560 s).
# Phase P: build + tests, dn13 full vs 50% with the whole-sequence conv kernel, nsys kernel summary of a prefill.
# Phase F: DeltaNet and Gated DeltaNet 1.3B full vs 50%; Kineto kernel sums of a prefill and a decode.
# Run from the repository root: bash bench/decode_h200_wave3.sh A|B|all|P|F
set -uo pipefail
PHASE=${1:-A}
TAG=w3
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="fused_ops_cuda equiv_gated_delta_cuda decode_equivalence golden_models_cuda"

table() {  # bench JSON -> summary lines
  python3 bench/bench_table.py "$1" >>"$S" 2>&1
}

bench_family() {  # name, random-checkpoint args
  local n=$1; shift
  if [ ! -f "$WORK/$n/model.safetensors" ]; then
    "$BUILD/cli/statecut-random-checkpoint" --out "$WORK/$n" "$@" >>"$S" 2>&1 || { say "random $n FAILED"; return 1; }
  fi
  for r in 50 75; do
    [ -f "$WORK/${n}_p$r/model.safetensors" ] && continue
    timeout 300 "$SC" prune --checkpoint "$WORK/$n" --method rand --ratio 0.$r --device cuda --out "$WORK/${n}_p$r" \
      >"$LOGS/prune_${n}_$r.log" 2>&1 || { keep "$LOGS/prune_${n}_$r.log"; say "prune $n $r FAILED"; return 1; }
  done
  say "checkpoints $n: $(du -sh "$WORK/$n" "$WORK/${n}_p50" "$WORK/${n}_p75" | awk '{print $1}' | tr '\n' ' ')"
  timeout 400 "$SC" bench --checkpoint "$WORK/$n" --compare "$WORK/${n}_p50" "$WORK/${n}_p75" --device cuda \
    --prefill 1x2048,8x2048 --decode 1,16,64,256 --prompt 512 --new-tokens 128 --json \
    >"$OUT/bench_$n.json" 2>"$LOGS/bench_$n.err" || { keep "$LOGS/bench_$n.err"; say "bench $n FAILED"; return 1; }
  say "--- bench $n (fused, graphs) $(( $(date +%s) - t0 )) s"
  table "$OUT/bench_$n.json"
}

build_and_test() {
  TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DSTATECUT_BENCH=OFF -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$LOGS/configure.log" 2>&1 ||
    { keep "$LOGS/configure.log"; say "configure FAILED"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target statecut statecut-random-checkpoint $TESTS >"$LOGS/build.log" 2>&1 ||
    { keep "$LOGS/build.log"; say "build FAILED"; grep -E "error|FAILED" -A3 "$LOGS/build.log" | head -80 >>"$S"; exit 1; }
  say "build $(( $(date +%s) - t0 )) s"
  run_tests $TESTS
  return 0  # a failing test sets rc; the measurements still run
}

if [ "$PHASE" = A ] || [ "$PHASE" = all ]; then
  build_and_test || exit 1
  bench_family dn13 || rc=1
  STATECUT_FUSED=0 timeout 200 "$SC" bench --checkpoint "$WORK/dn13" --compare "$WORK/dn13_p50" --device cuda \
    --prefill 1x2048 --decode 1,64,256 --prompt 512 --new-tokens 64 --json >"$OUT/bench_dn13_unfused.json" \
    2>"$LOGS/bench_unfused.err" || { rc=1; keep "$LOGS/bench_unfused.err"; }
  say "--- bench dn13 with STATECUT_FUSED=0 (LibTorch building blocks)"
  table "$OUT/bench_dn13_unfused.json"
fi
if [ "$PHASE" = all ]; then
  # training on CUDA through the packed weight views: LoRA and --full, two steps on the shipped model
  for m in "" --full; do
    rm -rf /tmp/ft$m
    timeout 120 "$SC" finetune --checkpoint assets/byte_delta_net_4L --teacher assets/byte_delta_net_4L \
      --text assets/corpora/pydocs_train.txt --steps 2 --seq-len 256 --batch 2 --device cuda $m --out /tmp/ft$m --quiet \
      >"$LOGS/ft$m.log" 2>&1 || { rc=1; keep "$LOGS/ft$m.log"; }
    say "finetune --device cuda $m: $(tail -1 "$LOGS/ft$m.log" | cut -c1-200)"
  done
  # 1.3B recovery fine-tuning throughput (issue 13): LoRA + KD, 50% student, full teacher, random tokens
  python3 -c "import numpy as np; np.random.default_rng(0).integers(0, 32000, 4_000_000, dtype=np.uint16).tofile('$WORK/tok.bin')"
  rm -rf "$WORK/ft13"
  timeout 200 "$SC" finetune --checkpoint "$WORK/dn13_p50" --teacher "$WORK/dn13" --text "$WORK/tok.bin" --steps 4 \
    --seq-len 2048 --batch 4 --device cuda --out "$WORK/ft13" --json >"$OUT/finetune_dn13.json" 2>"$LOGS/ft13.err" ||
    { rc=1; keep "$LOGS/ft13.err"; }
  say "finetune 1.3B cuda: $(head -c 600 "$OUT/finetune_dn13.json")"
fi
if [ "$PHASE" = P ]; then  # prefill: the fused whole-sequence conv, full vs 50%, and a kernel profile when nsys exists
  build_and_test || exit 1
  "$BUILD/cli/statecut-random-checkpoint" --out "$WORK/dn13" >>"$S" 2>&1
  timeout 300 "$SC" prune --checkpoint "$WORK/dn13" --method rand --ratio 0.5 --device cuda --out "$WORK/dn13_p50" \
    >"$LOGS/prune_p.log" 2>&1 || { keep "$LOGS/prune_p.log"; say "prune FAILED"; }
  timeout 200 "$SC" bench --checkpoint "$WORK/dn13" --compare "$WORK/dn13_p50" --device cuda --prefill 1x2048,8x2048 \
    --decode 1,64,256 --prompt 512 --new-tokens 128 --json >"$OUT/bench_dn13_prefill.json" 2>"$LOGS/bench_p.err" ||
    { rc=1; keep "$LOGS/bench_p.err"; }
  say "--- bench dn13 (fused conv over tokens)"
  table "$OUT/bench_dn13_prefill.json"
  if command -v nsys >/dev/null; then
    timeout 150 nsys profile -o "$LOGS/prof" --force-overwrite true --stats=false "$SC" bench --checkpoint "$WORK/dn13" \
      --device cuda --prefill 8x2048 --decode 1 --new-tokens 8 --repeats 1 >"$LOGS/nsys.log" 2>&1
    nsys stats --report cuda_gpu_kern_sum --format csv "$LOGS/prof.nsys-rep" 2>/dev/null | head -40 >"$OUT/kernels.csv"
    say "--- nsys kernel summary (top 25 by time)"; head -27 "$OUT/kernels.csv" | cut -c1-220 >>"$S"
  else
    say "no nsys on this machine"
  fi
fi
if [ "$PHASE" = F ]; then  # final: both families full vs 50%; Kineto kernel profiles
  TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DSTATECUT_BENCH=OFF -DSTATECUT_PROFILE_TOOL=ON -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$LOGS/configure.log" 2>&1 ||
    { keep "$LOGS/configure.log"; say "configure FAILED"; exit 1; }
  TESTS="fused_ops_cuda decode_equivalence equiv_gated_delta_cuda"
  build_and_test || exit 1
  cmake --build "$BUILD" -j4 --target statecut-profile-step >"$LOGS/build_prof.log" 2>&1 &
  prof_pid=$!
  "$BUILD/cli/statecut-random-checkpoint" --out "$WORK/dn13" >/dev/null 2>&1
  "$BUILD/cli/statecut-random-checkpoint" --out "$WORK/gdn13" --family gated_deltanet >/dev/null 2>&1
  for n in dn13 gdn13; do
    timeout 120 "$SC" prune --checkpoint "$WORK/$n" --method rand --ratio 0.5 --device cuda --out "$WORK/${n}_p50" \
      >"$LOGS/prune_$n.log" 2>&1 || { keep "$LOGS/prune_$n.log"; say "prune $n FAILED"; }
    timeout 150 "$SC" bench --checkpoint "$WORK/$n" --compare "$WORK/${n}_p50" --device cuda --prefill 8x2048 \
      --decode 1,64,256 --prompt 512 --new-tokens 128 --json >"$OUT/bench_${n}_final.json" 2>"$LOGS/bench_$n.err" ||
      { rc=1; keep "$LOGS/bench_$n.err"; }
    say "--- bench $n (final) $(( $(date +%s) - t0 )) s"
    table "$OUT/bench_${n}_final.json"
  done
  wait $prof_pid
  if [ -x "$BUILD/cli/statecut-profile-step" ]; then
    timeout 60 "$BUILD/cli/statecut-profile-step" "$WORK/dn13" "$LOGS/prefill.json" 8 2048 0 >>"$S" 2>&1
    timeout 60 "$BUILD/cli/statecut-profile-step" "$WORK/dn13" "$LOGS/decode.json" 1 16 32 >>"$S" 2>&1
    for f in prefill decode; do
      say "--- kernels of dn13 $f (eager, Kineto)"
      python3 bench/profile_summary.py "$LOGS/$f.json" 22 >>"$S" 2>&1
    done
  else
    say "profile tool did not build"; grep -E "error" "$LOGS/build_prof.log" | head -10 >>"$S"
  fi
fi
if [ "$PHASE" = B ] || [ "$PHASE" = all ]; then
  [ "$PHASE" = B ] && { build_and_test || exit 1; }
  bench_family gdn13 --family gated_deltanet || rc=1
  if [ -d .fla/fla ]; then
    left=$(( ${DEADLINE:-560} - ($(date +%s) - t0) ))
    PYTHONPATH=.fla timeout $left python3 bench/fla_model_decode.py "$WORK/dn13" "$WORK/dn13_p50" "$WORK/gdn13" "$WORK/gdn13_p50" \
      --decode 1,64 --prefill 8x2048 --train ${FLA_TRAIN:-4x2048} --prompt 512 --steps 32 >"$OUT/fla_models.jsonl" 2>"$LOGS/fla.err" ||
      { rc=1; tail -5 "$LOGS/fla.err" | cut -c1-300 >>"$S"; }
    say "--- fla's models (eager, fla cache) $(( $(date +%s) - t0 )) s"
    cat "$OUT/fla_models.jsonl" >>"$S"
  else
    say "fla peers skipped: no .fla/fla (carry it)"
  fi
fi
say "phase $PHASE rc=$rc, $(( $(date +%s) - t0 )) s"
exit $rc
