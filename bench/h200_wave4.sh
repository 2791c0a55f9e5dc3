#!/usr/bin/env bash
# Issue 14 (fourth wave) and issue 12 on one H200: the register-window conv over tokens and the row-wise silu·mul
# (kernels/fused_layer_ops.cu), measured on both 1.3B shapes, and the time of `verify --device cuda` on the 1.3B shape.
#   K  configure + build (Release, sm_90a, the profile tool); fused_ops_cuda, decode_equivalence (CUDA cases),
#      golden_models_cuda; random fla DeltaNet 1.3B and Gated DeltaNet 1.3B, each pruned to 50% (rand: speed does not
#      depend on which channels stay), `statecut bench` full vs 50% (prefill 1x2048 and 8x2048, decode 1/64/256 after
#      a 512-token prompt, 128 steps, CUDA graphs); a Kineto kernel sum of the DeltaNet prefill; then a deliberate bug
#      in the conv kernel (the window does not slide) must fail fused_ops_cuda.
#   V  (same warm machine) `verify --device cuda` of the DeltaNet 1.3B with the default windows, timed by stage; fla's
#      own model prefill 8x2048 on the same checkpoint (.fla carried), for the same-run prefill ratio.
# Results under $OUT: 00_summary.log (verdicts, tables), bench_*.json, fla_prefill.jsonl, failing logs.
#   W  `verify --device cuda` of the DeltaNet 1.3B again (heads on every thread, the f64 model on the GPU), timed;
#      the Gated DeltaNet bench with the new norms.
#   X  every GPU test (ctest -L GPU), then the verify of W again (its bf16 model-level limit now scales with the
#      model's own bf16-vs-f64 distance).
# Run from the repository root: bash bench/h200_wave4.sh K|V|W|X
set -uo pipefail
PHASE=${1:-K}
TAG=w4
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TESTS="fused_ops_cuda decode_equivalence golden_models_cuda"

checkpoints() {  # name, random-checkpoint args
  local n=$1; shift
  [ -f "$WORK/$n/model.safetensors" ] || "$BUILD/cli/statecut-random-checkpoint" --out "$WORK/$n" "$@" >/dev/null 2>&1 ||
    { say "random $n FAILED"; return 1; }
  [ -f "$WORK/${n}_p50/model.safetensors" ] && return 0
  timeout 200 "$SC" prune --checkpoint "$WORK/$n" --method rand --ratio 0.5 --device cuda --out "$WORK/${n}_p50" \
    >"$LOGS/prune_$n.log" 2>&1 || { keep "$LOGS/prune_$n.log"; say "prune $n FAILED"; return 1; }
}

mutant() {  # a deliberate bug in the conv kernel (the window does not slide) must fail fused_ops_cuda
  cp kernels/fused_layer_ops.cu "$LOGS/fused_layer_ops.cu.orig"
  sed -i 's/win\[j\]\[v\] = win\[j + 1\]\[v\];/win[j][v] = win[j][v];/' kernels/fused_layer_ops.cu
  if cmp -s kernels/fused_layer_ops.cu "$LOGS/fused_layer_ops.cu.orig"; then
    say "mutant: sed did not apply"
  else
    cmake --build "$BUILD" -j"$(nproc)" --target fused_ops_cuda >"$LOGS/build_mut.log" 2>&1
    timeout 120 "$BUILD/tests/fused_ops_cuda" --gtest_filter='*conv1dOverTokens*' >"$LOGS/mut.log" 2>&1
    say "mutant (window not sliding): exit $? — $(grep -cE 'Failure' "$LOGS/mut.log") failures; first: $(grep -m1 -A3 Failure "$LOGS/mut.log" | tr '\n' ' ' | cut -c1-300)"
  fi
  cp "$LOGS/fused_layer_ops.cu.orig" kernels/fused_layer_ops.cu
  cmake --build "$BUILD" -j"$(nproc)" --target fused_ops_cuda statecut >>"$LOGS/build_mut.log" 2>&1
}

configure() {
  TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DSTATECUT_BENCH=OFF -DSTATECUT_PROFILE_TOOL=ON -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$LOGS/configure.log" 2>&1 ||
    { keep "$LOGS/configure.log"; say "configure FAILED"; exit 1; }
}

if [ "$PHASE" = K ]; then
  say "cpus $(nproc); torch threads $(python3 -c 'import torch;print(torch.get_num_threads())'); $(env | grep -E '^(OMP|MKL|OPENBLAS)_' | tr '\n' ' ')"
  configure
  cmake --build "$BUILD" -j"$(nproc)" --target statecut statecut-random-checkpoint statecut-profile-step $TESTS \
    >"$LOGS/build.log" 2>&1 ||
    { keep "$LOGS/build.log"; say "build FAILED"; grep -E "error|FAILED" -A3 "$LOGS/build.log" | head -80 >>"$S"; exit 1; }
  say "build $(elapsed) s"
  run_tests $TESTS
  checkpoints dn13 && bench dn13
  timeout 90 "$BUILD/cli/statecut-profile-step" "$WORK/dn13" "$LOGS/prefill.json" 8 2048 0 >>"$S" 2>&1
  say "--- kernels of the dn13 prefill 8x2048 (eager, Kineto)"
  python3 bench/profile_summary.py "$LOGS/prefill.json" 16 >>"$S" 2>&1
  checkpoints gdn13 --family gated_deltanet && bench gdn13
  mutant
  # verify's theorems stage: per-layer progress with timestamps for ~60 s (where the 22 s per layer goes)
  timeout 75 "$SC" verify --checkpoint "$WORK/dn13" --device cuda --only theorems 2>&1 >/dev/null |
    awk '{ print strftime("%T"), $0; fflush() }' | head -14 >>"$S"
fi

if [ "$PHASE" = V ]; then
  configure
  cmake --build "$BUILD" -j"$(nproc)" --target statecut statecut-random-checkpoint fused_ops_cuda decode_equivalence \
    >"$LOGS/build.log" 2>&1 || { keep "$LOGS/build.log"; say "build FAILED"; grep -E "error" -A3 "$LOGS/build.log" | head -40 >>"$S"; exit 1; }
  say "build $(elapsed) s"
  run_tests fused_ops_cuda decode_equivalence
  mutant
  checkpoints dn13 && bench dn13
  say "--- verify --device cuda dn13 (default windows) at $(elapsed) s"
  timeout 170 "$SC" verify --checkpoint "$WORK/dn13" --device cuda --json >"$OUT/verify_dn13.json" \
    2> >(awk '{ print strftime("%T"), $0; fflush() }' >"$LOGS/verify.err")
  say "verify exit $? at $(elapsed) s"
  sleep 1; grep -vE 'theorems: layer [0-9]+$' "$LOGS/verify.err" | head -70 >>"$S"
  python3 -c "import json; r=json.load(open('$OUT/verify_dn13.json')); [print(c['name'], c['status'], c.get('figure'), c.get('where','')) for c in r['checks']]" >>"$S" 2>&1
  if [ -d .fla/fla ]; then
    PYTHONPATH=.fla timeout $(( 585 - $(elapsed) )) python3 bench/fla_model_decode.py "$WORK/dn13" --decode "" --prefill 8x2048 \
      >"$OUT/fla_prefill.jsonl" 2>"$LOGS/fla.err" || { tail -3 "$LOGS/fla.err" | cut -c1-300 >>"$S"; }
    say "--- fla's DeltaNet prefill at $(elapsed) s"; cat "$OUT/fla_prefill.jsonl" >>"$S"
  fi
fi
if [ "$PHASE" = W ] || [ "$PHASE" = X ]; then  # after the parallel_for_each fix and the f64 model on the GPU
  configure
  extra=""; [ "$PHASE" = X ] && extra=$(for f in tests/gpu/*.cpp; do basename "$f" .cpp; done | tr '\n' ' ')
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j"$(nproc)" --target statecut statecut-random-checkpoint $extra >"$LOGS/build.log" 2>&1 ||
    { keep "$LOGS/build.log"; say "build FAILED"; grep -E "error" -A3 "$LOGS/build.log" | head -40 >>"$S"; exit 1; }
  say "build $(elapsed) s"
  if [ "$PHASE" = X ]; then  # every GPU test after this wave's kernel changes
    (cd "$BUILD" && timeout 240 ctest -L GPU -j4 --timeout 200) >"$LOGS/ctest_gpu.log" 2>&1 || { rc=1; keep "$LOGS/ctest_gpu.log"; }
    say "ctest -L GPU: $(grep -E 'tests passed|tests failed' "$LOGS/ctest_gpu.log" | tail -1) at $(elapsed) s"
    grep -E "Failed|Not Run|Timeout" "$LOGS/ctest_gpu.log" | head -20 >>"$S"
  fi
  "$BUILD/cli/statecut-random-checkpoint" --out "$WORK/dn13" >/dev/null 2>&1
  say "--- verify --device cuda dn13 (default windows) at $(elapsed) s"
  timeout 240 "$SC" verify --checkpoint "$WORK/dn13" --device cuda \
    --json >"$OUT/verify_dn13.json" 2> >(awk '{ print strftime("%T"), $0; fflush() }' >"$LOGS/verify.err")
  say "verify exit $? at $(elapsed) s"
  sleep 1; grep -vE 'theorems: layer [0-9]+$|reference: layer' "$LOGS/verify.err" | head -60 >>"$S"
  python3 -c "import json; r=json.load(open('$OUT/verify_dn13.json')); [print(c['name'], c['status'], c.get('figure'), c.get('where','')) for c in r['checks']]" >>"$S" 2>&1
  [ "$PHASE" = W ] && checkpoints gdn13 --family gated_deltanet && bench gdn13
fi
say "phase $PHASE rc=$rc, $(elapsed) s"
exit $rc
