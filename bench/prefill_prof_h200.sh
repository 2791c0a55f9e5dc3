#!/usr/bin/env bash
# Prefill engineer, session 4, call 2: source-level ncu profile of the state kernel at 1x8192 (dk 64 and 128):
# per-instruction stall samples (SASS) and the warp stall breakdown.
set -uo pipefail
OUT=${OUT:-/tmp/pf-out}; mkdir -p "$OUT"; B=build-gpu-prefill; S="$OUT/00_summary.txt"
say() { echo "$*" | tee -a "$S"; }
say "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(date -u +%FT%TZ) $(git log -1 --format=%h 2>/dev/null)"
TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
t0=$(date +%s)
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH="$TP" >/tmp/cfg.log 2>&1 || { tail -30 /tmp/cfg.log; exit 1; }
cmake --build $B -j16 --target bench_cuda_gated_delta >/tmp/build.log 2>&1 || { grep -E "error" -A3 /tmp/build.log | head -40; exit 1; }
say "build $(( $(date +%s) - t0 )) s"
for dk in 64 128; do
  timeout 60 ncu --clock-control none --section SourceCounters --section WarpStateStats --section InstructionStats \
    --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,smsp__inst_executed.sum,smsp__cycles_active.avg \
    -k regex:state_kernel -c 1 -f -o /tmp/p$dk $B/bench/bench_cuda_gated_delta --benchmark_filter="prefill/B:1/T:8192/dk:$dk/" >/tmp/ncu$dk.log 2>&1
  say "ncu dk $dk rc=$?"
  ncu -i /tmp/p$dk.ncu-rep --page details --print-details all > "$OUT/details_dk$dk.txt" 2>&1
  ncu -i /tmp/p$dk.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > "$OUT/source_dk$dk.csv.gz"
  grep -E "stalled_.*ratio|inst_executed.sum|cycles_active.avg|Duration" "$OUT/details_dk$dk.txt" | awk '$NF+0 > 0.05 || /inst|cycles|Duration/' | cut -c1-110 | tee -a "$S"
done
say "total $(( $(date +%s) - t0 )) s"
