#!/usr/bin/env bash
# Issue 14, seventh wave, last call: the hybrid's decode at batch 64 and 256 with the KV buffers reserved exactly
# (reserve_kv without the doubling), the rest as phase F of h200_wave7.sh. Minimal build (the CLI and the random
# checkpoint tool only) to fit the session's last device minutes.
set -uo pipefail
TAG=w7k PHASE=K
# shellcheck source=bench/device_env.sh
source "$(dirname "$0")/device_env.sh"
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DSTATECUT_BENCH=OFF -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" >"$LOGS/configure.log" 2>&1 || { say "configure FAILED"; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" --target statecut statecut-random-checkpoint >"$LOGS/build.log" 2>&1 ||
  { say "build FAILED"; exit 1; }
say "build $(elapsed) s"
checkpoint q35 --family qwen3_5 && pruned q35 &&
  timeout 120 "$SC" bench --checkpoint "$WORK/q35" --compare "$WORK/q35_p50" --device cuda --prefill "" \
    --decode 64,256 --prompt 512 --new-tokens 128 --json >"$OUT/bench_q35_kv.json" 2>"$LOGS/bench.err" &&
  python3 bench/bench_table.py "$OUT/bench_q35_kv.json" >>"$S" 2>&1
say "done at $(elapsed) s"
