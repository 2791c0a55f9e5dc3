#!/usr/bin/env bash
# Prefill engineer, session 4, call 1: state-kernel variants at small grids (STATECUT_CHUNK_EXP) on 1x8192, the big
# shapes once, equivalence tests on two variants, ncu of two variants at 1x8192 dk 64.
set -uo pipefail
OUT=${OUT:-/tmp/pf-out}; mkdir -p "$OUT"; B=build-gpu-prefill; S="$OUT/00_summary.txt"
say() { echo "$*" | tee -a "$S"; }
say "$(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader) $(date -u +%FT%TZ)"
TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
t0=$(date +%s)
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATECUT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH="$TP" >/tmp/cfg.log 2>&1 || { tail -30 /tmp/cfg.log; exit 1; }
cmake --build $B -j16 --target bench_cuda_gated_delta equiv_gated_delta_cuda >/tmp/build.log 2>&1 || { grep -E "error" -A3 /tmp/build.log | head -40; exit 1; }
say "build $(( $(date +%s) - t0 )) s"
F1='prefill/B:1/T:8192/dk:(128|64)/'
for x in 0 1 2 3 4 5; do
  STATECUT_CHUNK_EXP=$x timeout 40 $B/bench/bench_cuda_gated_delta --benchmark_filter="$F1" >/tmp/b$x.log 2>&1
  say "exp $x rc=$?"; grep -E "^prefill" /tmp/b$x.log | sed 's/iterations:[0-9]*\/manual_time//' | cut -c1-170 | tee -a "$S"
done
timeout 60 $B/bench/bench_cuda_gated_delta --benchmark_filter='prefill/B:(8|32)/T:(8192|2048)/dk:(128|64)/' >/tmp/big.log 2>&1
say "big rc=$?"; grep -E "^prefill" /tmp/big.log | sed 's/iterations:[0-9]*\/manual_time//' | cut -c1-170 | tee -a "$S"
for x in 3 2; do
  STATECUT_CHUNK_EXP=$x timeout 100 $B/tests/equiv_gated_delta_cuda >/tmp/eq$x.log 2>&1
  say "equiv exp $x rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/eq$x.log | tr '\n' ' ')"
  grep -E "FAILED  \]|Failure" /tmp/eq$x.log | head -8 | tee -a "$S"
done
grep -h "^\[errors\]" /tmp/eq3.log | cut -c1-230 > "$OUT/errors_exp3.txt"
for x in 0 2; do
  STATECUT_CHUNK_EXP=$x timeout 45 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
    -k regex:'prep_kernel|state_kernel' -c 2 $B/bench/bench_cuda_gated_delta --benchmark_filter='prefill/B:1/T:8192/dk:64/' >"$OUT/ncu_exp$x.txt" 2>&1
  say "ncu exp $x rc=$?"
  grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Warp Cycles Per Issued|Issued Warp|No Eligible|Stall" "$OUT/ncu_exp$x.txt" | cut -c1-120 | head -30
done
cuobjdump -sass $B/kernels/CMakeFiles/statecut_cuda.dir/gated_delta_chunk.cu.o 2>/dev/null | gzip > "$OUT/chunk_sass.txt.gz"
cp /tmp/b0.log /tmp/b2.log "$OUT/" 2>/dev/null
say "total $(( $(date +%s) - t0 )) s"
