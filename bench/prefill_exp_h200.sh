#!/usr/bin/env bash
# Prefill engineer, session 4: build, 1x8192 and the big shapes at dk 128 / 64, the equivalence tests, and the state
# kernel's instruction count and stall breakdown at 1x8192 (ncu).
set -uo pipefail
OUT=${OUT:-/tmp/pf-out}; mkdir -p "$OUT"; B=build-gpu-prefill; S="$OUT/00_summary.txt"
say() { echo "$*" | tee -a "$S"; }
say "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(date -u +%FT%TZ)"
TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
t0=$(date +%s)
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH="$TP" >/tmp/cfg.log 2>&1 || { tail -30 /tmp/cfg.log; exit 1; }
cmake --build $B -j16 --target bench_cuda_gated_delta equiv_gated_delta_cuda >/tmp/build.log 2>&1 || { grep -E "error" -A3 /tmp/build.log | head -40; exit 1; }
say "build $(( $(date +%s) - t0 )) s"
timeout 90 $B/bench/bench_cuda_gated_delta --benchmark_filter='prefill/B:(1|8|32)/T:(8192|2048)/dk:(128|64)/' >/tmp/b.log 2>&1
say "bench rc=$?"; grep -E "^prefill" /tmp/b.log | sed 's/iterations:[0-9]*\/manual_time//' | cut -c1-170 | tee -a "$S"
timeout 100 $B/tests/equiv_gated_delta_cuda >/tmp/eq.log 2>&1
say "equiv rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/eq.log | tr '\n' ' ')"
grep -E "FAILED  \]|Failure" /tmp/eq.log | head -8 | tee -a "$S"
grep -h "^\[errors\]" /tmp/eq.log | cut -c1-230 > "$OUT/errors.txt"
for dk in 64 128; do
  timeout 40 ncu --clock-control none --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,smsp__inst_executed.sum,smsp__cycles_active.avg,gpu__time_duration.sum \
    -k regex:'state_kernel|prep_kernel' -c 2 $B/bench/bench_cuda_gated_delta --benchmark_filter="prefill/B:1/T:8192/dk:$dk/" >/tmp/ncu$dk.txt 2>&1
  say "ncu dk $dk rc=$?"; grep -E "_kernel|inst_executed.sum|cycles_active.avg|duration|stalled_(wait|barrier|long|short)" /tmp/ncu$dk.txt | sed 's/smsp__average_warps_issue_stalled_//' | cut -c1-110 | tee -a "$S"
done
say "total $(( $(date +%s) - t0 )) s"
