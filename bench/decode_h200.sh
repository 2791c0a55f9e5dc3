#!/usr/bin/env bash
# Issue 14 in one device call (H200): incremental decoding on CUDA and the whole-model decode benchmark.
#   1. configure + build a Release CUDA build as ci/device.sh does (torch's CMake prefix, sm_90a): statecut, its
#      helpers and the decode tests;
#   2. Equiv_Decode on CUDA (tests/torch/decode_equivalence.cpp, *_cuda cases: bf16 through the project's chunk
#      kernel for the prefill and its decode kernel for the steps, fp32 through LibTorch with TF32 off);
#   3. `statecut generate --device cuda` on the shipped byte model (greedy, bf16): the text and its tokens/s;
#   4. random-weight fla DeltaNet checkpoints at fla-hub/delta_net-1.3B-100B's shapes (tools/random_checkpoint
#      defaults: hidden 2048, 16 heads, dk = dv = 128, 24 layers, vocab 32000, bf16) pruned to 50% (rand: speed does
#      not depend on which channels stay), then `statecut bench --device cuda` full vs 50%: prefill 1x2048 and 8x2048,
#      decode at batch 1, 16, 64, 256 after a 512-token prompt, 128 steps, CUDA graphs on — and once more eager
#      (--no-graphs) at batch 1 and 64 to show the host overhead the graphs remove.
# The build folder and the checkpoints are reused when a previous call left them (a second call after a timeout resumes).
# Run from the repository root on the GPU machine: bash bench/decode_h200.sh
# Results under $OUT (default /tmp/statecut-decode), at most 8 files: 00_summary.log first (every step's verdict,
# the error lines of the CUDA decode tests, both bench tables), bench_dn13.json, bench_dn13_eager.json, and the full
# log of a step that failed. Env: BUILD (default build-gpu-device), WORK (checkpoints, default /tmp/statecut-decode-work).
set -uo pipefail
OUT=${OUT:-/tmp/statecut-decode}
BUILD=${BUILD:-build-gpu-device}
WORK=${WORK:-/tmp/statecut-decode-work}
LOGS=${LOGS:-/tmp/statecut-decode-logs}
mkdir -p "$OUT" "$WORK" "$LOGS"
S="$OUT/00_summary.log"
say() { echo "$*" | tee -a "$S"; }
keep() { cp "$1" "$OUT/" 2>/dev/null; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  git log -1 --format='commit %H %cd' 2>/dev/null
  date -u
} | tee -a "$S"
rc=0
t0=$(date +%s)
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$LOGS/configure.log" 2>&1 ||
  { keep "$LOGS/configure.log"; say "configure FAILED"; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" --target statecut decode_equivalence >"$LOGS/build.log" 2>&1 ||
  { keep "$LOGS/build.log"; say "build FAILED"; grep -E "error|FAILED" -A3 "$LOGS/build.log" | head -60 >>"$S"; exit 1; }
say "build $(( $(date +%s) - t0 )) s"
SC="$BUILD/cli/statecut"

# 2. Equivalence on CUDA (the CPU cases run in CI).
timeout 400 "$BUILD/tests/decode_equivalence" --gtest_filter='*cuda*' >"$LOGS/equiv_decode_cuda.log" 2>&1 || { rc=1; keep "$LOGS/equiv_decode_cuda.log"; }
say "Equiv_Decode CUDA: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$LOGS/equiv_decode_cuda.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]" "$LOGS/equiv_decode_cuda.log" | head -20 >>"$S"
grep -ohE "\[errors\].*" "$LOGS/equiv_decode_cuda.log" | cut -c1-200 >>"$S"

# 3. generate on CUDA.
timeout 120 "$SC" generate --checkpoint assets/byte_delta_net_4L --device cuda --dtype bf16 --max-new-tokens 200 \
  --prompt 'def read_config(path):' >"$LOGS/generate.out" 2>"$LOGS/generate.err" || rc=1
say "generate --device cuda: $(tail -1 "$LOGS/generate.err")"
head -c 400 "$LOGS/generate.out" >>"$S"; echo >>"$S"

# 4. 1.3B shapes, full vs 50%.
if [ ! -f "$WORK/dn13/model.safetensors" ]; then
  "$BUILD/cli/statecut-random-checkpoint" --out "$WORK/dn13" >>"$S" 2>&1 || { say "random checkpoint FAILED"; exit 1; }
fi
if [ ! -f "$WORK/dn13_p50/model.safetensors" ]; then
  timeout 300 "$SC" prune --checkpoint "$WORK/dn13" --method rand --ratio 0.5 --device cuda --out "$WORK/dn13_p50" --json \
    >"$LOGS/prune.log" 2>&1 || { rc=1; keep "$LOGS/prune.log"; say "prune FAILED"; }
fi
say "checkpoints: $(du -sh "$WORK/dn13" "$WORK/dn13_p50" 2>/dev/null | tr '\n' ' ')"
timeout 500 "$SC" bench --checkpoint "$WORK/dn13" --compare "$WORK/dn13_p50" --device cuda \
  --prefill 1x2048,8x2048 --decode 1,16,64,256 --prompt 512 --new-tokens 128 --json \
  >"$OUT/bench_dn13.json" 2>"$LOGS/bench.err" || { rc=1; keep "$LOGS/bench.err"; }
say "bench (graphs): rc=$(test -s "$OUT/bench_dn13.json" && echo ok || echo FAILED)"
python3 bench/bench_table.py "$OUT/bench_dn13.json" >>"$S" 2>&1
timeout 300 "$SC" bench --checkpoint "$WORK/dn13" --compare "$WORK/dn13_p50" --device cuda --prefill 1x16 \
  --decode 1,64 --prompt 512 --new-tokens 32 --no-graphs --json >"$OUT/bench_dn13_eager.json" 2>>"$LOGS/bench.err" || rc=1
python3 -c "
import json,sys
j=json.load(open('$OUT/bench_dn13_eager.json'))
for m in j['models']: print('eager', m['checkpoint'], ' '.join(f'B={f[\"batch\"]}:{f.get(\"ms_per_step\",-1):.3f}ms' for f in m['decode']))
" >>"$S" 2>&1
python3 bench/compare.py bench/baselines/h200.json "$OUT/bench_dn13.json" >>"$S" 2>&1 || rc=1  # regression gate
say "decode_h200.sh rc=$rc, $(( $(date +%s) - t0 )) s"
exit $rc
